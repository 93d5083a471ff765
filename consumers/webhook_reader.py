"""The delivery process's read of the jobs topic: each outcome's deliveries recorded, then its offset committed.

Its consumer group is its own (``voxlog-webhooks.<jobs topic>``: one per log, so deployments that share a
broker never share a group), so it reads every outcome whatever the workers and the projector do, and
several copies share the topic's partitions. A batch's offsets are committed only once
every delivery its outcomes make is on the control topic: a crash, an outage or a rebalance in between reads
the batch again and makes the same deliveries (:mod:`consumers.webhook_outcomes`), never none. A part's
outcome that ends its document makes the document's too (:mod:`consumers.webhook_documents`). While the
projection does not show an outcome's job yet (the projector behind), or PostgreSQL or Kafka is down, the
batch waits and is tried again; nothing is skipped but records that cannot be decoded (the projector sends
those to the DLQ).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Final, Protocol

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRecord

from consumers.webhook_documents import DOCUMENT_OUTCOMES, document_deliveries
from consumers.webhook_outcomes import OutcomeStore, deliveries_of, wanted
from contracts import (
    HEADER_TRACEPARENT,
    HEADER_TYPE,
    DecodeError,
    JobEvent,
    Producer,
    WebhookDeliveryRecorded,
    decode_event,
    header_value,
    job_trace_of_record,
    utc_now,
)
from contracts.job_state import LIVE_STATES
from foundation.errors import FoundationError
from foundation.lifecycle import wait_for_stop
from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.webhooks import EndpointFacts

log = structlog.get_logger("voxlog.webhooks")
GROUP_PREFIX: Final = "voxlog-webhooks"
OUTCOME_TYPES: Final = frozenset(("JobCompleted", "JobFailed", "JobCancelled"))
CLOCK_SLACK_MS: Final = 60_000  # a record's broker timestamp may be behind the event's own clock


def group_of(jobs_topic: str) -> str:
    return f"{GROUP_PREFIX}.{jobs_topic}"


LIVE_VALUES: Final = frozenset(state.value for state in LIVE_STATES)
DOCUMENT_RECORD_WAIT: Final = timedelta(minutes=10)  # how long a part's outcome waits for its document's record
NOT_YET_S: Final = 1.0  # how long a batch whose job the projection does not show waits before it is read again


class NotProjectedYet(Exception):
    """An outcome's job is not in the projection yet: the batch is tried again."""


class NodesLog(Protocol):
    async def publish_all(self, events: Sequence[WebhookDeliveryRecorded]) -> object: ...


class OutcomeReader:
    def __init__(
        self, consumer: AIOKafkaConsumer, store: OutcomeStore, nodes: NodesLog, producer: Producer, outage: Outage
    ) -> None:
        self._consumer, self._store, self._nodes, self._producer = consumer, store, nodes, producer
        self._outage = outage

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            batch = await self._consumer.getmany(timeout_ms=1000, max_records=200)
            records = [record for records in batch.values() for record in records]
            while records and not stop.is_set():
                try:
                    made = await self.deliveries(records)
                    await self._nodes.publish_all(made)
                    await self._consumer.commit()
                except NotProjectedYet as exc:
                    log.info("an outcome waits for the projection", reason=str(exc))
                    await wait_for_stop(stop, NOT_YET_S)
                    continue
                except (FoundationError, ProjectionUnavailable) as exc:  # Kafka or PostgreSQL, as their adapters say
                    await wait_for_stop(stop, self._outage.failed(exc, step="an outcome's deliveries"))
                    continue
                self._outage.recovered()
                if made:
                    log.info("webhook deliveries made", deliveries=len(made))
                break

    async def deliveries(self, records: Sequence[ConsumerRecord]) -> list[WebhookDeliveryRecorded]:
        """Every delivery the outcomes among ``records`` make (:class:`NotProjectedYet` while a job is not)."""
        made: list[WebhookDeliveryRecorded] = []
        # Only outcomes, and only those after the first endpoint still registered (a new group reads the log
        # from its start: what came before any endpoint costs a header's look, not a decode and two reads).
        outcomes = [r for r in records if header_value(r.headers, HEADER_TYPE) in OUTCOME_TYPES]
        first = await self._store.first_endpoint_at() if outcomes else None
        for record in outcomes:
            if first is None or record.timestamp < first.timestamp() * 1000 - CLOCK_SLACK_MS:
                continue
            try:
                event = decode_event(record.value)
            except DecodeError:
                continue
            if wanted(event) is None:
                continue
            job = await self._store.job(event.job_id)
            if job is None or job.state in LIVE_VALUES:  # its JobQueued, or this outcome, is not projected yet
                raise NotProjectedYet(f"job {event.job_id}")
            endpoints = await self._store.endpoints(job.tenant)
            traceparent = job_trace_of_record(event, header_value(record.headers, HEADER_TRACEPARENT)).traceparent
            made += deliveries_of(event, job, endpoints, self._producer, traceparent)
            if job.document_id is not None and any(_wants_documents(e) for e in endpoints):
                made += await self._document(event, job.document_id, endpoints, traceparent)
        return made

    async def _document(
        self, event: JobEvent, document_id: uuid.UUID, endpoints: Sequence[EndpointFacts], traceparent: str | None
    ) -> list[WebhookDeliveryRecorded]:
        """The deliveries of the part's document, if this outcome ended it (:mod:`consumers.webhook_documents`)."""
        document = await self._store.document(document_id)
        if document is None:
            # Its record follows its parts on the log: the projector may not show it yet. A record that never
            # came (its submission stopped between the parts and the record, and was never retried) is not
            # waited for past a bound: that document does not exist, for the API either.
            if utc_now() - event.occurred_at < DOCUMENT_RECORD_WAIT:
                raise NotProjectedYet(f"document {document_id}")
            log.warning("a part's document was never recorded", document=str(document_id), job=str(event.job_id))
            return []
        parts = await self._store.parts(document_id, document.part_count)
        return document_deliveries(document_id, document.tenant, parts, endpoints, self._producer, traceparent)


def _wants_documents(endpoint: EndpointFacts) -> bool:
    return any(t in endpoint.event_types for t in DOCUMENT_OUTCOMES.values())
