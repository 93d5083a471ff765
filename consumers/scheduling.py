"""The worker's scheduling policy, ``fair-srpt``: which waiting job to claim, and whose segment goes next.

A worker holds several claims and its engine makes one segment at a time
(:mod:`consumers.engine_turns`); the same policy orders the jobs waiting for
a claim (:mod:`consumers.run_queue`) and the claims waiting for the engine.
Its rules, in order (the first that tells two jobs apart decides):

1. **Class.** Interactive before batch; but after ``interactive_per_batch``
   interactive picks in a row, batch work gets one (``batch_turn``), so
   that it never starves.
2. **Fair share.** The tenant that used the least of this worker's engine
   lately, per unit of its weight, goes first (engine seconds, halving every
   ``half_life_s``): a tenant's flood delays its own jobs, not another
   tenant's.
3. **Shorter first.** The job with less work left goes first (its text's
   characters, within a factor of two: jobs of a like size keep log order),
   aged: a job's work counts as divided by ``1 + waited / aging_s``, so that
   a long job is not passed over for ever.
4. **Log order.** Whoever the worker read first.

Every pick is remembered (:class:`TurnLog`), and a job's claim and completion
say which jobs took the engine while it waited and by which rule
(:class:`contracts.scheduling.WaitedBehind`).
"""

from __future__ import annotations

import math
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from contracts import Priority
from contracts.scheduling import MAX_NAMED, EngineTurns, SchedulingRule, WaitedBehind

POLICY_NAME: Final = "fair-srpt"


@dataclass
class Contender:
    """A job as the policy sees it: a job waiting for a claim, or a held claim waiting for the engine."""

    job_id: uuid.UUID
    fingerprint: str
    tenant: str
    priority: Priority
    remaining_chars: int
    seq: int  # the order the worker read it in
    since: float = field(default_factory=time.monotonic)  # when it began to wait (monotonic)

    def effective_chars(self, now: float, aging_s: float) -> float:
        return self.remaining_chars / (1.0 + max(0.0, now - self.since) / aging_s)

    def size_class(self, now: float, aging_s: float) -> int:
        """Its aged work, within a factor of two: jobs of a like size go in log order (each partition's
        offsets then move on as its jobs are done), a job of half the work or less goes first."""
        return math.floor(math.log2(1.0 + self.effective_chars(now, aging_s)))


class FairShares:
    """Each tenant's recent use of the engine, in engine seconds that halve every ``half_life_s``, over its
    weight (1 unless set)."""

    def __init__(self, weights: Mapping[str, float], half_life_s: float) -> None:
        self._weights = dict(weights)
        self._half_life_s = half_life_s
        self._used: dict[str, tuple[float, float]] = {}  # tenant -> (seconds, as of monotonic time)

    def used(self, tenant: str, now: float) -> float:
        seconds, at = self._used.get(tenant, (0.0, now))
        return seconds * math.pow(0.5, max(0.0, now - at) / self._half_life_s) / self._weights.get(tenant, 1.0)

    def charge(self, tenant: str, seconds: float, now: float) -> None:
        decayed = self.used(tenant, now) * self._weights.get(tenant, 1.0)
        self._used[tenant] = (decayed + seconds, now)


class Policy:
    name = POLICY_NAME

    def __init__(self, shares: FairShares, interactive_per_batch: int, aging_s: float) -> None:
        self.shares = shares
        self.interactive_per_batch = interactive_per_batch
        self.aging_s = aging_s

    def order_key(self, contender: Contender, now: float) -> tuple[float, int, int]:
        """Within one class: fair share, then aged remaining work, then arrival."""
        return (
            self.shares.used(contender.tenant, now),
            contender.size_class(now, self.aging_s),
            contender.seq,
        )

    def pick(self, contenders: Iterable[Contender], interactive_in_a_row: int, now: float) -> Contender | None:
        """The contender to go next; ``interactive_in_a_row``: picks of interactive work since batch work's
        last."""
        interactive: list[Contender] = []
        batch: list[Contender] = []
        for contender in contenders:
            (interactive if contender.priority == "interactive" else batch).append(contender)
        batch_turn = interactive_in_a_row >= self.interactive_per_batch
        pool = batch if batch and (batch_turn or not interactive) else interactive
        if not pool:
            return None
        return min(pool, key=lambda c: self.order_key(c, now))

    def rule(self, first: Contender, waiting: Contender, now: float) -> SchedulingRule:
        """Why ``first`` went before ``waiting``: the first rule that tells them apart."""
        if first.priority != waiting.priority:
            return "interactive_first" if first.priority == "interactive" else "batch_turn"
        if first.tenant != waiting.tenant:
            return "fair_share"
        if first.size_class(now, self.aging_s) < waiting.size_class(now, self.aging_s):
            return "shorter_first"
        return "log_order"


@dataclass(frozen=True)
class Turn:
    """One segment the engine made, for whom, and how the job stood when it was picked."""

    number: int
    job: Contender
    at: float  # monotonic


class TurnLog:
    """The worker's last ``capacity`` engine turns: what a job waited behind is read from here."""

    def __init__(self, policy: Policy, capacity: int = 8192) -> None:
        self._policy = policy
        self._turns: deque[Turn] = deque(maxlen=capacity)
        self.count = 0  # turns taken since the worker started

    def record(self, job: Contender, now: float) -> None:
        self.count += 1
        snapshot = Contender(
            job.job_id, job.fingerprint, job.tenant, job.priority, job.remaining_chars, job.seq, job.since
        )
        self._turns.append(Turn(self.count, snapshot, now))

    def behind(self, waiter: Contender, since_turn: int, waited_s: float) -> WaitedBehind | None:
        """What ``waiter`` waited behind from turn ``since_turn`` on (``None``: nothing took the engine)."""
        complete = not self._turns or self._turns[0].number <= since_turn + 1
        counts: dict[uuid.UUID, tuple[Turn, int]] = {}
        for turn in reversed(self._turns):
            if turn.number <= since_turn:
                break
            if turn.job.job_id == waiter.job_id:
                continue
            segments = counts.get(turn.job.job_id, (turn, 0))[1]
            counts[turn.job.job_id] = (turn, segments + 1)  # its earliest turn since: the rule as it stood
        if not counts:
            return None
        ranked: Sequence[tuple[Turn, int]] = sorted(counts.values(), key=lambda item: -item[1])
        named = tuple(
            EngineTurns(
                job_id=turn.job.job_id,
                tenant=turn.job.tenant,
                priority=turn.job.priority,
                segments=segments,
                rule=self._policy.rule(turn.job, waiter, turn.at),
            )
            for turn, segments in ranked[:MAX_NAMED]
        )
        return WaitedBehind(
            policy=self._policy.name,
            jobs=named,
            job_count=len(counts),
            segment_count=sum(segments for _, segments in counts.values()),
            waited_ms=max(0, round(1000 * waited_s)),
            complete=complete,
        )
