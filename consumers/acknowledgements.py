"""Events handed to the log that Kafka has not acknowledged yet, in the order they were sent.

A job's events are handed to the log without waiting for each acknowledgement
(``EventLog.send``): the attempt goes on while Kafka acknowledges them, and
events that queue up meanwhile travel in one request. They count in the
ledger (``record_own``) only once acknowledged, and in the order they were
sent, so that the ledger never shows an event the log may not hold, nor a
completion without the claim before it. A claim may be *held*: it is sent
with the next event, in the same request (a fast node's claim rides along
with the first segment).

Every event sent has a *recorded* future: ``True`` once a wait found it and
every event waited for with it acknowledged (and recorded them), ``False``
once one of them was refused, or they were discarded unrecorded. The worker
resolves the record of a completion it did not wait for by that future
(:mod:`consumers.worker`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from consumers.ports import Acknowledgement, EventLog
from contracts import JobEvent


class Recorder(Protocol):
    """Where an acknowledged event counts: the ledger of the job's partition."""

    def record_own(self, event: JobEvent, offset: int) -> object: ...


@dataclass(frozen=True)
class _Sent:
    event: JobEvent
    ack: Acknowledgement
    recorder: Recorder
    recorded: asyncio.Future[bool]


@dataclass(frozen=True)
class _Held:
    event: JobEvent
    partition: int | None
    recorder: Recorder


class Acknowledgements:
    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._sent: list[_Sent] = []
        self._in_wait: list[_Sent] = []  # taken by a wait in progress, not recorded yet
        # Claims kept back to travel with the next event: one per attempt that has not sent anything since (the
        # worker holds several claims at once), sent in the order held.
        self._held: list[_Held] = []

    def __len__(self) -> int:
        """How many events sent are not waited for yet."""
        return len(self._sent)

    def hold(self, event: JobEvent, partition: int | None, recorder: Recorder) -> None:
        """Keep ``event`` back: it goes with the next event sent, or with the next wait, whichever is first
        (after any other attempt's held before it)."""
        self._held.append(_Held(event, partition, recorder))

    async def send(self, event: JobEvent, partition: int | None, recorder: Recorder) -> asyncio.Future[bool]:
        """Hand ``event`` to the log (after the held event, if any) and return its *recorded* future.

        Raises ``BrokerUnavailable`` when the log does not even take it."""
        await self._send_held()
        return await self._send(event, partition, recorder)

    async def wait_all(self) -> None:
        """Wait for every event sent (the held one too); record each acknowledged one, in the order sent;
        then raise the first refusal (``BrokerUnavailable``), if there was one. Events another wait (another
        attempt's: the worker holds several claims) took are waited for too, until they are recorded."""
        await self._send_held()
        sent, self._sent = self._sent, []
        self._in_wait += sent
        try:
            answers = await asyncio.gather(*(s.ack for s in sent), return_exceptions=True)
        except BaseException:
            _resolve(sent, recorded=False)  # cut short (cancelled): nothing of it is known to be recorded
            raise
        finally:
            taken = set(map(id, sent))
            self._in_wait = [s for s in self._in_wait if id(s) not in taken]
        refused: BaseException | None = None
        for s, answer in zip(sent, answers, strict=True):
            if isinstance(answer, BaseException):
                refused = refused or answer
            else:
                s.recorder.record_own(s.event, answer.offset)
        _resolve(sent, recorded=refused is None)
        if others := [s.recorded for s in self._in_wait if not s.recorded.done()]:
            await asyncio.wait(others)
        if refused is not None:
            raise refused

    def refusal(self) -> BaseException | None:
        """A refusal that has come back already, if any: the attempt can stop at once instead of going on."""
        for s in self._sent:
            if s.ack.done() and (refused := s.ack.exception()) is not None:
                return refused
        return None

    def discard(self) -> None:
        """Forget what was sent and held, unrecorded: the worker acts on its jobs again (their ledgers say
        what is left)."""
        self._held = []
        sent, self._sent = self._sent, []
        # Gathered (and never awaited), so that a refusal nobody waits for is not logged as lost.
        asyncio.gather(*(s.ack for s in sent), return_exceptions=True)
        _resolve(sent, recorded=False)

    def fingerprints(self) -> set[str]:
        """The fingerprints of the events sent and not recorded yet (waited for or not)."""
        return {s.event.fingerprint for s in [*self._sent, *self._in_wait]}

    async def _send_held(self) -> None:
        while self._held:
            held = self._held.pop(0)
            await self._send(held.event, held.partition, held.recorder)

    async def _send(self, event: JobEvent, partition: int | None, recorder: Recorder) -> asyncio.Future[bool]:
        ack = await self._log.send(event, partition)
        recorded: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._sent.append(_Sent(event, ack, recorder, recorded))
        return recorded


def _resolve(sent: Iterable[_Sent], *, recorded: bool) -> None:
    for s in sent:
        if not s.recorded.done():
            s.recorded.set_result(recorded)
