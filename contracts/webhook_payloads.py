"""What a webhook delivery's body says: the Standard Webhooks shape ``{type, timestamp, data}``.

``data`` names the job (or document) and what a receiver needs to act without asking again: its state, and
for a completed job its audio's length and where to fetch it; for a failure the reason. A receiver that wants
more reads ``GET /v1/jobs/{id}`` with its key: a delivery carries no audio and nothing another tenant's.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from contracts.events import WebhookEventType


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class JobOutcome(_Body):
    job_id: uuid.UUID
    state: Literal["completed", "failed", "cancelled"]
    fingerprint: str
    total_duration_ms: int | None = Field(None, description="A completed job's audio, in milliseconds.")
    cache_hit: bool = False
    error_code: str | None = Field(None, description="A failed job's reason; a cancelled job's is its cause.")
    error_message: str | None = None
    document_id: uuid.UUID | None = Field(None, description="The document the job is a part of, if any.")
    audio_url: str | None = Field(None, description="A completed job's audio, relative to the API: GET it with a key.")


class DocumentOutcome(_Body):
    document_id: uuid.UUID
    state: Literal["completed", "failed"]
    parts: int
    failed_parts: int = 0
    audio_url: str | None = Field(None, description="A completed document's audio, relative to the API.")


class WebhookBody(_Body):
    """One delivery's body, the same on every attempt of it (its ``webhook-id`` too)."""

    type: WebhookEventType
    timestamp: AwareDatetime = Field(description="When the outcome happened (its event's time on the log).")
    data: Annotated[JobOutcome | DocumentOutcome, Field(union_mode="left_to_right")]
