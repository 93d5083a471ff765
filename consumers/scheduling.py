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

import bisect
import math
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from contracts import Priority
from contracts.scheduling import NAMED, EngineTurns, SchedulingRule, WaitedBehind

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
    """The worker's last ``capacity`` engine turns: what a job waited behind is read from here.

    Asked once a claim, over the turns since its job was read: behind a deep backlog, hundreds. So each job's
    turns and each one's latest are kept by job as well, and a question costs the jobs that took more than one
    turn, and the :data:`~contracts.scheduling.NAMED` latest others, not every turn since."""

    def __init__(self, policy: Policy, capacity: int = 8192) -> None:
        if capacity < 1:
            raise ValueError("a turn log holds at least one turn")
        self._policy = policy
        self._capacity = capacity
        self._turns: deque[Turn] = deque()
        self._of_job: dict[uuid.UUID, list[Turn]] = {}  # each job's turns in the log, earliest first
        self._latest: list[int] = []  # the number of each job's latest turn in the log, ascending
        self._repeated: set[uuid.UUID] = set()  # the jobs with more than one turn in the log
        self.count = 0  # turns taken since the worker started

    def record(self, job: Contender, now: float) -> None:
        self.count += 1
        snapshot = Contender(
            job.job_id, job.fingerprint, job.tenant, job.priority, job.remaining_chars, job.seq, job.since
        )
        turn = Turn(self.count, snapshot, now)
        if len(self._turns) == self._capacity:
            self._forget(self._turns.popleft())
        self._turns.append(turn)
        own = self._of_job.setdefault(job.job_id, [])
        if own:
            self._drop_latest(own[-1].number)
            self._repeated.add(job.job_id)
        own.append(turn)
        self._latest.append(turn.number)  # the log's latest turn: the greatest number

    def _forget(self, turn: Turn) -> None:
        """``turn``, the log's earliest, drops out of it."""
        job_id = turn.job.job_id
        own = self._of_job[job_id]
        own.pop(0)
        if not own:  # it was the job's latest as well
            del self._of_job[job_id]
            self._drop_latest(turn.number)
        if len(own) < 2:
            self._repeated.discard(job_id)

    def _drop_latest(self, number: int) -> None:
        del self._latest[bisect.bisect_left(self._latest, number)]

    def _since(self, job_id: uuid.UUID, since_turn: int) -> tuple[Turn, int] | None:
        """``job_id``'s earliest turn after ``since_turn`` in the log, and its turns since (``None``: none)."""
        own = self._of_job.get(job_id, [])
        first = bisect.bisect_right(own, since_turn, key=lambda turn: turn.number)
        return (own[first], len(own) - first) if first < len(own) else None

    def behind(self, waiter: Contender, since_turn: int, waited_s: float) -> WaitedBehind | None:
        """What ``waiter`` waited behind from turn ``since_turn`` on (``None``: nothing took the engine)."""
        if not self._turns:
            return None
        complete = self._turns[0].number <= since_turn + 1
        own = self._since(waiter.job_id, since_turn)
        own_turns = own[1] if own is not None else 0
        turns = self.count - max(since_turn, self._turns[0].number - 1)
        jobs = len(self._latest) - bisect.bisect_right(self._latest, since_turn) - (1 if own is not None else 0)
        if jobs <= 0:
            return None
        # Ranked by segments, then by their latest turn, the latest first: the jobs with more than one turn,
        # and of the others (one turn each) the NAMED latest, as no other of those can rank before them.
        ranked: list[tuple[int, int, Turn]] = []  # (segments, latest turn's number, earliest turn since)
        for job_id in self._repeated:
            found = self._since(job_id, since_turn) if job_id != waiter.job_id else None
            if found is not None:
                ranked.append((found[1], self._of_job[job_id][-1].number, found[0]))
        singles = 0
        first = self._turns[0].number
        for number in reversed(self._latest):
            if number <= since_turn or singles == NAMED:
                break
            turn = self._turns[number - first]
            if turn.job.job_id in self._repeated or turn.job.job_id == waiter.job_id:
                continue
            ranked.append((1, number, turn))
            singles += 1
        ranked.sort(key=lambda item: (-item[0], -item[1]))
        named = tuple(
            EngineTurns(
                job_id=turn.job.job_id,
                tenant=turn.job.tenant,
                priority=turn.job.priority,
                segments=segments,
                rule=self._policy.rule(turn.job, waiter, turn.at),
            )
            for segments, _, turn in ranked[:NAMED]
        )
        return WaitedBehind(
            policy=self._policy.name,
            jobs=named,
            job_count=jobs,
            segment_count=turns - own_turns,
            waited_ms=max(0, round(1000 * waited_s)),
            complete=complete,
        )
