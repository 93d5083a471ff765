"""The worker's one read before a claim (PostgresResultLookup.outlook) against the real projection."""

from __future__ import annotations

import uuid
from datetime import timedelta

from foundation.kafka import RecordPosition
from projections.batch_apply import apply_events
from projections.reads.worker import Outlook, PostgresResultLookup
from tests.support.job_logs import T0, _Builder

TTL = timedelta(minutes=10)


async def project(pool, *events) -> None:
    async with pool.acquire() as conn:
        await apply_events(conn, [(e, RecordPosition("jobs", 0, i)) for i, e in enumerate(events)], TTL)


async def test_the_outlook_tells_a_cancelled_job_and_a_live_result_of_its_fingerprint(pool):
    done = _Builder(uuid.UUID(int=1), request_text="Said once.")
    duplicate = _Builder(uuid.UUID(int=2), request_text="Said once.")
    cancelled = _Builder(uuid.UUID(int=3), request_text="Never said.")
    await project(pool, done.queued(), done.claimed(1), done.segment(1, 0), done.completed(1, 1))
    await project(pool, duplicate.queued(), cancelled.queued(), cancelled.cancelled())
    lookup = PostgresResultLookup(pool)
    now = T0 + timedelta(seconds=1)

    reusable = await lookup.outlook(duplicate.job_id, duplicate.fingerprint, now)
    stopped = await lookup.outlook(cancelled.job_id, cancelled.fingerprint, now)
    unknown = await lookup.outlook(uuid.UUID(int=4), "no such fingerprint", now)
    expired = await lookup.outlook(duplicate.job_id, duplicate.fingerprint, now + TTL)

    assert reusable.result is not None
    assert not reusable.cancelled
    assert (reusable.result.job_id, reusable.result.segment_count) == (done.job_id, 1)
    assert stopped == Outlook(cancelled=True, result=None)
    assert unknown == Outlook()  # not projected yet: neither cancelled nor reusable
    assert expired.result is None
