"""The operator's actions, once for the CLI and the API: the service modes' switches (cache-only, degraded),
their status, cache purges, and the lexicon's entries.

``voxlog admin cache-only``, ``voxlog admin degraded`` and ``voxlog cache purge`` call these with a pool
and a publisher of their own; the API calls them through :class:`ApiOperations`
(the adapter of ``producers.ports.Operations``), with its own pool and
publishers, behind the admin scope. Either way a switch is a ``ServiceModeSet``
on the control topic, a purge is ``CacheEvicted`` events on the jobs topic, and a
lexicon entry a ``LexiconEntrySet`` or ``LexiconEntryRemoved`` on the nodes
topic (``voxlog lexicon``): nothing is written to the projection by hand. What they read of it is the read
model's (:mod:`projections.reads.operator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import asyncpg

from consumers.backlog_switch import mode_event
from consumers.cache_janitor import eviction
from contracts import (
    AnyEvent,
    LexiconEntryRemoved,
    LexiconEntryRemovedPayload,
    LexiconEntrySet,
    LexiconEntrySetPayload,
    Producer,
    ServiceMode,
    node_event,
    utc_now,
)
from foundation.db import DATABASE_OUTAGES
from projections.errors import ProjectionUnavailable
from projections.reads.backlog import read_backlog
from projections.reads.operator import has_pronunciation, mode_switches, pronunciations, purgeable


class Log(Protocol):
    """A topic, as the operator's actions write it: ``BrokerUnavailable`` unless every event is acknowledged."""

    async def publish_all(
        self, events: Sequence[AnyEvent], partitions: Sequence[int | None] | None = None
    ) -> object: ...


async def switch_mode(nodes: Log, mode: ServiceMode, enabled: bool, reason: str, producer: Producer) -> None:
    """Record the operator's switch of ``mode``; every API follows once the projector applies it."""
    await nodes.publish_all([mode_event(mode, enabled, "operator", reason, producer)])


async def mode_status(pool: asyncpg.Pool, mode: ServiceMode, timeout_s: float = 30.0) -> dict[str, Any]:
    """Both switches of ``mode`` (the operator's and the sweeper's backlog switch) as projected, and the backlog."""
    switches = await mode_switches(pool, mode, timeout_s)
    backlog = await read_backlog(pool, timeout_s)
    return {
        mode: any(s["enabled"] for s in switches.values()),
        "switches": switches,
        "backlog": {"syntheses": backlog.syntheses, "chars": backlog.chars, "chars_per_s": backlog.chars_per_s,
                    "work_s": backlog.work_s()},
    }  # fmt: skip


async def purge_cache(
    pool: asyncpg.Pool, jobs: Log, older_than_s: float | None, producer: Producer, timeout_s: float = 30.0
) -> tuple[int, int]:
    """Evict the results completed more than ``older_than_s`` ago (``None``: all); returns how many, and their
    bytes. Run again after a failure: an eviction's id is its job's, so a result is evicted once."""
    entries = await purgeable(pool, older_than_s, timeout_s)
    if entries:
        now = utc_now()
        await jobs.publish_all(
            [eviction(entry, "purge", now, producer) for entry in entries], [entry.partition for entry in entries]
        )
    return len(entries), sum(entry.total_bytes for entry in entries)


async def set_pronunciation(nodes: Log, word: str, phonemes: str, reason: str, producer: Producer) -> None:
    """Record ``word``'s entry (checked by the caller); every API follows once the projector applies it."""
    payload = LexiconEntrySetPayload(word=word, phonemes=phonemes, reason=reason)
    await nodes.publish_all([node_event(LexiconEntrySet, producer, payload)])


async def remove_pronunciation(
    pool: asyncpg.Pool, nodes: Log, word: str, reason: str, producer: Producer, timeout_s: float = 30.0
) -> bool:
    """Record ``word``'s removal, if the projection has an entry for it (``False``: none, nothing recorded)."""
    if not await has_pronunciation(pool, word, timeout_s):
        return False
    payload = LexiconEntryRemovedPayload(word=word, reason=reason)
    await nodes.publish_all([node_event(LexiconEntryRemoved, producer, payload)])
    return True


async def lexicon_entries(pool: asyncpg.Pool, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """The lexicon as projected, by word."""
    return await pronunciations(pool, timeout_s)


class ApiOperations:
    """``producers.ports.Operations`` for the API: its pool and publishers, PostgreSQL's errors as
    ``ProjectionUnavailable`` (Kafka's are ``BrokerUnavailable`` already)."""

    def __init__(self, pool: asyncpg.Pool, jobs: Log, nodes: Log, producer: Producer) -> None:
        self._pool, self._jobs, self._nodes, self._producer = pool, jobs, nodes, producer

    async def set_mode(self, mode: ServiceMode, enabled: bool, reason: str) -> None:
        await switch_mode(self._nodes, mode, enabled, reason, self._producer)

    async def mode(self, mode: ServiceMode) -> dict[str, Any]:
        try:
            return await mode_status(self._pool, mode, timeout_s=10.0)
        except DATABASE_OUTAGES as exc:
            raise ProjectionUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def purge_cache(self, older_than_s: float | None) -> tuple[int, int]:
        try:
            return await purge_cache(self._pool, self._jobs, older_than_s, self._producer, timeout_s=10.0)
        except DATABASE_OUTAGES as exc:
            raise ProjectionUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def set_pronunciation(self, word: str, phonemes: str, reason: str) -> None:
        await set_pronunciation(self._nodes, word, phonemes, reason, self._producer)

    async def remove_pronunciation(self, word: str, reason: str) -> bool:
        try:
            return await remove_pronunciation(self._pool, self._nodes, word, reason, self._producer, timeout_s=10.0)
        except DATABASE_OUTAGES as exc:
            raise ProjectionUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def lexicon(self) -> list[dict[str, Any]]:
        try:
            return await lexicon_entries(self._pool, timeout_s=10.0)
        except DATABASE_OUTAGES as exc:
            raise ProjectionUnavailable(f"{type(exc).__name__}: {exc}") from exc
