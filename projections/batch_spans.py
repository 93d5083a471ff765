"""The projector's part of each job's trace: the batch that made the job's events visible.

A batch holds records of many jobs, so it is one span in each of their
traces: a child of the span of the job's last record in the batch (its
``traceparent`` header names it), from the batch's start to its commit, after
which the API shows what the records say.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from aiokafka import ConsumerRecord

from contracts import HEADER_TRACEPARENT, JobEvent, NodeEvent, header_value, parse_traceparent
from contracts.events import EVENT_CLASSES
from foundation import tracing


def record_batch_spans(
    projector: str, decoded: Sequence[tuple[ConsumerRecord, JobEvent | NodeEvent]], started_ns: int
) -> None:
    """One ``projection batch`` span per job in ``decoded``, committed now (nothing when spans go nowhere)."""
    if not tracing.exporting():
        return
    last: dict[uuid.UUID, tuple[ConsumerRecord, JobEvent, int]] = {}
    for record, event in decoded:
        if isinstance(event, EVENT_CLASSES):
            seen = last.get(event.job_id)
            last[event.job_id] = (record, event, 1 + (seen[2] if seen else 0))
    ended = tracing.now_ns()
    for record, event, count in last.values():
        parent = parse_traceparent(header_value(record.headers, HEADER_TRACEPARENT))
        if parent is None:
            continue
        attributes: dict[str, tracing.Attribute] = {
            "voxlog.projector": projector,
            "voxlog.job_id": str(event.job_id),
            "voxlog.batch.records": len(decoded),
            "voxlog.batch.job_records": count,
            "voxlog.last_event": event.type,
        }
        span = tracing.start_span(
            "projection batch", parent, kind="consumer", start_ns=started_ns, attributes=attributes
        )
        span.end(at_ns=ended)
