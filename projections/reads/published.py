"""A job as the projection will hold it once the projector has read the events the API just published.

The API answers a request that a live result completed at once (a cache hit: its ``JobQueued`` and its
``JobCompleted``, published together) before the projector has read either. Its answer is those events folded
by the projector's own fold (:class:`projections.reducer.Projection`), so it shows exactly the row a later
``GET`` reads, never a guess of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Final

from contracts import JobEvent
from foundation.kafka import RecordPosition
from projections.reads.rows import JobRecord, SegmentRow
from projections.reducer import Projection


class NotOneJob(ValueError):
    """The events given are not the life of one job (the API's bug, not the client's)."""


_UNUSED_TTL: Final = timedelta(0)  # the fold's result_cache rows are not read here


def published_job(
    events: Sequence[JobEvent], *, segments: tuple[SegmentRow, ...] = (), source_shown: bool
) -> JobRecord:
    """The ``jobs`` row that ``events`` (one job's, in the order published) fold to, with ``segments`` (a cache
    hit's are its source's) and its source job named only when ``source_shown`` (the asker's tenant's own, as
    :meth:`projections.reads.jobs.ProjectionReader.job` shows it)."""
    projection = Projection(_UNUSED_TTL)
    for offset, event in enumerate(events):
        projection.apply(event, RecordPosition("published", 0, offset))
    rows = list(projection.jobs.values())
    if len(rows) != 1:
        raise NotOneJob(f"{len(events)} events fold to {len(rows)} jobs, not one")
    (row,) = rows
    source = row.source_job_id if source_shown else None
    return JobRecord.from_mapping(vars(row), segments=segments, source_job_id=source)
