"""The sweeper: finds claims that stopped making progress and gives their jobs back.

Every ``sweep_interval_s`` the one sweeper that holds the lock (a PostgreSQL
advisory lock; see :class:`Leadership`) looks at every live claim in the
projection and at the latest heartbeat of the claiming worker, which it reads
from the control topic itself: a lagging projector must not make a live worker
look dead. A claim is stale when (:func:`stale_reason`):

- its worker has sent no heartbeat for ``stale_after_s`` (dead, stopped,
  cut off), or none at all since a claim older than that; silence counts
  only while the sweeper hears the control topic live (not during a broker
  outage, when no worker can send one);
- its worker is alive but does not list the claim among those it holds
  (``NodeHeartbeat`` version 2's ``claims``; a version-1 heartbeat's job is
  its one claim), and the claim is older than ``stale_after_s`` (the worker
  restarted, or lost the job);
- its worker lists it but the attempt made no progress (a claim, a segment)
  for longer than its expected time (its text length over the node's
  measured speed, at least ``min_expected_s``) times ``stale_factor``. A
  claim that waits for its turn on the engine advances when the engine does:
  its ``progress_at`` is the worker's last progress on any of its claims.

For each, the sweeper publishes ``JobReleased(reason="stale")`` for that
attempt, keyed by fingerprint like every job event, with the id a release of
that attempt always has: two sweepers, or a sweeper and the worker's own
watchdog, record one release. The partition's owner then claims the job one
attempt higher, and the projector fences the stale attempt's late events.
The released attempt's partial segments are dropped by the projection; their
blobs are deleted after ``blob_grace_s`` unless a segment refers to them
again or a writer touched them meanwhile.

The leader also keeps the result cache and the blob store bounded, every
``cache_sweep_interval_s`` (:mod:`consumers.cache_janitor`), and switches
the service modes by the backlog (:mod:`consumers.backlog_switch`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from consumers.backlog_switch import BacklogSwitch
from consumers.cache_janitor import CacheJanitor
from consumers.ports import EventLog
from consumers.worker_activity import expected_seconds
from contracts import (
    AudioRef,
    JobReleased,
    JobReleasedPayload,
    NodeHeartbeatPayload,
    Producer,
    job_event,
    utc_now,
)
from foundation.errors import BrokerUnavailable
from foundation.lifecycle import wait_for_stop
from foundation.metrics import SWEEPER_BLOBS_DELETED, SWEEPER_LEADER, SWEEPER_RELEASES, SWEEPER_SWEEPS
from foundation.outages import Outage
from projections.errors import ProjectionUnavailable
from projections.reads.sweeper import Claim

log = structlog.get_logger("voxlog.sweeper")


@dataclass(frozen=True)
class SweeperConfig:
    stale_after_s: float
    stale_factor: float
    min_expected_s: float
    sweep_interval_s: float
    blob_grace_s: float


def stale_reason(
    claim: Claim, pulse: NodeHeartbeatPayload | None, now: datetime, config: SweeperConfig, heard_since: datetime
) -> str | None:
    """Why ``claim`` is stale, given its worker's latest heartbeat; ``None`` while it is not.

    ``heard_since`` is when the sweeper began to hear the control topic live (after its start, or an
    outage of the broker, during which workers could not send heartbeats either): silence and a lack of
    progress count from then at the earliest.
    """
    claim_age = (now - max(claim.claimed_at, heard_since)).total_seconds()
    if pulse is None:
        if claim_age > config.stale_after_s:
            return f"no heartbeat from {claim.worker_id} since its claim {claim_age:.0f}s ago"
        return None
    silent = (now - max(pulse.sent_at, heard_since)).total_seconds()
    if silent > config.stale_after_s:
        return f"worker {claim.worker_id} silent for {silent:.0f}s"
    if pulse.sent_at <= claim.claimed_at:
        return None  # the heartbeat predates the claim: wait for one that knows it
    held = held_claims(pulse)
    if (claim.job_id, claim.attempt) in held:
        progress_at = held[(claim.job_id, claim.attempt)]
        if progress_at is None:
            return None
        allowed = config.stale_factor * expected_seconds(claim.text_chars, pulse.chars_per_s, config.min_expected_s)
        stalled = (now - max(progress_at, heard_since)).total_seconds()
        if stalled > allowed:
            return f"no progress for {stalled:.0f}s (allowed {allowed:.0f}s)"
        return None
    if claim_age > config.stale_after_s:
        return f"worker {claim.worker_id} is alive but no longer on this job"
    return None


def held_claims(pulse: NodeHeartbeatPayload) -> dict[tuple[uuid.UUID, int], datetime | None]:
    """Every claim the heartbeat's worker holds, (job, attempt), and when it last advanced. A heartbeat that
    names a job but lists no claim is a worker's that knows one claim at a time (one built before workers
    listed their claims): that job is its one claim, as the upcaster reads a version-1 heartbeat
    (``contracts.upcasting``)."""
    if not pulse.claims and pulse.job_id is not None and pulse.attempt is not None:
        return {(pulse.job_id, pulse.attempt): pulse.progress_at}
    return {(c.job_id, c.attempt): c.progress_at for c in pulse.claims}


class SweeperStore(Protocol):
    """The projection, as the sweeper reads it (raises ``ProjectionUnavailable`` when it cannot)."""

    async def live_claims(self) -> list[Claim]: ...

    async def attempt_blobs(self, job_id: uuid.UUID, attempt: int) -> list[AudioRef]: ...

    async def referenced_elsewhere(self, sha256: str, job_id: uuid.UUID, attempt: int) -> bool:
        """Whether a segment other than those of ``job_id``'s ``attempt`` refers to the blob."""
        ...


class Leadership(Protocol):
    async def hold(self) -> bool:
        """Whether this sweeper may act now (acquiring the lock if it is free); ``False`` while the lock
        cannot be had (an outage the adapter reports to the sweeper's :class:`Outage`)."""
        ...

    async def resign(self) -> None:
        """Give up the lead (let go of the lock) if held."""
        ...


class Heartbeats(Protocol):
    def latest(self, worker_id: str) -> NodeHeartbeatPayload | None: ...

    def heard_since(self) -> datetime | None:
        """Since when heartbeats have been read live; ``None`` while they are not (nothing is judged)."""
        ...


RemoveBlob = Callable[[AudioRef, float], Awaitable[bool]]


class Sweeper:
    def __init__(
        self,
        config: SweeperConfig,
        leadership: Leadership,
        store: SweeperStore,
        heartbeats: Heartbeats,
        events: EventLog,
        producer: Producer,
        remove_blob: RemoveBlob,
        janitor: CacheJanitor | None = None,
        backlog_switches: Sequence[BacklogSwitch] = (),
        outage: Outage | None = None,
    ) -> None:
        self.config = config
        # What the sweeper depends on (PostgreSQL, Kafka), as one outage: it is over once a whole look went well.
        self.outage = outage or Outage("PostgreSQL or Kafka (the sweeper)")
        self._leadership = leadership
        self._store = store
        self._heartbeats = heartbeats
        self._events = events
        self._producer = producer
        self._remove_blob = remove_blob
        self._doomed: list[tuple[datetime, Claim, AudioRef]] = []  # released attempts' blobs, when to check them
        self._released: dict[tuple[uuid.UUID, int], datetime] = {}  # until the projection shows the release
        self._janitor = janitor
        self._backlog_switches = tuple(backlog_switches)
        self._janitor_due = 0.0  # monotonic time of the next cache round
        self._deaf = False  # not hearing heartbeats live (said once, when it starts and ends)

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while True:
                failures = self.outage.failures
                leader = await self._leadership.hold()
                SWEEPER_LEADER.set(1 if leader else 0)
                if leader:
                    try:
                        await self.sweep(utc_now())
                    except (BrokerUnavailable, ProjectionUnavailable) as exc:
                        self.outage.failed(exc, skipped="a sweep; the next one follows")
                    await self._cache_round()
                    await self._backlog_round()
                if self.outage.failures == failures:
                    self.outage.recovered()
                if await wait_for_stop(stop, self.outage.wait_s(self.config.sweep_interval_s)):
                    return
        finally:
            SWEEPER_LEADER.set(0)
            await self._leadership.resign()

    async def _cache_round(self) -> None:
        if self._janitor is None or time.monotonic() < self._janitor_due:
            return
        try:
            await self._janitor.round(utc_now())
        except (BrokerUnavailable, ProjectionUnavailable) as exc:
            self.outage.failed(exc, skipped="a cache round; the next sweep tries again")
            return
        self._janitor_due = time.monotonic() + self._janitor.config.interval_s

    async def _backlog_round(self) -> None:
        try:
            for switch in self._backlog_switches:
                await switch.check()
        except (BrokerUnavailable, ProjectionUnavailable) as exc:
            self.outage.failed(exc, skipped="judging the backlog; the next sweep does")

    async def sweep(self, now: datetime) -> list[tuple[Claim, str]]:
        """One look at every live claim: release the stale ones, delete blobs whose time has come."""
        SWEEPER_SWEEPS.inc()
        released: list[tuple[Claim, str]] = []
        heard_since = self._heartbeats.heard_since()
        if (heard_since is None) != self._deaf:  # said when it changes, not at every sweep
            self._deaf = heard_since is None
            log.info("not hearing heartbeats live: no claim is judged" if self._deaf else "hearing heartbeats live")
        if heard_since is None:
            return released
        self._released = {key: at for key, at in self._released.items() if (now - at).total_seconds() < 60}
        for claim in await self._store.live_claims():
            if (claim.job_id, claim.attempt) in self._released:
                continue  # released already; the projection has not caught up yet
            pulse = self._heartbeats.latest(claim.worker_id)
            reason = stale_reason(claim, pulse, now, self.config, heard_since)
            if reason is not None:
                await self._release(claim, reason, now)
                released.append((claim, reason))
        await self._delete_due_blobs(now)
        return released

    async def _release(self, claim: Claim, reason: str, now: datetime) -> None:
        blobs = await self._store.attempt_blobs(claim.job_id, claim.attempt)
        payload = JobReleasedPayload(reason="stale", failed_attempt=claim.attempt, message=reason)
        await self._events.publish(
            job_event(JobReleased, claim.job_id, claim.fingerprint, claim.attempt, self._producer, payload, at=now),
            partition=claim.partition,
        )
        self._released[(claim.job_id, claim.attempt)] = now
        SWEEPER_RELEASES.labels(_reason_label(reason)).inc()
        log.warning("released a stale claim", job_id=str(claim.job_id), attempt=claim.attempt, reason=reason)
        due = now + timedelta(seconds=self.config.blob_grace_s)
        self._doomed += [(due, claim, ref) for ref in blobs]

    async def _delete_due_blobs(self, now: datetime) -> None:
        keep = []
        for due, claim, ref in self._doomed:
            if due > now:
                keep.append((due, claim, ref))
                continue
            in_use = await self._store.referenced_elsewhere(ref.sha256, claim.job_id, claim.attempt)
            if not in_use and await self._remove_blob(ref, self.config.blob_grace_s):
                SWEEPER_BLOBS_DELETED.inc()
        self._doomed = keep


def _reason_label(reason: str) -> str:
    if reason.startswith("no progress"):
        return "no_progress"
    if "alive but" in reason:
        return "worker_moved_on"
    return "silent_worker"
