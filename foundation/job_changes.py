"""Push instead of poll: the projector says which jobs a committed batch changed, readers wait for theirs.

The projector sends ``NOTIFY`` on :func:`changes_channel` inside each batch's
transaction, so a notification arrives exactly when the rows it names are
visible. :class:`JobChanges` keeps one connection listening for them and wakes
whoever waits on one of the named jobs. Notifications are a hint, never the
truth: a waiter reads the projection after waking, and waits at most
``SAFETY_POLL_S`` between reads even when nothing arrives (a notification can
be lost with the connection); while the connection is down it falls back to
``fallback_poll_s`` (the API's :data:`FALLBACK_POLL_S`), the old polling interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator, Sequence
from typing import Final

import asyncpg

from foundation.db import DATABASE_OUTAGES
from foundation.lifecycle import wait_for_stop
from foundation.outages import Outage

SAFETY_POLL_S: Final = 1.0
"""The longest a waiter goes without reading the projection while notifications flow."""
FALLBACK_POLL_S: Final = 0.1
"""How often a waiter reads the projection while the listening connection is down (the API's, and the
benchmarks' baseline's, which never listens): a speech response's next segment is seen within 100 ms, for ten
reads a second per waiter."""
_PAYLOAD_IDS: Final = 200  # 36-character ids and commas stay well under NOTIFY's 8,000-byte payload


def changes_channel(schema: str) -> str:
    """The channel of one schema's job changes (channels are database-wide; schemas are not)."""
    return f"voxlog_jobs:{schema}"


def notify_payloads(job_ids: Sequence[uuid.UUID]) -> list[str]:
    """The NOTIFY payloads naming ``job_ids``: comma-separated, a bounded number per payload."""
    ids = [str(job_id) for job_id in dict.fromkeys(job_ids)]
    return [",".join(ids[i : i + _PAYLOAD_IDS]) for i in range(0, len(ids), _PAYLOAD_IDS)]


class Watch:
    """One waiter's interest in one job: ``wait`` returns when the job changed, or after a poll interval."""

    def __init__(self, changes: JobChanges) -> None:
        self._changes = changes
        self.changed = asyncio.Event()

    async def wait(self) -> None:
        """Wait for the next change (or the poll interval); clear before reading the projection again."""
        timeout = SAFETY_POLL_S if self._changes.listening else self._changes.fallback_poll_s
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), timeout)
        self.changed.clear()


class JobChanges:
    """Adapter: listens on the schema's channel through a connection of its own, reconnecting after outages."""

    def __init__(self, database_url: str, schema: str, fallback_poll_s: float) -> None:
        self._url = database_url
        self.channel = changes_channel(schema)
        self.fallback_poll_s = fallback_poll_s
        self._watches: dict[uuid.UUID, set[Watch]] = {}
        self.listening = False
        self._lost = asyncio.Event()

    @contextlib.contextmanager
    def watch(self, job_id: uuid.UUID) -> Iterator[Watch]:
        """Interest in ``job_id`` for the block: register it before the first read, so that no change is missed."""
        watch = Watch(self)
        self._watches.setdefault(job_id, set()).add(watch)
        try:
            yield watch
        finally:
            watchers = self._watches.get(job_id, set())
            watchers.discard(watch)
            if not watchers:
                self._watches.pop(job_id, None)

    def _notified(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        for text in payload.split(","):
            try:
                job_id = uuid.UUID(text)
            except ValueError:
                continue
            for watch in self._watches.get(job_id, ()):
                watch.changed.set()

    def _wake_all(self) -> None:
        """Nothing is known about what changed while not listening: every waiter reads again."""
        for watches in self._watches.values():
            for watch in watches:
                watch.changed.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Listen until ``stop``; after a lost connection, poll-speed waits until listening again."""
        outage = Outage("PostgreSQL (job change notifications; waiters poll meanwhile)")
        while not stop.is_set():
            delay = 0.0
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self._url, timeout=10)
                self._lost.clear()
                conn.add_termination_listener(lambda _conn: self._lost.set())
                await conn.add_listener(self.channel, self._notified)
                self.listening = True
                outage.recovered()
                self._wake_all()  # changes made while not listening were not announced
                await self._until_lost_or(stop)
                if not stop.is_set():
                    delay = outage.failed("the listening connection was lost")
            except DATABASE_OUTAGES as exc:
                delay = outage.failed(exc)
            finally:
                self.listening = False
                if conn is not None:
                    with contextlib.suppress(*DATABASE_OUTAGES):
                        await asyncio.wait_for(conn.close(), 5)
            await wait_for_stop(stop, delay)

    async def _until_lost_or(self, stop: asyncio.Event) -> None:
        lost, stopping = asyncio.ensure_future(self._lost.wait()), asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            stopping.cancel()
