"""A job's outcome becomes a webhook delivery to each of its tenant's endpoints that wants it.

The delivery process reads the jobs topic in a consumer group of its own (several copies share its
partitions). For each ``JobCompleted``, ``JobFailed`` or ``JobCancelled`` it reads the job's tenant from the
projection (waiting for the projector to show the job: its ``JobQueued`` came first), the tenant's endpoints
that want that outcome, and records a pending ``WebhookDeliveryRecorded`` for each on the control topic; only
then is the record's offset committed, so an outcome is never lost: a crash before the commit reads it
again, and makes the same deliveries.

A delivery's id (its ``webhook-id``) is derived from the endpoint and the outcome's event, and its first
record's id and clock from the delivery and the outcome: made again, a delivery is the same record, and it
is older than any attempt's, so it never undoes one (:func:`projections.accounts.delivery_recorded` keeps the
newest). A fenced outcome (a stale attempt's, a second completion) is not the job's outcome and makes none:
whether it applied is the projection's to say, so the job's row must show that state, ended at that event's
time.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Final, Protocol

from contracts import (
    JobCancelled,
    JobCompleted,
    JobEvent,
    JobFailed,
    Producer,
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    WebhookEventType,
)
from contracts.webhook_payloads import JobOutcome, WebhookBody
from projections.reads.webhooks import DocumentFacts, EndpointFacts, JobFacts, PartFacts

DELIVERY_NAMESPACE: Final = uuid.UUID("5d0c3b1e-7a52-4c8e-9f3d-2b6a1e8c4f71")
OUTCOMES: Final[dict[type, WebhookEventType]] = {
    JobCompleted: "job.completed",
    JobFailed: "job.failed",
    JobCancelled: "job.cancelled",
}


class OutcomeStore(Protocol):
    async def job(self, job_id: uuid.UUID) -> JobFacts | None:
        """The job as projected; ``None`` while the projector has not shown it."""
        ...

    async def endpoints(self, tenant: str) -> Sequence[EndpointFacts]:
        """The tenant's endpoints that are not removed."""
        ...

    async def first_endpoint_at(self) -> datetime | None:
        """When the first endpoint still registered (of any tenant) was; ``None``: there is none."""
        ...

    async def document(self, document_id: uuid.UUID) -> DocumentFacts | None:
        """The document as projected; ``None`` while the projector has not shown its record."""
        ...

    async def parts(self, document_id: uuid.UUID, count: int) -> Sequence[PartFacts | None]:
        """Its parts' jobs, in reading order (``None``: a part the projection does not show yet)."""
        ...


def delivery_id(endpoint_id: uuid.UUID, outcome_event_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(DELIVERY_NAMESPACE, f"{endpoint_id}/{outcome_event_id}")


def wanted(event: JobEvent) -> WebhookEventType | None:
    """The webhook event type ``event`` is, if it is an outcome."""
    return OUTCOMES.get(type(event))


def deliveries_of(
    event: JobEvent,
    job: JobFacts,
    endpoints: Sequence[EndpointFacts],
    producer: Producer,
    traceparent: str | None,
) -> list[WebhookDeliveryRecorded]:
    """The pending deliveries of ``event`` (an outcome the projection shows ``job`` ended with) to each of
    ``endpoints`` that wants it; none when the job's row says otherwise (a fenced outcome)."""
    event_type = wanted(event)
    if event_type is None or job.state != event_type.removeprefix("job.") or job.ended_at != event.occurred_at:
        return []  # not the event the job ended with: fenced (a stale attempt's, a second completion)
    outcome = JobOutcome(
        job_id=event.job_id,
        state=job.state,  # one of the three, checked above
        fingerprint=job.fingerprint,
        total_duration_ms=job.total_duration_ms if isinstance(event, JobCompleted) else None,
        cache_hit=job.cache_hit,
        error_code=job.error_code,
        error_message=job.error_message,
        document_id=job.document_id,
        audio_url=f"/v1/jobs/{event.job_id}/audio" if isinstance(event, JobCompleted) else None,
    )
    body = WebhookBody(type=event_type, timestamp=event.occurred_at, data=outcome).model_dump_json()
    made = []
    for endpoint in endpoints:
        if event_type not in endpoint.event_types or event.occurred_at < endpoint.created_at:
            continue  # not wanted, or an outcome from before the endpoint was registered
        delivery = delivery_id(endpoint.endpoint_id, event.event_id)
        payload = WebhookDeliveryRecordedPayload(
            delivery_id=delivery, endpoint_id=endpoint.endpoint_id, tenant=job.tenant, event_type=event_type,
            job_id=event.job_id, body=body, traceparent=traceparent, created_at=event.occurred_at,
            next_attempt_at=event.occurred_at,
        )  # fmt: skip
        made.append(first_record(payload, producer))
    return made


def first_record(payload: WebhookDeliveryRecordedPayload, producer: Producer) -> WebhookDeliveryRecorded:
    """A delivery's first record: its id derived from the delivery's, at its outcome's time (so it is the same
    record whenever it is made again, and older than any attempt's)."""
    return WebhookDeliveryRecorded(
        event_id=uuid.uuid5(DELIVERY_NAMESPACE, f"{payload.delivery_id}/made"),
        occurred_at=payload.created_at,
        producer=producer,
        payload=payload,
    )
