"""The last steps of a submission: its records, placed, checked against the log's limit, and published.

A new job is a ``JobQueued``; an item a live result answers is the tenant's own
job too, a ``JobQueued`` followed by its ``JobCompleted`` (a cache hit of the
result's job, with the id the worker would give the same completion, so that a
worker coalescing the job as well records one fact). Each job's records go to
the partition the placement gives its ``JobQueued``. The record that names the
items (a document) goes first, then the jobs: a 503 midway leaves nothing its
retry, with the key the 503 names, does not complete; and no record is ever
sent that the broker would refuse (a 413 before the first is sent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from contracts import (
    DocumentSubmitted,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobQueued,
    encode_event,
    job_event,
    parse_traceparent,
    span_id_of,
)
from foundation import tracing
from foundation.errors import BrokerUnavailable, PublishUnconfirmed
from producers.errors import Rejected
from producers.ports import DocumentLog, JobLog, Placement
from producers.unreachable import unreachable
from projections.reads.rows import LiveResult

RECORD_OVERHEAD: Final = 4096
"""A ``JobQueued`` record's bytes beyond its text, at most (its text's bytes are at most four per character)."""


def cache_hit(queued: JobQueued, result: LiveResult) -> JobCompleted:
    """The completion of ``queued``'s job by the live ``result``: the id a coalescing worker derives too."""
    payload = JobCompletedPayload(
        segment_count=result.segment_count,
        total_duration_ms=result.total_duration_ms,
        cache_hit=True,
        source_job_id=result.job_id,
    )
    return job_event(
        JobCompleted, queued.job_id, queued.fingerprint, 0, queued.producer, payload, "cache", str(result.job_id)
    )


def _queued_spans(queued: Sequence[JobQueued], started_ns: int) -> None:
    """Each new job's ``JobQueued`` as a span of its request (from its publishing to its acknowledgement): the
    parent of the job's attempts, with the id every process derives from the record's event id."""
    if not tracing.exporting():
        return
    for event in queued:
        request = parse_traceparent(event.payload.traceparent)
        if request is not None:
            attributes = {"voxlog.job_id": str(event.job_id), "voxlog.priority": event.payload.priority}
            span = tracing.start_span(
                "job queued", request, span_id_of(event.event_id), kind="producer", start_ns=started_ns
            )
            span.end(attributes=attributes)


class Unrecorded(Rejected):
    """The log did not take (or confirm) the whole submission: a 503 naming the key to retry with."""

    def __init__(self, cause: BrokerUnavailable, key: str, *, sent: bool = True) -> None:
        said = unreachable("kafka", cause, idempotency_key=key)  # the driver's words (its hosts): the log's only
        if not sent:  # it failed before the first record went out (placement asks the broker first)
            what = f"the job log is unreachable ({said}); nothing was accepted or recorded"
        elif isinstance(cause, PublishUnconfirmed):
            what = "the job log (Kafka) did not confirm the submission in time; part of it may be recorded"
        else:
            what = f"the job log is unreachable ({said}); part of the submission may be recorded"
        super().__init__(
            f"{what}. Send it again with the header Idempotency-Key: {key} so that the retry names the same jobs",
            503,
        )
        self.key = key


class SubmissionLog:
    def __init__(
        self,
        publisher: JobLog,
        max_record_bytes: int,
        placement: Placement | None = None,
        document_log: DocumentLog | None = None,
    ) -> None:
        self._publisher = publisher
        self._max_record_bytes = max_record_bytes
        self._placement = placement
        self._document_log = document_log

    async def publish(
        self,
        queued: Sequence[JobQueued],
        completions: dict[int, JobCompleted],
        record: DocumentSubmitted | None,
        client_key: str,
        placed: Mapping[str, int] | None = None,
    ) -> None:
        """``queued`` (each followed by its completion in ``completions``, by position, if it has one) after
        ``record``; :class:`Unrecorded` when the log does not take them all. A job whose fingerprint ``placed``
        names goes to that partition (placed by the submission's lookup); the others are placed here."""
        self._check_sizes(queued, record)
        sent = False
        try:
            if record is not None:
                if self._document_log is None:
                    raise Rejected("this API records no documents", 404)
                sent = True
                await self._document_log.publish(record)
            if queued:
                placed_in = placed or {}
                rest = [event for event in queued if event.fingerprint not in placed_in]
                others = iter(await self._placement.place(rest) if self._placement is not None else [None] * len(rest))
                where = [placed_in[e.fingerprint] if e.fingerprint in placed_in else next(others) for e in queued]
                events: list[JobEvent] = []
                partitions: list[int | None] = []
                for i, (event, partition) in enumerate(zip(queued, where, strict=True)):
                    events.append(event)
                    partitions.append(partition)
                    if i in completions:
                        events.append(completions[i])
                        partitions.append(partition)
                sent = True
                started_ns = tracing.now_ns()
                await self._publisher.publish_all(events, partitions)  # type: ignore[arg-type]
                _queued_spans(queued, started_ns)
        except BrokerUnavailable as exc:
            raise Unrecorded(exc, client_key, sent=sent) from exc

    def _check_sizes(self, queued: Sequence[JobQueued], record: DocumentSubmitted | None) -> None:
        """413 before the first record is sent when one would be over the limit (a job's record is encoded only
        when its text could make it that large)."""
        limit = self._max_record_bytes
        if record is not None and len(encode_event(record)) > limit:
            raise Rejected(
                f"the document's record would be {len(encode_event(record)):,} bytes"
                f" ({len(record.payload.breaks):,} parts, {len(record.payload.chapters):,} chapters), over the"
                f" largest record the log takes (VOXLOG_MAX_RECORD_BYTES, {limit:,}): split the document, or give"
                " it fewer chapters",
                413,
            )
        for event in queued:
            if 4 * len(event.payload.request.text) + RECORD_OVERHEAD > limit and len(encode_event(event)) > limit:
                raise Rejected(
                    f"a job's record would be {len(encode_event(event)):,} bytes, over the largest record the log"
                    f" takes (VOXLOG_MAX_RECORD_BYTES, {limit:,}): send shorter texts",
                    413,
                )
