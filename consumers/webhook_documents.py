"""A document's outcome becomes a webhook delivery when one of its parts' outcomes ends it.

A part's job names its document (``JobQueued`` 8), so the outcome that ends a part reads the document's
other parts from the projection (after the projection shows this outcome: the reader waits for that) and
decides the document's state by the one rule the API's progress uses (:mod:`contracts.document_state`).
When two parts end at once, on partitions read by two copies, at least one of them sees both ended (each
reads after its own part is projected), and both may: the delivery's id is derived from the endpoint, the
document and its state, and its first record from the delivery, so a second decision is the same record.

A completed document's time is its last part's end (the same whichever part decided it); a failed one's is
its first failure the projection shows. A cancelled document makes none: no webhook event type says it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Final

from consumers.webhook_outcomes import DELIVERY_NAMESPACE, first_record
from contracts import JobState, Producer, WebhookDeliveryRecorded, WebhookDeliveryRecordedPayload, WebhookEventType
from contracts.document_state import document_state, part_silent
from contracts.webhook_payloads import DocumentOutcome, WebhookBody
from projections.reads.webhooks import EndpointFacts, PartFacts

DOCUMENT_OUTCOMES: Final[dict[str, WebhookEventType]] = {
    "completed": "document.completed",
    "failed": "document.failed",
}


def document_delivery_id(endpoint_id: uuid.UUID, document_id: uuid.UUID, event_type: str) -> uuid.UUID:
    return uuid.uuid5(DELIVERY_NAMESPACE, f"{endpoint_id}/{document_id}/{event_type}")


def document_deliveries(
    document_id: uuid.UUID,
    tenant: str,
    parts: Sequence[PartFacts | None],
    endpoints: Sequence[EndpointFacts],
    producer: Producer,
    traceparent: str | None,
) -> list[WebhookDeliveryRecorded]:
    """The pending deliveries of the document's outcome, if ``parts`` (all of them, in order) end it."""
    state = document_state(parts)
    event_type = DOCUMENT_OUTCOMES.get(state)
    if event_type is None:
        return []  # still live, or cancelled
    failures = [p for p in parts if p is not None and p.state is JobState.FAILED and not part_silent(p)]
    ends = [p.ended_at for p in (failures if failures else parts) if p is not None and p.ended_at is not None]
    if not ends:
        return []  # a row without its end's time: not a state the reducer makes
    at = min(ends) if failures else max(ends)
    outcome = DocumentOutcome(
        document_id=document_id,
        state="failed" if failures else "completed",
        parts=len(parts),
        failed_parts=len(failures),
        audio_url=None if failures else f"/v1/documents/{document_id}/audio",
    )
    body = WebhookBody(type=event_type, timestamp=at, data=outcome).model_dump_json()
    made = []
    for endpoint in endpoints:
        if event_type not in endpoint.event_types or at < endpoint.created_at:
            continue  # not wanted, or an outcome from before the endpoint was registered
        payload = WebhookDeliveryRecordedPayload(
            delivery_id=document_delivery_id(endpoint.endpoint_id, document_id, event_type),
            endpoint_id=endpoint.endpoint_id, tenant=tenant, event_type=event_type, document_id=document_id,
            body=body, traceparent=traceparent, created_at=at, next_attempt_at=at,
        )  # fmt: skip
        made.append(first_record(payload, producer))
    return made
