"""The work ahead of a new submission, in seconds of the fleet's synthesis time.

The projection knows the work of every job not finished yet (queued, claimed,
or released for a retry): the audio it is expected to make
(:mod:`contracts.audio_estimate`, ``jobs.expected_audio_ms``), counted here in
characters said at speed 1 (so a text at speed 0.25 counts four times its
characters, and a pause its seconds), and each worker's heartbeat carries its
measured speed in characters of text per second of synthesis. Work is counted
per live fingerprint, not per job: duplicates of a request coalesce onto one
synthesis, so a flood of the same few texts is the work of those texts, which
is the tenant's that asked first (the admission's share of each tenant,
:mod:`producers.admission`). Their ratio is how long
the fleet, working as it does now, needs before a job submitted now starts:
the backlog the API compares with ``VOXLOG_MAX_BACKLOG_S`` (429 above it) and
the sweeper with ``VOXLOG_DEGRADE_BACKLOG_S`` (degraded mode above it) and
``VOXLOG_CACHE_ONLY_BACKLOG_S`` (cache-only mode above it).
It drains at one second per second while the fleet keeps its speed, so the
time until it falls under a threshold is simply the excess.

Jobs already on the log but not projected yet are not counted: the API adds
what it accepted since its last reading, and the rest is the projector's lag.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import asyncpg

from contracts.audio_estimate import CHARS_PER_AUDIO_S
from projections.reads.live_jobs import LIVE_SQL

# Heartbeats come every few seconds: a worker not heard from for this long is not counted as speed.
SPEED_FRESH_S: Final = 30.0
_PENDING: Final = (
    "SELECT tenant, count(*) AS syntheses, coalesce(sum(chars), 0)::bigint AS chars FROM"
    " (SELECT DISTINCT ON (fingerprint) tenant, round(expected_audio_ms * $1::float8 / 1000) AS chars FROM jobs"
    f" WHERE state IN ({LIVE_SQL}) ORDER BY fingerprint, submitted_at) AS work GROUP BY tenant"
)
_SPEED: Final = (
    "SELECT sum(chars_per_s) FROM node_heartbeats"
    " WHERE chars_per_s IS NOT NULL AND sent_at > now() - make_interval(secs => $1)"
)


@dataclass(frozen=True)
class Backlog:
    syntheses: int  # the live fingerprints: each is one synthesis ahead, however many jobs want it
    chars: int  # their work, in characters said at speed 1
    chars_per_s: float | None  # the fleet's speed; None until a worker has measured its own
    tenants: Mapping[str, int] = field(default_factory=dict)  # ``chars`` by tenant (a fingerprint's first asker)

    def work_s(self, more_chars: int = 0) -> float | None:
        """Seconds of the fleet's work ahead (with ``more_chars`` of text not projected yet); None: unknown."""
        if not self.chars_per_s:
            return None
        return (self.chars + more_chars) / self.chars_per_s

    def seconds(self, chars: float) -> float | None:
        """``chars`` of work in seconds of the fleet's synthesis; None: unknown."""
        return chars / self.chars_per_s if self.chars_per_s else None


async def read_backlog(pool: asyncpg.Pool, timeout_s: float) -> Backlog:
    """The backlog as the projection shows it (raises the driver's errors: the caller knows its outage)."""
    pending = await pool.fetch(_PENDING, CHARS_PER_AUDIO_S, timeout=timeout_s)
    speed = await pool.fetchval(_SPEED, SPEED_FRESH_S, timeout=timeout_s)
    tenants = {row["tenant"]: int(row["chars"]) for row in pending}
    syntheses = sum(int(row["syntheses"]) for row in pending)
    return Backlog(syntheses, sum(tenants.values()), float(speed) if speed else None, tenants)
