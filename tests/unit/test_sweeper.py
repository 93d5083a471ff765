"""The sweeper's rules (consumers.sweeper): which claims are stale, and what it does about them."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from consumers.sweeper import Sweeper, SweeperConfig, stale_reason
from contracts import (
    AudioRef,
    JobReleased,
    NodeHeartbeat,
    NodeHeartbeatPayload,
    Producer,
    decode_node_event,
    derive_event_id,
    encode_event,
    node_event,
)
from contracts.scheduling import HeldClaim
from projections.reads.sweeper import Claim

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


RUNNING = uuid.UUID(int=6)


def holding(sent: float, *claims: HeldClaim, progress: float | None = None) -> NodeHeartbeatPayload:
    """A version-2 heartbeat of w1 listing ``claims`` (the first running), sent ``sent`` s after T0."""
    first = claims[0] if claims else None
    return pulse(sent, job=first.job_id if first else None, attempt=first.attempt if first else None,
                 progress=progress).model_copy(update={"claims": claims})  # fmt: skip


def held(job: uuid.UUID, attempt: int, progress: float, *, running: bool = False) -> HeldClaim:
    return HeldClaim(job_id=job, fingerprint="ab" * 32, attempt=attempt, text_chars=400, running=running,
                     progress_at=T0 + timedelta(seconds=progress))  # fmt: skip


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


@pytest.mark.parametrize(
    ("heartbeat", "now", "expected"),
    [
        # w1 holds two claims: another job's segment is on the engine, ours waits for its turn, and advances
        # when the engine does (its progress is the worker's).
        (holding(30, held(RUNNING, 1, 29, running=True), held(JOB, 2, 29)), 30, None),
        (holding(40, held(RUNNING, 1, 0, running=True), held(JOB, 2, 0)), 41, "no progress for 41s (allowed 40s)"),
        # Our claim dropped off the list the worker sends: it is no longer on it.
        (holding(10, held(RUNNING, 1, 9, running=True)), 12, None),  # the claim is young
        (holding(20, held(RUNNING, 1, 19, running=True)), 20, "worker w1 is alive but no longer on this job"),
        (holding(20), 20, "worker w1 is alive but no longer on this job"),  # it holds nothing
        (holding(20, held(JOB, 1, 19, running=True)), 20, "worker w1 is alive but no longer on this job"),  # attempt 1
    ],
)
def test_a_claim_is_judged_by_the_claims_its_worker_lists(heartbeat, now, expected):
    assert stale_reason(CLAIM, heartbeat, at(now), CONFIG, heard_since=T0 - timedelta(hours=1)) == expected


def version_1(sent: float, job: uuid.UUID, progress: float) -> NodeHeartbeatPayload:
    """A heartbeat as a version-1 worker sent it (its one job, no claims listed), read through the codec."""
    payload = pulse(sent, job=job, progress=progress).model_copy(update={"fingerprint": "ab" * 32})
    raw = json.loads(encode_event(node_event(NodeHeartbeat, Producer(service="worker", instance="w1"), payload)))
    raw["schema_version"] = 1
    for name in ("claims", "queue", "queue_counts"):
        del raw["payload"][name]
    beat = decode_node_event(json.dumps(raw).encode())
    assert isinstance(beat, NodeHeartbeat)
    return beat.payload


def test_a_version_1_heartbeat_is_judged_as_before_through_the_upcaster():
    on_it = version_1(40, JOB, progress=0.0)
    assert [(c.job_id, c.attempt, c.running) for c in on_it.claims] == [(JOB, 2, True)]
    since = T0 - timedelta(hours=1)
    assert stale_reason(CLAIM, on_it, at(40), CONFIG, heard_since=since) is None
    assert stale_reason(CLAIM, on_it, at(41), CONFIG, heard_since=since) == "no progress for 41s (allowed 40s)"
    elsewhere = version_1(20, RUNNING, progress=19.0)
    assert stale_reason(CLAIM, elsewhere, at(20), CONFIG, heard_since=since) == (
        "worker w1 is alive but no longer on this job"
    )


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
