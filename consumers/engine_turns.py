"""The engine's turns among the claims a worker holds: one forward at a time, its places given by the policy.

Each held claim's attempt asks for a turn before its engine call
(:meth:`EngineTurns.turn`), and gives it back as soon as the engine is done
with its segment (the audio is stored and its event sent while the next
forward is on the engine). A forward (:mod:`consumers.forwards`) carries the
next segment of up to ``batch`` claims in one engine call (one on a CPU): when
it is done the policy (:class:`consumers.scheduling.Policy`) picks the claims
of the next one among those waiting and those that just made a segment (whose
places are kept while they store it), each tenant is charged its segments'
share of the engine time, and each pick is remembered
(:class:`consumers.scheduling.TurnLog`). A claim given back by the worker
(its :class:`~consumers.attempts.AbortSignal` set) stops waiting at once:
:class:`TurnWithdrawn`, and the attempt releases its job at that boundary.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from consumers.attempts import AbortSignal
from consumers.errors import ConsumerError
from consumers.forwards import Asked, Forward, run_forward
from consumers.ports import PlannedSegment, Rendering, SpeechEngine
from consumers.scheduling import Contender, Policy, TurnLog
from contracts.engine_info import BatchLimits
from contracts.scheduling import NAMED, SchedulingRule, WaitedBehind
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
    forward: int = 0  # the engine call its latest segment rode in (EngineTurns.forwards)
    last_segment: bool = False
    """The segment it asks a turn for is its attempt's last: no place is kept for it in the next forward."""
    engine_share_s: float | None = None
    """Its last segment's share of its batched forward's engine time (``None``: rendered alone, timed by
    whoever called): each place of a forward waits for the whole forward, but the engine spent that time on
    all of them."""

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
                for p in ranked[:NAMED]
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

    async def render(
        self,
        call: Callable[..., Awaitable[Any]],
        engine: SpeechEngine,
        segment: PlannedSegment,
        voice: str,
        speed: float,
    ) -> Rendering:
        """Within ``engine()``: the segment rendered in this claim's forward (batched with the others in it)."""
        return await self.gate.render(self, call, engine, segment, voice, speed)

    def finished(self) -> None:
        """The attempt ended: it wants no more turns."""
        self.gate.finished(self)

    def asking(self, size: int) -> None:
        """The next segment it asks a turn for is ``size`` long (phoneme ids, or characters)."""
        self.gate.asking(self, size)

    def progressed(self, remaining_chars: int) -> None:
        """Its work left, after a segment or its plan: what *shorter first* compares."""
        self.job.remaining_chars = max(0, remaining_chars)


# A batch's segments are padded to its longest: within a bucket no segment is more than twice another.
LENGTH_BUCKET = 2.0


class EngineTurns:
    """``batch``: the most segments a forward carries; ``padded_ids``: the most padded ids (its segments times
    its longest, as each claim told by :meth:`HeldTurns.asking`; 0: no bound), the device's memory and its
    curve's knee (``tts_node.batch_sizing``). A forward always takes its first segment. A claim whose place
    is kept for its next segment is counted at the length of the one it just made."""

    def __init__(self, policy: Policy, log: TurnLog, batch: int = 1, padded_ids: int = 0) -> None:
        if batch < 1 or padded_ids < 0:
            raise ValueError("a forward carries at least one segment")
        self.policy = policy
        self.log = log
        self.batch = batch
        self.limits = BatchLimits(batch, padded_ids)
        self._holders: dict[uuid.UUID, HeldTurns] = {}  # granted a place in the forward, not released yet
        self._waiting: dict[uuid.UUID, tuple[HeldTurns, asyncio.Future[None]]] = {}
        self._interactive_in_a_row = 0
        self._forward: Forward | None = None  # being formed, or on the engine
        # Claims that just made a segment and that the policy still puts in the next forward: the engine waits
        # the moment they take to store their audio, rather than going round the claims (which would finish
        # none of them until all were nearly done: every completion, and every offset commit, later).
        self._reserved: set[uuid.UUID] = set()
        self._next_size: dict[uuid.UUID, int] = {}  # each held claim's next segment's length (HeldTurns.asking)
        self.forwards = 0  # forwards that granted a place: the number a segment's batch is known by

    @property
    def running(self) -> uuid.UUID | None:
        """A job whose segment is on the engine now (the first granted, in a batch)."""
        return next(iter(self._holders), None)

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

    async def render(
        self,
        claim: HeldTurns,
        call: Callable[..., Awaitable[Any]],
        engine: SpeechEngine,
        segment: PlannedSegment,
        voice: str,
        speed: float,
    ) -> Rendering:
        """``segment`` rendered in the forward ``claim`` holds a place in (inside its turn): alone, the call is
        made here as ever; beside others, once every place has asked, one batched call for them all."""
        forward, job_id = self._forward, claim.job.job_id
        claim.engine_share_s = None
        if forward is None or job_id not in forward.pending:  # no place in a forward being formed: alone
            rendering: Rendering = await call(engine.render, segment, voice, speed)
            return rendering
        forward.pending.discard(job_id)
        if not forward.pending and not forward.requests:  # the only segment of its forward
            forward.started = True
            rendering = await call(engine.render, segment, voice, speed)
            return rendering
        result: asyncio.Future[Rendering] = asyncio.get_running_loop().create_future()
        forward.requests[job_id] = Asked(segment, voice, speed, result)
        forward.call, forward.engine = call, engine
        if not forward.pending:
            self._start(forward)
        try:
            rendering = await result
        except asyncio.CancelledError:  # its attempt is over (a hung engine): the others still want theirs
            if forward.task is not None and all(r.result.done() for r in forward.requests.values()):
                forward.task.cancel()
            raise
        if forward.engine_s is not None:
            claim.engine_share_s = forward.engine_s / len(forward.requests)
        return rendering

    def _start(self, forward: Forward) -> None:
        forward.started = True
        forward.task = asyncio.ensure_future(run_forward(forward))

    async def _acquire(self, claim: HeldTurns) -> None:
        if claim.abort.reason is not None:
            raise TurnWithdrawn(f"job {claim.job.job_id} given back before its turn")
        if self._granted_at_once(claim):
            return
        job_id, forward = claim.job.job_id, self._forward
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        claim.job.since = time.monotonic()
        if forward is not None:  # their segments were on the engine first (the latest turns are theirs)
            for holder_id, turn in sorted(forward.turns.items(), key=lambda item: item[1]):
                holder = self._holders.get(holder_id)
                if holder is not None:
                    claim.passed_by(holder.job, "log_order", turn)
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

    def _granted_at_once(self, claim: HeldTurns) -> bool:
        """A place for ``claim`` with no wait: kept for it, or on an idle engine, or in the forward being formed
        while no one waits."""
        job_id, forward = claim.job.job_id, self._forward
        if job_id in self._reserved:  # its place in the next forward was kept while it stored its segment
            self._reserved.discard(job_id)
            if forward is not None and job_id in forward.places:
                self._grant(claim, forward)
                return True
        if self._waiting:
            return False
        if forward is None:  # the engine is idle: a forward of its own, at once
            self._grant(claim, self._new_forward())
            return True
        if forward.room and self._fits(list(forward.places), claim.job):  # joins the forward being formed
            self._grant(claim, forward)
            return True
        return False

    def _new_forward(self) -> Forward:
        self._forward = Forward(self.batch)
        return self._forward

    def _grant(self, claim: HeldTurns, forward: Forward, passed: tuple[HeldTurns, ...] = ()) -> None:
        """A place in ``forward`` to ``claim``: every claim waiting, and those in ``passed`` (claims that made the
        last segments and want the next, which the policy no longer puts in it), were passed by it."""
        job_id = claim.job.job_id
        self._holders[job_id] = claim
        forward.places.add(job_id)
        forward.pending.add(job_id)
        now, turn = time.monotonic(), self.log.count + 1
        forward.turns[job_id] = turn
        if not forward.number:  # numbered by its first place granted: a forward formed for places kept for
            self.forwards += 1  # claims that then ended is never numbered
            forward.number = self.forwards
        claim.forward = forward.number
        for waiter in [*(held for held, _ in self._waiting.values()), *passed]:
            if waiter is not claim:
                waiter.passed_by(claim.job, self.policy.rule(claim.job, waiter.job, now), turn)
        interactive = claim.job.priority == "interactive"
        self._interactive_in_a_row = self._interactive_in_a_row + 1 if interactive else 0
        self.log.record(claim.job, time.monotonic())

    def _release(self, claim: HeldTurns, engine_s: float) -> None:
        now, job_id = time.monotonic(), claim.job.job_id
        forward = self._forward
        if forward is not None and job_id in forward.places:
            if forward.engine_s is not None and forward.requests:
                engine_s = forward.engine_s / len(forward.requests)  # the batch's time, shared by its segments
            forward.places.discard(job_id)
            forward.pending.discard(job_id)
            if claim.job.remaining_chars > 0 and not claim.last_segment:
                forward.releasers.append(claim)
        self.policy.shares.charge(claim.job.tenant, engine_s, now)
        self._holders.pop(job_id, None)
        if forward is not None:
            self._settle(forward, now)

    def finished(self, claim: HeldTurns) -> None:
        """``claim`` wants no more turns (its attempt ended): a place kept for it goes to the others."""
        job_id, forward = claim.job.job_id, self._forward
        self._next_size.pop(job_id, None)
        if forward is not None and claim in forward.releasers:  # ended before its forward did: no place for it
            forward.releasers.remove(claim)
        if job_id not in self._reserved:
            return
        self._reserved.discard(job_id)
        if forward is not None:
            forward.places.discard(job_id)
            forward.pending.discard(job_id)
            self._settle(forward, time.monotonic())

    def _settle(self, forward: Forward, now: float) -> None:
        """After a place was released or given up: start the forward, or form the next once it is done."""
        if forward is not self._forward:
            return
        if not forward.places:
            self._forward = None
            self._hand_on(now, tuple(forward.releasers))
            return
        if forward.room and self._waiting:  # a place given up before the start goes to the next in line
            self._fill(forward, now)
        if not forward.started and not forward.pending and forward.requests:
            self._start(forward)

    def _fill(self, forward: Forward, now: float) -> None:
        for job in self._choose([held.job for held, _ in self._waiting.values()], now, list(forward.places)):
            claim, granted = self._waiting.pop(job.job_id)
            self._grant(claim, forward)
            granted.set_result(None)

    def _hand_on(self, now: float, releasers: tuple[HeldTurns, ...] = ()) -> None:
        """Form the next forward: up to ``batch`` claims in the policy's order, of those waiting and those that
        just made a segment (whose places are kept for them while they store it)."""
        if self._forward is not None:
            return
        releasers = tuple(r for r in releasers if r.job.job_id not in self._waiting)
        chosen = self._choose([*(held.job for held, _ in self._waiting.values()), *(r.job for r in releasers)], now)
        if not chosen:
            return
        forward = self._new_forward()
        kept = {r.job.job_id for r in releasers}
        granted = []
        for job in chosen:
            if job.job_id in kept:
                self._reserved.add(job.job_id)  # it goes on with its next segment
                forward.places.add(job.job_id)
                forward.pending.add(job.job_id)
            else:
                granted.append(self._waiting.pop(job.job_id))
        picked = {job.job_id for job in chosen}
        # A claim that made the last segment and wants the next asks for its turn only once its segment is
        # stored: by then a short job's only segment may be done, and what it waited behind would be lost. It
        # is told now.
        passed = tuple(r for r in releasers if r.job.job_id not in picked)
        for claim, future in granted:
            self._grant(claim, forward, passed)
            future.set_result(None)

    def _choose(
        self, contenders: list[Contender], now: float, placed: list[uuid.UUID] | None = None
    ) -> list[Contender]:
        """Up to ``batch`` contenders beside those ``placed`` already, each the one the policy puts first among
        those left, as turns in a row; when more want places than there are, a batch claim whose next segment is
        of another length bucket than the first pick's waits for a later forward (padding to the longest item
        is the batch's waste), unless places would be left empty. An interactive claim is never put off for the
        length; any claim whose segment would take the forward past ``padded_ids`` waits for a later one."""
        taken = list(placed or ())
        chosen: list[Contender] = []
        put_off: list[Contender] = []
        in_a_row = self._interactive_in_a_row
        while contenders and len(taken) < self.batch:
            pick = self.policy.pick(contenders, in_a_row, now)
            if pick is None:
                break
            contenders = [c for c in contenders if c is not pick]
            if not self._fits(taken, pick):
                continue
            if chosen and pick.priority != "interactive" and not self._alike(chosen[0], pick):
                put_off.append(pick)
                continue
            chosen.append(pick)
            taken.append(pick.job_id)
            in_a_row = in_a_row + 1 if pick.priority == "interactive" else 0
        for pick in put_off:
            if len(taken) < self.batch and self._fits(taken, pick):
                chosen.append(pick)
                taken.append(pick.job_id)
        return chosen

    def _fits(self, taken: list[uuid.UUID], other: Contender) -> bool:
        """Whether ``other``'s next segment beside those of ``taken`` keeps the forward within ``padded_ids``."""
        if not self.limits.padded_ids or not taken:
            return True
        longest = max(self._next_size.get(job_id, 0) for job_id in [*taken, other.job_id])
        return self.limits.fits(len(taken) + 1, longest)

    def _alike(self, first: Contender, other: Contender) -> bool:
        """Whether ``other``'s next segment is within a factor of ``LENGTH_BUCKET`` of ``first``'s (unknown: yes)."""
        a, b = self._next_size.get(first.job_id, 0), self._next_size.get(other.job_id, 0)
        return not a or not b or max(a, b) <= LENGTH_BUCKET * min(a, b)

    def asking(self, claim: HeldTurns, size: int) -> None:
        """``claim``'s next segment is ``size`` long (its phoneme ids, or characters): its length bucket."""
        self._next_size[claim.job.job_id] = size
