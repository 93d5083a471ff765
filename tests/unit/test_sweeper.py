"""The sweeper's rules (consumers.sweeper): which claims are stale, and what it does about them."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from consumers.sweeper import Claim, Sweeper, SweeperConfig, stale_reason
from contracts import AudioRef, JobReleased, NodeHeartbeatPayload, Producer, derive_event_id

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CONFIG = SweeperConfig(stale_after_s=15, stale_factor=4, min_expected_s=10, sweep_interval_s=1, blob_grace_s=60)
JOB = uuid.UUID(int=5)
CLAIM = Claim(JOB, "ab" * 32, 2, "w1", T0, text_chars=400, partition=5)


def pulse(
    sent: float, *, job: uuid.UUID | None = JOB, attempt: int | None = 2, progress: float | None = 0.0, speed=None
):
    return NodeHeartbeatPayload(
        worker_id="w1",
        engine="e",
        model_version="m",
        device="cpu",
        started_at=T0 - timedelta(hours=1),
        sent_at=T0 + timedelta(seconds=sent),
        job_id=job,
        attempt=attempt,
        progress_at=None if progress is None else T0 + timedelta(seconds=progress),
        chars_per_s=speed,
    )


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("heartbeat", "now", "expected"),
    [
        (None, 10, None),
        (None, 16, "no heartbeat from w1 since its claim 16s ago"),
        (pulse(5), 19, None),
        (pulse(5), 21, "worker w1 silent for 16s"),
        (pulse(-1), 10, None),  # sent before the claim: wait for one that knows it
        (pulse(30, progress=0.0), 40, None),  # 40 s without progress, allowed 4 x 10 s
        (pulse(40, progress=0.0), 41, "no progress for 41s (allowed 40s)"),
        (pulse(40, progress=0.0, speed=2.0), 41, None),  # 400 chars at 2/s: 200 s expected, 800 s allowed
        (pulse(900, progress=0.0, speed=2.0), 801, "no progress for 801s (allowed 800s)"),
        (pulse(10, job=uuid.UUID(int=6), attempt=1), 12, None),  # on another job, but the claim is young
        (pulse(20, job=uuid.UUID(int=6), attempt=1), 20, "worker w1 is alive but no longer on this job"),
        (pulse(20, attempt=1), 20, "worker w1 is alive but no longer on this job"),  # an older attempt of it
    ],
)
def test_stale_reason(heartbeat, now, expected):
    assert stale_reason(CLAIM, heartbeat, at(now), CONFIG, heard_since=T0 - timedelta(hours=1)) == expected


def test_regression_after_a_broker_outage_silence_counts_from_when_heartbeats_are_heard_again():
    """After the broker came back, the sweeper judged workers by the heartbeats it had before the outage
    (during which nobody could send one) and released live claims; a retry then raced the deletion of
    the released attempt's blobs, and a completed job lost its audio."""
    before_outage = pulse(5)
    heard_again = at(60)  # the book caught up with the topic again
    assert stale_reason(CLAIM, before_outage, at(62), CONFIG, heard_since=heard_again) is None
    assert stale_reason(CLAIM, None, at(62), CONFIG, heard_since=heard_again) is None
    assert stale_reason(CLAIM, before_outage, at(76), CONFIG, heard_since=heard_again) == "worker w1 silent for 16s"
    stalled = pulse(95, progress=0.0)
    assert stale_reason(CLAIM, stalled, at(96), CONFIG, heard_since=heard_again) is None, "progress counts from then"
    assert stale_reason(CLAIM, pulse(101, progress=0.0), at(101), CONFIG, heard_since=heard_again) == (
        "no progress for 41s (allowed 40s)"
    )


class Store:
    def __init__(self, claims: list[Claim]) -> None:
        self.claims = claims
        self.in_use: set[str] = set()

    async def live_claims(self):
        return self.claims

    async def attempt_blobs(self, job_id, attempt):
        return [AudioRef(sha256="cd" * 32, uri="file:///cd.wav"), AudioRef(sha256="ef" * 32, uri="file:///ef.wav")]

    async def referenced_elsewhere(self, sha256, job_id, attempt):
        return sha256 in self.in_use


class Book:
    def __init__(self, heartbeat, heard_since=T0 - timedelta(hours=1)) -> None:
        self.heartbeat = heartbeat
        self.since = heard_since

    def latest(self, worker_id):
        return self.heartbeat

    def heard_since(self):
        return self.since


class Log:
    def __init__(self) -> None:
        self.events: list[JobReleased] = []
        self.partitions: list[int | None] = []

    async def publish(self, event, *, partition=None):
        self.events.append(event)
        self.partitions.append(partition)
        return event


class Lead:
    async def hold(self) -> bool:
        return True

    async def resign(self) -> None: ...


async def test_a_stale_claim_is_released_once_with_the_id_every_release_of_that_attempt_has_and_its_blobs_go_later():
    store, log, removed = Store([CLAIM]), Log(), []

    async def remove(ref, idle_s):
        removed.append(ref.sha256)
        return True

    sweeper = Sweeper(CONFIG, Lead(), store, Book(None), log, Producer(service="sweeper", instance="s"), remove)
    assert [reason for _, reason in await sweeper.sweep(at(20))] == ["no heartbeat from w1 since its claim 20s ago"]
    [release] = log.events
    assert (release.attempt, release.payload.failed_attempt, release.payload.reason) == (2, 2, "stale")
    assert release.event_id == derive_event_id(JOB, "JobReleased", 2), "the id a worker's release would have"
    assert log.partitions == [5], "in the job's partition, wherever its fingerprint hashes"
    assert await sweeper.sweep(at(22)) == [], "not again while the projection catches up"
    assert removed == [], "the blobs wait for their grace period"

    store.claims = []  # the projection shows the release
    store.in_use = {"ef" * 32}  # a later attempt produced the same audio again
    await sweeper.sweep(at(81))
    assert removed == ["cd" * 32]


async def test_a_sweeper_that_does_not_hear_heartbeats_live_judges_no_claim():
    log = Log()

    async def remove(ref, idle_s):
        return True

    sweeper = Sweeper(
        CONFIG, Lead(), Store([CLAIM]), Book(None, None), log, Producer(service="s", instance="s"), remove
    )
    assert await sweeper.sweep(at(600)) == []
    assert log.events == []
