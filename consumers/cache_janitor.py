"""Keeping the result cache and the blob store bounded: evict results, then delete blobs nothing keeps.

The leading sweeper runs one round every ``cache_sweep_interval_s``:

1. It reads the result cache's entries (with their segments' blobs) and the
   blobs of attempts in flight from the projection, then lists the blob
   store's files with their size and last use (a blob's modification time:
   written, or touched by a cache hit).
2. :func:`plan` decides. Entries past their TTL are evicted (``expired``).
   A blob may go once no live entry and no attempt in flight refers to it
   and it was not used for ``job_retention_s``: that is how every job keeps
   its audio for the retention after its completion or last reuse, including
   jobs served from another job's result. While the store would still hold
   more than ``cache_max_bytes``, the least recently used entries are
   evicted (``capacity``), as long as evicting one frees something now.
   What retention and attempts in flight pin beyond the cap stays, and is
   reported (a cap smaller than the audio of one retention period).
3. Evictions are recorded on the log as ``CacheEvicted`` (keyed by
   fingerprint, like every job event), all acknowledged before any blob is
   deleted, so the projection, replay and every worker's ledger follow them.
4. Blobs are deleted with :meth:`foundation.blobs.LocalBlobStore.remove_unused`,
   which decides again after renaming the blob away: a cache hit that touched
   it since the listing keeps it, one that comes after finds it gone and
   synthesizes afresh.

Everything the plan uses is read before the files are listed, so a result
completed or reused after the reads has fresh blobs, which the retention keeps.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

import structlog

from consumers.ports import EventLog
from contracts import (
    AudioRef,
    CacheEvicted,
    CacheEvictedPayload,
    EvictionReason,
    Producer,
    job_event,
)
from foundation.blobs import StoredBlob
from foundation.metrics import BLOB_STORE_BYTES, BLOB_STORE_OVER_CAP, CACHE_EVICTIONS, SWEEPER_BLOBS_DELETED
from projections.reads.sweeper import Entry

log = structlog.get_logger("voxlog.sweeper")


@dataclass(frozen=True)
class JanitorConfig:
    job_retention: timedelta
    max_bytes: int  # 0: no cap
    interval_s: float


@dataclass
class Plan:
    evict: list[tuple[Entry, EvictionReason]] = field(default_factory=list)
    delete: list[StoredBlob] = field(default_factory=list)
    stored_bytes: int = 0
    kept_bytes: int = 0  # what the store holds once the plan is carried out
    over_cap_bytes: int = 0  # kept beyond the cap: pinned by the retention or by attempts in flight


def plan(
    entries: Iterable[Entry],
    blobs: Iterable[StoredBlob],
    in_flight: set[str],
    now: datetime,
    config: JanitorConfig,
) -> Plan:
    """What one round evicts and deletes (see the module docstring)."""
    result = Plan()
    stored = {blob.ref.sha256: blob for blob in blobs}
    result.stored_bytes = sum(blob.size for blob in stored.values())
    used_before = (now - config.job_retention).timestamp()
    live: list[Entry] = []
    for entry in entries:
        if entry.expires_at <= now:
            result.evict.append((entry, "expired"))
        else:
            live.append(entry)
    references = Counter(sha for entry in live for sha in entry.blobs)

    def free(sha: str) -> bool:
        return references[sha] == 0 and sha not in in_flight and stored[sha].used_at < used_before

    result.delete = [blob for sha, blob in stored.items() if free(sha)]
    kept = result.stored_bytes - sum(blob.size for blob in result.delete)
    if config.max_bytes and kept > config.max_bytes:

        def last_use(entry: Entry) -> float:
            # The least recent of its blobs: a reuse touches them all, while a blob it shares with other
            # results (a common sentence) is touched by their uses too.
            return min((stored[sha].used_at for sha in entry.blobs if sha in stored), default=0.0)

        for entry in sorted(live, key=last_use):  # least recently used first
            if kept <= config.max_bytes:
                break
            present = {sha for sha in entry.blobs if sha in stored}
            references.subtract(present)
            freed = [stored[sha] for sha in present if free(sha)]
            if not freed:
                references.update(present)  # a job within its retention keeps these: evicting frees nothing now
                continue
            result.evict.append((entry, "capacity"))
            result.delete += freed
            kept -= sum(blob.size for blob in freed)
    result.kept_bytes = kept
    result.over_cap_bytes = max(0, kept - config.max_bytes) if config.max_bytes else 0
    return result


def eviction(entry: Entry, reason: EvictionReason, now: datetime, producer: Producer) -> CacheEvicted:
    """The event that evicts ``entry``; its id is the job's, so a retried round records one eviction."""
    payload = CacheEvictedPayload(reason=reason, total_bytes=entry.total_bytes)
    return job_event(CacheEvicted, entry.job_id, entry.fingerprint, 0, producer, payload, at=now)


async def record_evictions(events: EventLog, evictions: list[tuple[CacheEvicted, int | None]]) -> None:
    """Hand every eviction (each to its job's partition) to the log at once; return when all are acknowledged."""
    acknowledgements = [await events.send(event, partition) for event, partition in evictions]
    await asyncio.gather(*acknowledgements)


class CacheStore(Protocol):
    """The projection, as the janitor reads it (raises ``ProjectionUnavailable`` when it cannot)."""

    async def entries(self) -> list[Entry]: ...

    async def in_flight_blobs(self) -> set[str]: ...


class BlobShelf(Protocol):
    """The blob store's side of a round: listing, and deleting what is still unused (off the event loop)."""

    async def scan(self) -> list[StoredBlob]: ...

    async def remove_unused(self, ref: AudioRef, idle_s: float) -> bool: ...


class CacheJanitor:
    def __init__(
        self, config: JanitorConfig, store: CacheStore, blobs: BlobShelf, events: EventLog, producer: Producer
    ) -> None:
        self.config = config
        self._store = store
        self._blobs = blobs
        self._events = events
        self._producer = producer

    async def round(self, now: datetime) -> Plan:
        entries = await self._store.entries()
        in_flight = await self._store.in_flight_blobs()
        stored = await self._blobs.scan()
        decided = plan(entries, stored, in_flight, now, self.config)
        await record_evictions(
            self._events, [(eviction(e, why, now, self._producer), e.partition) for e, why in decided.evict]
        )
        for _, reason in decided.evict:
            CACHE_EVICTIONS.labels(reason).inc()
        idle_s = self.config.job_retention.total_seconds()
        deleted = 0
        for blob in decided.delete:
            if await self._blobs.remove_unused(blob.ref, idle_s):
                deleted += 1
                SWEEPER_BLOBS_DELETED.inc()
        BLOB_STORE_BYTES.set(decided.kept_bytes)
        BLOB_STORE_OVER_CAP.set(decided.over_cap_bytes)
        if decided.evict or deleted:
            log.info(
                "cache round",
                evicted=len(decided.evict),
                blobs_deleted=deleted,
                stored_bytes=decided.stored_bytes,
                kept_bytes=decided.kept_bytes,
            )
        if decided.over_cap_bytes:
            log.warning(
                "the blob store holds more than VOXLOG_CACHE_MAX_BYTES: jobs within VOXLOG_JOB_RETENTION_S and"
                " attempts in flight keep it",
                over_cap_bytes=decided.over_cap_bytes,
            )
        return decided
