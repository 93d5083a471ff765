"""Where a new job goes: the partition of the jobs topic its ``JobQueued``, and so every later event of it, is in.

Keying by fingerprint alone gives each worker the jobs that hash to its
partitions: a static share, Binomial(jobs, 1/workers), so the busiest of
eight workers had 50 of 320 jobs where 40 is even (docs/benchmarks.md, (e)),
and nothing a worker can do about it. So the API places each new fingerprint
in the partition with the least work not finished yet, and keeps it there:

- **Duplicates still meet.** A fingerprint's placement is a row of ``placements``
  in PostgreSQL, written by the first submission's ``INSERT ... ON CONFLICT``
  and found by every later one (of any API process) until it expires, so two
  requests for the same audio, however close together, go to one partition,
  where its owner coalesces them in log order as before. A placement lives
  a day from its last use (``voxlog.composition.api.PLACEMENT_TTL_S``), longer than a job lives.
- **The least loaded partition of the least loaded worker.** The work of a
  partition is the text of its live jobs (queued, claimed or released for a
  retry), plus a job's fixed cost, as the projection shows it, read again in
  the background at most every ``REFRESH_S``; what this API placed is added
  until the projection shows it. A worker's work is its partitions' together
  (who owns which comes from the consumer group). Ties are broken at random.
  The reading is the read model's (:mod:`projections.reads.placement`).
- **Never in the way.** The table is not a projection (a replay does not
  rebuild it). When PostgreSQL cannot place a job, it goes to its
  fingerprint's own partition (the key's hash, as every job did before):
  at worst a duplicate placed apart from a live twin is synthesized twice,
  never answered wrongly. A fingerprint this API placed itself goes where it
  placed it (a retry with the same Idempotency-Key names the same job, which
  had better stay in one partition). ``VOXLOG_JOB_PLACEMENT=key`` places every
  job by key.

Every later event of a job goes to the partition its ``JobQueued`` is in
(the worker's ledger, the sweeper and the cancellations read it from the log
or the projection), so nothing downstream depends on the key's hash.
"""

from __future__ import annotations

import asyncio
import heapq
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Final, Protocol

import asyncpg

from contracts import JobQueued, SynthesisRequest
from foundation.db import reading
from foundation.errors import BrokerUnavailable
from foundation.kafka_groups import synth_group
from foundation.metrics import JOBS_PLACED
from foundation.outages import Outage
from producers.ports import JobLog, PlacementDraft
from projections.errors import ProjectionUnavailable
from projections.reads.placement import PLACE_SQL, partitions_work, projected_jobs

REFRESH_S: Final = 0.2
JOB_COST_CHARS: Final = 64
"""A job's cost beyond its text (a claim, a completion, the engine's call), in characters of text."""
QUERY_TIMEOUT_S: Final = 2.0
UNSEEN_FOR_S: Final = 30.0
"""Placed work the projection has not shown for this long is forgotten (its publish failed, say)."""
REMEMBERED: Final = 100_000
"""Placements an API remembers, for when PostgreSQL cannot be read (about 10 MB)."""
_FORGET: Final = "DELETE FROM placements WHERE expires_at < now() - interval '1 hour'"
_FORGET_EVERY_S: Final = 600.0


def least_loaded(
    work: Sequence[float],
    costs: Sequence[float],
    shares: Sequence[frozenset[int]] = (),
    rng: random.Random | None = None,
) -> list[int]:
    """A partition for each cost in turn, which then carries that cost too: with the workers' ``shares`` (the
    partitions each owns), the least loaded partition of the least loaded worker; without them, the least
    loaded partition. Ties are broken at random."""
    pick = rng or random
    owned = [sorted(p for p in share if p < len(work)) for share in shares]
    owned = [partitions for partitions in owned if partitions]
    if owned:
        return _least_loaded_worker(list(work), costs, owned, pick)
    heap = [(w, pick.random(), p) for p, w in enumerate(work)]
    heapq.heapify(heap)
    chosen = []
    for cost in costs:
        w, _, p = heapq.heappop(heap)
        chosen.append(p)
        heapq.heappush(heap, (w + cost, pick.random(), p))
    return chosen


def _least_loaded_worker(
    work: list[float], costs: Sequence[float], owned: list[list[int]], pick: random.Random | ModuleType
) -> list[int]:
    # A worker takes its partitions' jobs in turn, so its load is theirs together: even partitions can
    # still make one worker busier than another (13 + 14 + 14 against 13 + 13 + 13).
    member_work = [sum(work[p] for p in partitions) for partitions in owned]
    chosen = []
    for cost in costs:
        k = min(range(len(owned)), key=lambda i: (member_work[i], pick.random()))
        p = min(owned[k], key=lambda q: (work[q], pick.random()))
        chosen.append(p)
        work[p] += cost
        member_work[k] += cost
    return chosen


@dataclass
class _Placed:
    """Work this API placed, counted until the projection shows its jobs (then the reading counts them)."""

    at: float
    partition: int
    cost: float
    job_ids: tuple[uuid.UUID, ...]


@dataclass
class _Loads:
    """Each partition's work: the projection's reading plus what was placed since it was taken."""

    read: list[float]
    read_at: float = 0.0
    placed: list[_Placed] = field(default_factory=list)

    def work(self, count: int) -> list[float]:
        work = (self.read + [0.0] * count)[:count]
        for placed in self.placed:
            if placed.partition < len(work):
                work[placed.partition] += placed.cost
        return work


def _reserved(draft: PlacementDraft) -> dict[str, _Placed]:
    reserved: dict[str, _Placed] = draft.reserved  # type: ignore[assignment]  # its own, from propose
    return reserved


class WorkerShares(Protocol):
    """The partitions each member of a consumer group owns (``foundation.kafka_groups.GroupShares``); empty
    when it cannot tell."""

    async def shares(self, group: str) -> list[frozenset[int]]: ...


class BalancedPlacement:
    """Places new fingerprints in the least loaded partition (of the least loaded worker of the job's engine,
    when ``workers`` can tell who owns what), and keeps each where it was placed."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        log_: JobLog,
        ttl_s: float,
        workers: WorkerShares | None = None,
        synth_group_base: str = "",
    ) -> None:
        self._pool = pool
        self._log = log_
        self._ttl_s = ttl_s
        self._workers = workers
        self._group_base = synth_group_base
        self._known: OrderedDict[str, int] = OrderedDict()  # the placements this API made, newest last
        self._count: int | None = None
        self._loads = _Loads([])
        self._refresher: asyncio.Task[None] | None = None
        self._forgot_at = time.monotonic()
        # Said when PostgreSQL goes and comes back, not at every submission placed without it.
        self._outage = Outage("PostgreSQL (placement: jobs go as this API placed them, else by key)")

    async def place(self, jobs: Sequence[JobQueued]) -> list[int | None]:
        """The partition of each job (``None``: its fingerprint's own, when no placement could be had)."""
        if not jobs:
            return []
        try:
            count = await self._partition_count()
            placed_in = await self._place_new(jobs, count)
        except ProjectionUnavailable as exc:
            # What this API placed itself it still knows (a retry with the same Idempotency-Key names the same
            # job: it had better go where the first attempt went); the rest goes by key.
            known = [self._known.get(job.fingerprint) for job in jobs]
            JOBS_PLACED.labels("remembered").inc(sum(1 for p in known if p is not None))
            JOBS_PLACED.labels("key").inc(sum(1 for p in known if p is None))
            self._outage.failed(exc)
            return known
        self._remember(placed_in, len(jobs))
        return [placed_in[job.fingerprint] for job in jobs]

    async def propose(self, entries: Sequence[tuple[uuid.UUID, str, SynthesisRequest]]) -> PlacementDraft | None:
        """Partitions for new jobs (job id, fingerprint, request), their work counted at once, for the submission's
        lookup to upsert (:class:`producers.ports.PlacementDraft`); ``None`` when the log cannot say how many
        partitions it has (the jobs are placed at publish, which fails then anyway)."""
        if not entries:
            return None
        try:
            count = await self._partition_count()
        except BrokerUnavailable:
            return None
        fingerprints, proposed, reserved = await self._propose(entries, count)
        return PlacementDraft(
            tuple(fingerprints), tuple(proposed), count, self._ttl_s, dict(zip(fingerprints, reserved, strict=True))
        )

    def kept(self, draft: PlacementDraft, placed_in: Mapping[str, int]) -> None:
        reserved = _reserved(draft)
        for fingerprint, placed in reserved.items():
            placed.partition = placed_in[fingerprint]  # a known fingerprint keeps its partition
        self._remember(placed_in, sum(len(placed.job_ids) for placed in reserved.values()))

    def release(self, draft: PlacementDraft, fingerprints: Collection[str]) -> None:
        reserved = _reserved(draft)
        for fingerprint in fingerprints:
            if fingerprint in reserved:
                reserved[fingerprint].cost = 0.0

    async def _partition_count(self) -> int:
        count = self._count or await self._log.partition_count()
        self._count = count
        self._refresh_soon(count)
        return count

    def _remember(self, placed_in: Mapping[str, int], jobs: int) -> None:
        self._outage.recovered()
        JOBS_PLACED.labels("balanced").inc(jobs)
        for fingerprint, partition in placed_in.items():
            self._known[fingerprint] = partition
            self._known.move_to_end(fingerprint)
        while len(self._known) > REMEMBERED:
            self._known.popitem(last=False)

    async def _propose(
        self, entries: Sequence[tuple[uuid.UUID, str, SynthesisRequest]], count: int
    ) -> tuple[list[str], list[int], list[_Placed]]:
        """A partition for each distinct fingerprint of ``entries``, its work counted from now."""
        by_group: dict[str, dict[str, float]] = {}  # the workers of an engine and model version take its jobs
        ids: dict[str, tuple[uuid.UUID, ...]] = {}
        for job_id, fingerprint, request in entries:  # a fingerprint twice is one placement (and one synthesis)
            costs = by_group.setdefault(synth_group(self._group_base, request.engine, request.model_version), {})
            costs[fingerprint] = costs.get(fingerprint, 0) + len(request.text) + JOB_COST_CHARS
            ids[fingerprint] = (*ids.get(fingerprint, ()), job_id)
        fingerprints: list[str] = []
        proposed: list[int] = []
        reserved: list[_Placed] = []
        for group, costs in by_group.items():
            shares = await self._workers.shares(group) if self._workers is not None else []
            chosen = least_loaded(self._loads.work(count), list(costs.values()), shares)
            # Counted at once, before the database answers: the submissions that come meanwhile (dozens, under
            # load) must see this work, or they would all pick the same least loaded partition.
            now = time.monotonic()
            placed = [_Placed(now, p, costs[f], ids[f]) for f, p in zip(costs, chosen, strict=True)]
            self._loads.placed += placed
            fingerprints += costs
            proposed += chosen
            reserved += placed
        return fingerprints, proposed, reserved

    async def _place_new(self, jobs: Sequence[JobQueued], count: int) -> dict[str, int]:
        entries = [(job.job_id, job.fingerprint, job.payload.request) for job in jobs]
        fingerprints, proposed, reserved = await self._propose(entries, count)
        try:
            async with reading("the placements", ProjectionUnavailable):
                rows = await self._pool.fetch(
                    PLACE_SQL, fingerprints, proposed, self._ttl_s, count, timeout=QUERY_TIMEOUT_S
                )
        except ProjectionUnavailable:
            for unplaced in reserved:
                unplaced.cost = 0.0  # placed by key instead: where, this API does not know
            raise
        placed_in = {r["fingerprint"]: r["kafka_partition"] for r in rows}
        for f, kept in zip(fingerprints, reserved, strict=True):
            kept.partition = placed_in[f]  # a known fingerprint keeps its partition
        return placed_in

    def _refresh_soon(self, count: int) -> None:
        """Have the partitions' work read again, in the background, when the last reading is older than
        ``REFRESH_S``: a submission never waits for it (at light load every one would), it places by the
        reading it has."""
        if time.monotonic() - self._loads.read_at < REFRESH_S and len(self._loads.read) == count:
            return
        if self._refresher is not None and not self._refresher.done():
            return
        self._refresher = asyncio.create_task(self._refresh_quietly(count), name="placement: partitions' work")

    async def _refresh_quietly(self, count: int) -> None:
        try:
            await self.refresh(count)
        except ProjectionUnavailable as exc:
            self._outage.failed(exc, meanwhile="placing by the last reading of the partitions' work")

    async def stop(self) -> None:
        """Cancel a reading in flight (at the API's shutdown)."""
        task, self._refresher = self._refresher, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def refresh(self, count: int) -> None:
        """Read the partitions' work now (:class:`ProjectionUnavailable` when PostgreSQL cannot tell)."""
        started = time.monotonic()
        # Placed work stays counted until its jobs are projected: under a burst the projector lags, and work
        # forgotten before it shows up would draw more jobs to its partition. Asked before the reading, so
        # that a job seen projected is in the reading too (if still live).
        pending = [p for p in self._loads.placed if started - p.at < UNSEEN_FOR_S]
        async with reading("the partitions' work", ProjectionUnavailable):
            seen = await projected_jobs(self._pool, [i for p in pending for i in p.job_ids], QUERY_TIMEOUT_S)
            work = await partitions_work(self._pool, JOB_COST_CHARS, QUERY_TIMEOUT_S)
            if started - self._forgot_at > _FORGET_EVERY_S:
                self._forgot_at = started
                await self._pool.execute(_FORGET, timeout=QUERY_TIMEOUT_S)
        read = [0.0] * count
        for partition, partition_work in work.items():
            if partition < count:
                read[partition] = partition_work
        asked = {id(p) for p in pending}

        def unseen(placed: _Placed) -> bool:
            if id(placed) not in asked:  # placed during the reading (kept), or unseen for too long
                return placed.at >= started
            return not all(i in seen for i in placed.job_ids)

        self._loads = _Loads(read, time.monotonic(), [p for p in self._loads.placed if unseen(p)])
