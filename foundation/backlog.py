"""The work ahead of a new submission, in seconds of the fleet's synthesis time.

The projection knows the text of every job not finished yet (queued, claimed,
or released for a retry), and each worker's heartbeat carries its measured
speed in characters of text per second of synthesis. Work is counted per live
fingerprint, not per job: duplicates of a request coalesce onto one
synthesis, so a flood of the same few texts is the work of those texts. Their ratio is how long
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

from dataclasses import dataclass
from typing import Final

import asyncpg

from foundation.live_jobs import LIVE_SQL

# Heartbeats come every few seconds: a worker not heard from for this long is not counted as speed.
SPEED_FRESH_S: Final = 30.0
_PENDING: Final = (
    "SELECT count(*) AS syntheses, coalesce(sum(chars), 0) AS chars FROM"
    " (SELECT DISTINCT ON (fingerprint) length(request->>'text') AS chars FROM jobs"
    f" WHERE state IN ({LIVE_SQL})) AS work"
)
_SPEED: Final = (
    "SELECT sum(chars_per_s) FROM node_heartbeats"
    " WHERE chars_per_s IS NOT NULL AND sent_at > now() - make_interval(secs => $1)"
)


@dataclass(frozen=True)
class Backlog:
    syntheses: int  # the live fingerprints: each is one synthesis ahead, however many jobs want it
    chars: int  # their text
    chars_per_s: float | None  # the fleet's speed; None until a worker has measured its own

    def work_s(self, more_chars: int = 0) -> float | None:
        """Seconds of the fleet's work ahead (with ``more_chars`` of text not projected yet); None: unknown."""
        if not self.chars_per_s:
            return None
        return (self.chars + more_chars) / self.chars_per_s


async def read_backlog(pool: asyncpg.Pool, timeout_s: float) -> Backlog:
    """The backlog as the projection shows it (raises the driver's errors: the caller knows its outage)."""
    pending = await pool.fetchrow(_PENDING, timeout=timeout_s)
    speed = await pool.fetchval(_SPEED, SPEED_FRESH_S, timeout=timeout_s)
    return Backlog(int(pending["syntheses"]), int(pending["chars"]), float(speed) if speed else None)
