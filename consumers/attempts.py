"""An attempt as data: what the worker hands the job runner, why to give it back, and what it did.

The worker decides what to do with a job and describes one attempt at it
(:class:`Attempt`); the runner (:mod:`consumers.job_runner`) emits the
attempt's events and returns what happened (:class:`AttemptResult`). Neither
calls the other back: the worker asks for the job back by setting the
attempt's :class:`AbortSignal`, which the runner reads at every segment
boundary, and it defers, resolves or redoes the job's record by the result.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from consumers.acknowledgements import Recorder
from consumers.cancellation import CancelWatch
from consumers.ledger import JobView
from contracts import SynthesisRequest
from contracts.events import ReleaseReason
from contracts.scheduling import WaitedBehind

if TYPE_CHECKING:
    from consumers.engine_turns import HeldTurns


@dataclass(frozen=True)
class Abort:
    """Why to give a job back at the next segment boundary, and whether its retry waits a backoff."""

    reason: ReleaseReason
    message: str
    backoff: bool = False


@dataclass
class AbortSignal:
    """Set by the worker (a revocation past its grace, the watchdog, shutdown); read by the runner at every
    segment boundary: the attempt then releases its job. A claim waiting for the engine's turn stops waiting
    (:meth:`given_back`)."""

    reason: Abort | None = None
    _set: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    def give_back(self, reason: Abort) -> None:
        self.reason = reason
        self._set.set()

    async def given_back(self) -> None:
        await self._set.wait()


@dataclass(frozen=True)
class Attempt:
    """One attempt at one job, as the worker hands it to the runner."""

    job: JobView
    request: SynthesisRequest
    number: int
    ledger: Recorder
    """Where the attempt's events count once acknowledged: the ledger of the job's partition."""
    abort: AbortSignal = field(default_factory=AbortSignal)
    cancel: CancelWatch | None = None
    """Asked at segment boundaries whether the job was cancelled (see :mod:`consumers.cancellation`)."""
    wait_for_completion: bool = True
    """``False``: the completion is handed to the log and not waited for; the result's ``recorded`` says
    when it is acknowledged, and the worker goes on meanwhile."""
    turns: HeldTurns | None = None
    """The claim's place among those the worker holds: its segments wait for the engine's turn
    (:mod:`consumers.engine_turns`); ``None``: the engine is the attempt's alone."""
    waited: WaitedBehind | None = None
    """What the job waited behind on this worker before its claim: recorded in the claim."""

    def waited_while_claimed(self) -> WaitedBehind | None:
        """What the job waited behind since its claim (other claims' segments between its own)."""
        return self.turns.waited() if self.turns is not None else None


AttemptEnd = Literal["completed", "released", "failed", "cancelled"]


@dataclass(frozen=True)
class AttemptResult:
    """What an attempt did, its events handed to the log (all acknowledged, but for a completion not waited
    for: then ``recorded`` resolves ``True`` once it and everything with it are acknowledged and recorded in the
    ledger, ``False`` once one of them was refused or dropped)."""

    kind: AttemptEnd
    segments: int = 0
    total_duration_ms: int = 0
    recorded: asyncio.Future[bool] | None = None
