"""The worker's reads of the projection (PostgresResultLookup: the one read before a claim, or claims taken together,
the cancellations of the jobs it holds, the segments it may reuse) against the real projection."""

from __future__ import annotations

import uuid
from datetime import timedelta

from contracts import AudioRef, SegmentProduced
from contracts.events import TextSpan
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


async def test_the_cancellations_of_every_held_job_come_in_one_read(pool):
    jobs = [_Builder(uuid.UUID(int=10 + n), request_text=f"Sentence {n}.") for n in range(4)]
    running, queued, cancelled, cancelled_running = jobs
    await project(pool, *(job.queued() for job in jobs), running.claimed(1), cancelled_running.claimed(1))
    await project(pool, cancelled.cancelled(), cancelled_running.cancelled())
    lookup = PostgresResultLookup(pool)
    not_projected = uuid.UUID(int=99)

    found = await lookup.cancelled_among([job.job_id for job in jobs] + [not_projected])

    assert found == {cancelled.job_id, cancelled_running.job_id}
    assert await lookup.cancelled_among([running.job_id, queued.job_id]) == set()
    assert await lookup.cancelled_among([]) == set()


def keyed_segment(job: _Builder, index: int, key: str, sha: str) -> SegmentProduced:
    made = job.segment(1, index)
    audio = AudioRef(sha256=sha, uri=f"file:///blobs/{sha}.wav")
    span = TextSpan(start=10, end=14, text=f"S{index}.")
    payload = made.payload.model_copy(update={"segment_key": key, "audio": audio, "span": span})
    return made.model_copy(update={"payload": payload})


async def test_the_segments_a_forward_may_reuse_come_in_one_read_each_the_latest_of_its_key(pool):
    earlier, later = _Builder(uuid.UUID(int=21), request_text="A. B."), _Builder(uuid.UUID(int=22), request_text="C.")
    later.clock = 1_000  # its segments were produced after the earlier job's
    await project(pool, earlier.queued(), earlier.claimed(1), keyed_segment(earlier, 0, "k1", "a" * 64))
    await project(pool, later.queued(), later.claimed(1), keyed_segment(later, 0, "k1", "b" * 64))
    await project(pool, keyed_segment(later, 1, "k2", "c" * 64))
    lookup = PostgresResultLookup(pool)

    found = await lookup.segments(["k1", "k2", "never said"])

    assert sorted(found) == ["k1", "k2"]
    assert found["k1"].audio.sha256 == "b" * 64, "the latest segment of its key"
    assert (found["k2"].audio.sha256, found["k2"].text, found["k2"].duration_ms) == ("c" * 64, "S1.", 100)
    assert await lookup.segments([]) == {}


async def test_the_outlooks_of_claims_taken_together_come_in_one_read_each_as_the_job_alone_would(pool):
    done = _Builder(uuid.UUID(int=31), request_text="Said once.")
    duplicate = _Builder(uuid.UUID(int=32), request_text="Said once.")
    cancelled = _Builder(uuid.UUID(int=33), request_text="Never said.")
    fresh = _Builder(uuid.UUID(int=34), request_text="Said now.")
    await project(pool, done.queued(), done.claimed(1), done.segment(1, 0), done.completed(1, 1))
    await project(pool, duplicate.queued(), cancelled.queued(), cancelled.cancelled(), fresh.queued())
    lookup = PostgresResultLookup(pool)
    now = T0 + timedelta(seconds=1)
    not_projected = (uuid.UUID(int=35), "no such fingerprint")
    asked = [(job.job_id, job.fingerprint) for job in (duplicate, cancelled, fresh)] + [not_projected]

    found = await lookup.outlooks(asked, now)

    assert set(found) == {job_id for job_id, _ in asked}, "every job asked is answered, projected or not"
    assert found[duplicate.job_id].result is not None
    assert (found[duplicate.job_id].result.job_id, found[duplicate.job_id].cancelled) == (done.job_id, False)
    assert found[cancelled.job_id] == Outlook(cancelled=True, result=None)
    assert found[fresh.job_id] == found[not_projected[0]] == Outlook()
    expired = await lookup.outlooks(asked, now + TTL)
    assert all(outlook.result is None for outlook in expired.values()), "a result lives until it expires"
    assert expired[cancelled.job_id].cancelled
    assert await lookup.outlooks([], now) == {}
