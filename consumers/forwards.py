"""One engine call (a forward) of the claims a worker holds: the segment of each claim with a place in it.

:class:`consumers.engine_turns.EngineTurns` decides who has a place; this module holds the forward itself:
who asked for which segment, the one call that makes them all (batched where the engine batches), and each
place's own rendering or error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from consumers.ports import PlannedSegment, Rendering, SpeechEngine

if TYPE_CHECKING:
    from consumers.engine_turns import HeldTurns


@dataclass
class Asked:
    segment: PlannedSegment
    voice: str
    speed: float
    result: asyncio.Future[Rendering]


@dataclass
class Forward:
    """One engine call: the next segment of each claim granted a place in it (one place without batching).

    Places are given when the forward is formed (to waiting claims, and kept for claims that just made a
    segment and that the policy still puts in it) and while it is formed (a claim asking with the engine's
    line empty joins it). It starts once every place has asked for its segment or left, and is done when
    every place has been released: then the next forward is formed."""

    size: int
    number: int = 0  # EngineTurns.forwards when its first place was granted
    places: set[uuid.UUID] = field(default_factory=set)
    pending: set[uuid.UUID] = field(default_factory=set)  # places whose segment is not asked for yet
    turns: dict[uuid.UUID, int] = field(default_factory=dict)  # each granted place's turn in the log
    requests: dict[uuid.UUID, Asked] = field(default_factory=dict)
    releasers: list[HeldTurns] = field(default_factory=list)  # released with work left: the next forward's
    started: bool = False
    engine_s: float | None = None  # the engine's time for the whole forward, shared by its segments
    call: Callable[..., Awaitable[Any]] | None = None
    engine: SpeechEngine | None = None
    task: asyncio.Future[None] | None = None

    @property
    def room(self) -> bool:
        return not self.started and len(self.places) < self.size


async def run_forward(forward: Forward) -> None:
    """The forward's one engine call; each place's future gets its own rendering or error. Every error is
    handed to the places waiting for it, so this task itself never fails unseen."""
    requests = list(forward.requests.values())
    assert forward.call is not None
    assert forward.engine is not None
    began = time.monotonic()
    try:
        outcomes = await forward.call(render_batch, forward.engine, [(r.segment, r.voice, r.speed) for r in requests])
    except asyncio.CancelledError:
        for request in requests:
            request.result.cancel()
        raise
    except Exception as exc:  # the call itself failed (the FIFO closed): every place gets the error
        outcomes = [exc] * len(requests)
    forward.engine_s = time.monotonic() - began
    for request, outcome in zip(requests, outcomes, strict=True):
        if request.result.done():
            continue
        if isinstance(outcome, BaseException):
            request.result.set_exception(outcome)
        else:
            request.result.set_result(outcome)


def render_batch(
    engine: SpeechEngine, items: Sequence[tuple[PlannedSegment, str, float]]
) -> list[Rendering | Exception]:
    """Each item's rendering or error, on the engine's thread: one call where the engine batches; where the
    batch fails, each item again alone, so that one segment the engine cannot speak fails its own job only."""
    batched = getattr(engine, "render_batch", None)
    if batched is not None and len(items) > 1:
        try:
            return list(batched(items))
        except Exception:  # noqa: S110  # told apart item by item below
            pass
    outcomes: list[Rendering | Exception] = []
    for segment, voice, speed in items:
        try:
            outcomes.append(engine.render(segment, voice, speed))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes
