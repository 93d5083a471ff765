"""Where coalescing is decided: a job whose fingerprint already has a live result reuses it.

Duplicates meet in their fingerprint's partition, so the worker that owns the
partition sees every one of them, in order. A job reuses a result when a
*different* job of the same fingerprint completed by synthesis less than the
cache TTL ago. The worker's own ledger is asked first: the projection lags
the log, and a result this worker just produced (or read in the partition's
tail) is not in ``result_cache`` yet. The projection answers for results
older than this worker's ownership of the partition.

(The API also answers a submission at once when ``result_cache`` already
holds its fingerprint; that is a read of the same results, before the job
ever reaches the log.)
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import structlog

from consumers.ledger import JobView, Ledger
from consumers.ports import AudioSink, ResultLookup
from projections.errors import ProjectionUnavailable
from projections.reads.worker import CachedResult

log = structlog.get_logger("voxlog.worker")


async def reusable_result(
    view: JobView, ledger: Ledger, projected: CachedResult | None, lookup: ResultLookup, blobs: AudioSink, now: datetime
) -> CachedResult | None:
    """The live result ``view``'s job may complete with instead of being synthesized, if any: the
    ledger's, else ``projected`` (the projection's, read beforehand in the job's :class:`Outlook`).

    With the projection unreadable (``projected`` None), only the ledger answers: at worst a duplicate is synthesized
    again, which is wasted work, never a wrong answer. A result is reused only once its blobs are
    marked used (the sweeper then keeps them for the new job's retention); one whose blobs are gone
    already is synthesized afresh. A result the projection does not show yet was completed within
    the projector's lag, so its blobs are fresh, and kept for the retention anyway.
    """
    found = ledger.live_result(view.fingerprint, now) or projected
    if found is None or found.job_id == view.job_id:
        return None
    try:
        refs = await lookup.result_blobs(found.job_id)
    except ProjectionUnavailable:
        refs = []
    if refs and not await asyncio.to_thread(blobs.touch, refs):
        log.info("the cached result's audio is gone: synthesizing again", job_id=str(view.job_id))
        return None
    return found
