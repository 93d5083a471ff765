"""Segments' audio encoded and written to the blob store off the event loop, a forward's segments in one hop.

Every place of a forward gets its rendering at once and asks to store it at once. Each asking for a thread
of its own (``asyncio.to_thread``) woke a pool thread per segment, and the loop again per segment through
its self-pipe: at a GPU's pace, with 32 one-segment jobs a forward, those hand-offs were about a tenth of
the worker's pool threads' time (docs/profile.md, "At GPU pace"). So the stores asked in one turn of the
loop go to the pool together, as one call that encodes and writes each in turn, and stores asked while
that call runs go together in the next. Each segment still gets its own outcome: one blob the disk
refuses fails its own job only.

The write of a job whose attempt is cancelled meanwhile still happens (a thread cannot be stopped): the
blob is then an orphan the cache janitor removes, as it was when the write ran in a thread of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from consumers.ports import AudioSink
from contracts import AudioRef
from foundation.audio import encode_wav

Stored = tuple[AudioRef, int]  # the blob and its length in bytes


@dataclass(frozen=True)
class _Asked:
    samples: npt.NDArray[np.float32]
    sample_rate: int
    stored: asyncio.Future[Stored]


class SegmentStores:
    """Stores asked together make one hop to the default thread pool; one hop runs at a time."""

    def __init__(self, blobs: AudioSink) -> None:
        self._blobs = blobs
        self._asked: list[_Asked] = []  # waiting for the next hop
        self._hop: asyncio.Future[list[Stored | OSError]] | None = None
        self._starting = False
        self.hops = 0  # hops made so far (what the grouping saves is read from it)

    async def store(self, samples: npt.NDArray[np.float32], sample_rate: int) -> Stored:
        """``samples`` as a WAV blob in the store. Raises ``OSError`` when it cannot be written."""
        loop = asyncio.get_running_loop()
        asked = _Asked(samples, sample_rate, loop.create_future())
        self._asked.append(asked)
        if self._hop is None and not self._starting:
            # Started once this turn of the loop is over: the forward's other places ask in it.
            self._starting = True
            loop.call_soon(self._start)
        return await asked.stored

    def _start(self) -> None:
        self._starting = False
        asked = [a for a in self._asked if not a.stored.done()]  # an asker cancelled before its hop: not written
        self._asked = []
        if not asked:
            return
        self.hops += 1
        hop = asyncio.get_running_loop().run_in_executor(None, self._write, [(a.samples, a.sample_rate) for a in asked])
        self._hop = hop
        hop.add_done_callback(lambda done: self._finish(asked, done))

    def _finish(self, asked: list[_Asked], hop: asyncio.Future[list[Stored | OSError]]) -> None:
        self._hop = None
        outcomes: Sequence[Stored | BaseException | None]
        if hop.cancelled():  # the loop is closing: so are its askers
            outcomes = [None] * len(asked)
        elif (failure := hop.exception()) is not None:  # the pool itself refused (shut down): every asker
            outcomes = [failure] * len(asked)
        else:
            outcomes = hop.result()
        for one, outcome in zip(asked, outcomes, strict=True):
            if one.stored.done():
                continue  # its attempt was cancelled meanwhile
            if outcome is None:
                one.stored.cancel()
            elif isinstance(outcome, BaseException):
                one.stored.set_exception(outcome)
            else:
                one.stored.set_result(outcome)
        if self._asked and not self._starting:
            self._start()

    def _write(self, items: list[tuple[npt.NDArray[np.float32], int]]) -> list[Stored | OSError]:
        outcomes: list[Stored | OSError] = []
        for samples, sample_rate in items:
            try:
                wav = encode_wav(samples, sample_rate)
                outcomes.append((self._blobs.put(wav, ".wav"), len(wav)))
            except OSError as exc:
                outcomes.append(exc)
        return outcomes
