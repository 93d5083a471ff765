"""The engine's turns among the claims a worker holds: one segment at a time, by the policy.

Each held claim's attempt asks for a turn before its engine call
(:meth:`EngineTurns.turn`), and gives it back as soon as the engine is done
with its segment (the audio is stored and its event sent while the next
claim's segment is on the engine). When the turn is given back the policy
(:class:`consumers.scheduling.Policy`) picks among the claims waiting for it,
the tenant is charged the engine time, and the pick is remembered
(:class:`consumers.scheduling.TurnLog`). A claim given back by the worker
(its :class:`~consumers.attempts.AbortSignal` set) stops waiting at once:
:class:`TurnWithdrawn`, and the attempt releases its job at that boundary.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from consumers.attempts import AbortSignal
from consumers.errors import ConsumerError
from consumers.scheduling import Contender, Policy, TurnLog
from contracts.scheduling import MAX_NAMED, SchedulingRule, WaitedBehind
from contracts.scheduling import EngineTurns as EngineTurns_


class TurnWithdrawn(ConsumerError):
    """The claim was given back while it waited for the engine: its attempt ends at this boundary."""


@dataclass
class _Passed:
    job: Contender
    segments: int
    rule: SchedulingRule


@dataclass
class HeldTurns:
    """One held claim's side of the engine's turns: who it is to the policy, and its give-back signal."""

    gate: EngineTurns
    job: Contender
    abort: AbortSignal
    claimed_turn: int = 0  # the turn log's count when the claim was taken
    claimed_at: float = field(default_factory=time.monotonic)
    passed: dict[uuid.UUID, _Passed] = field(default_factory=dict)
    """The claims whose segments went while this one waited for the engine, and the rule (as it stood then)."""
    counted_turn: int = 0  # the last engine turn counted in ``passed``: a turn that passed it counts once

    def waited(self) -> WaitedBehind | None:
        """What this claim waited behind since it was taken."""
        if not self.passed:
            return None
        ranked = sorted(self.passed.values(), key=lambda p: -p.segments)
        return WaitedBehind(
            policy=self.gate.policy.name,
            jobs=tuple(
                EngineTurns_(
                    job_id=p.job.job_id, tenant=p.job.tenant, priority=p.job.priority, segments=p.segments, rule=p.rule
                )
                for p in ranked[:MAX_NAMED]
            ),
            job_count=len(ranked),
            segment_count=sum(p.segments for p in ranked),
            waited_ms=max(0, round(1000 * (time.monotonic() - self.claimed_at))),
        )

    def passed_by(self, job: Contender, rule: SchedulingRule, turn: int) -> None:
        """Engine turn ``turn`` went to ``job`` (by ``rule``) while this claim wanted it."""
        if turn <= self.counted_turn:
            return
        self.counted_turn = turn
        known = self.passed.get(job.job_id)
        if known is None:
            self.passed[job.job_id] = _Passed(job, 1, rule)
        else:
            known.segments += 1

    @asynccontextmanager
    async def engine(self) -> AsyncIterator[None]:
        async with self.gate.turn(self):
            yield

    def finished(self) -> None:
        """The attempt ended: it wants no more turns."""
        self.gate.finished(self)

    def progressed(self, remaining_chars: int) -> None:
        """Its work left, after a segment or its plan: what *shorter first* compares."""
        self.job.remaining_chars = max(0, remaining_chars)


class EngineTurns:
    def __init__(self, policy: Policy, log: TurnLog) -> None:
        self.policy = policy
        self.log = log
        self._holder: uuid.UUID | None = None
        self._waiting: dict[uuid.UUID, tuple[HeldTurns, asyncio.Future[None]]] = {}
        self._interactive_in_a_row = 0
        self._held: dict[uuid.UUID, HeldTurns] = {}  # the holder's, by its job
        # The claim that just made a segment and that the policy still puts first: the engine waits the moment
        # it takes to store its audio, rather than going round the claims (which would finish none of them
        # until all were nearly done: every completion, and every offset commit, later).
        self._reserved: uuid.UUID | None = None

    @property
    def running(self) -> uuid.UUID | None:
        """The job whose segment is on the engine now."""
        return self._holder

    def waiting(self) -> list[uuid.UUID]:
        return list(self._waiting)

    @asynccontextmanager
    async def turn(self, claim: HeldTurns) -> AsyncIterator[None]:
        await self._acquire(claim)
        started = time.monotonic()
        try:
            yield
        finally:
            self._release(claim, time.monotonic() - started)

    async def _acquire(self, claim: HeldTurns) -> None:
        if claim.abort.reason is not None:
            raise TurnWithdrawn(f"job {claim.job.job_id} given back before its turn")
        job_id = claim.job.job_id
        if self._reserved == job_id or (self._holder is None and self._reserved is None and not self._waiting):
            self._reserved = None
            self._grant(claim)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        claim.job.since = time.monotonic()
        holder = self._held.get(self._holder) if self._holder is not None else None
        if holder is not None:  # its segment was on the engine first (the latest turn is the holder's)
            claim.passed_by(holder.job, "log_order", self.log.count)
        self._waiting[job_id] = (claim, granted)
        given_back = asyncio.ensure_future(claim.abort.given_back())
        try:
            await asyncio.wait({granted, given_back}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled (a hung engine's attempt): never leave the turn held
            if granted.done() and not granted.cancelled():
                self._release(claim, 0.0)
                self.finished(claim)  # it will not come back for the turn kept for it
            raise
        finally:
            given_back.cancel()
            if not granted.done():  # given back, or the attempt cancelled: out of the line
                self._waiting.pop(job_id, None)
                granted.cancel()
        if granted.cancelled() or not granted.done():
            raise TurnWithdrawn(f"job {job_id} given back while it waited for the engine")

    def _grant(self, claim: HeldTurns, passed: HeldTurns | None = None) -> None:
        """The next turn to ``claim``: every claim waiting for it, and ``passed`` (the claim that made the last
        segment and wants the next, which the policy no longer puts first), was passed by it."""
        self._holder = claim.job.job_id
        self._held[claim.job.job_id] = claim
        now, turn = time.monotonic(), self.log.count + 1
        for waiter in [*(held for held, _ in self._waiting.values()), *([passed] if passed else [])]:
            if waiter is not claim:
                waiter.passed_by(claim.job, self.policy.rule(claim.job, waiter.job, now), turn)
        interactive = claim.job.priority == "interactive"
        self._interactive_in_a_row = self._interactive_in_a_row + 1 if interactive else 0
        self.log.record(claim.job, time.monotonic())

    def _release(self, claim: HeldTurns, engine_s: float) -> None:
        now = time.monotonic()
        self.policy.shares.charge(claim.job.tenant, engine_s, now)
        if self._holder == claim.job.job_id:
            self._holder = None
            self._held.pop(claim.job.job_id, None)
        self._hand_on(now, releaser=claim if claim.job.remaining_chars > 0 else None)

    def finished(self, claim: HeldTurns) -> None:
        """``claim`` wants no more turns (its attempt ended): a turn kept for it goes to the others."""
        if self._reserved == claim.job.job_id:
            self._reserved = None
            self._hand_on(time.monotonic())

    def _hand_on(self, now: float, releaser: HeldTurns | None = None) -> None:
        if self._holder is not None or self._reserved is not None:
            return
        contenders = [held.job for held, _ in self._waiting.values()]
        if releaser is not None:
            contenders.append(releaser.job)
        if not contenders:
            return
        chosen = self.policy.pick(contenders, self._interactive_in_a_row, now)
        if chosen is None:
            return
        if releaser is not None and chosen is releaser.job:
            self._reserved = chosen.job_id  # it goes on with its next segment
            return
        claim, granted = self._waiting.pop(chosen.job_id)
        # The releaser, with work left, asks for its next turn only once its segment is stored: by then a
        # short job's only segment may be done, and what it waited behind would be lost. It is told now.
        self._grant(claim, passed=releaser)
        granted.set_result(None)
