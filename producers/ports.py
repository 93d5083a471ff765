"""What the API needs from the outside, as protocols; the composition root hands it the adapters."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Protocol

from contracts import JobQueued


class JobLog(Protocol):
    """The jobs topic, as the API writes it.

    ``publish`` returns once the event is acknowledged (acks=all) and raises
    ``foundation.errors.BrokerUnavailable`` when it cannot be, so that nothing
    half-recorded is ever answered with 202. ``check`` raises the same when
    the log is unreachable (readiness).
    """

    async def publish(self, event: JobQueued) -> object: ...

    async def check(self) -> None: ...


class LagView(Protocol):
    """Consumer lag as last sampled: the document ``voxlog lag --json`` prints."""

    def latest(self) -> dict[str, Any]: ...


class JobAudit(Protocol):
    """Jobs as the log tells them (not the projection).

    Both raise ``foundation.errors.BrokerUnavailable`` when the log cannot be read in time.
    """

    async def events(self, job_id: uuid.UUID) -> dict[str, Any] | None:
        """Every event of the job with its place in the log and what the projection did with it (None: none)."""
        ...

    async def job_as_of(self, job_id: uuid.UUID, moment: datetime) -> dict[str, Any] | None:
        """The job's ``jobs`` row and segments as they stood at ``moment`` (None: not submitted yet)."""
        ...
