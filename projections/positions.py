"""Where the log's consumers stand, as the projection sees it: a projector's rows of ``projection_offsets``
(it keeps no offsets in Kafka), and the jobs each synthesis group still owes."""

from __future__ import annotations

import asyncpg

from projections.reads.live_jobs import LIVE_SQL


async def projector_positions(pool: asyncpg.Pool, consumer: str, topic: str) -> dict[int, int]:
    """Partition -> the next offset the projector ``consumer`` will apply on ``topic``."""
    rows = await pool.fetch(
        "SELECT partition, next_offset FROM projection_offsets WHERE consumer = $1 AND topic = $2",
        consumer,
        topic,
        timeout=5,
    )
    return {int(r["partition"]): int(r["next_offset"]) for r in rows}


async def owed_by_model(pool: asyncpg.Pool) -> dict[tuple[str, str], int]:
    """(engine, model version) -> the live jobs of that model (queued, claimed, or released for a retry):
    the jobs its synthesis group owes."""
    rows = await pool.fetch(
        "SELECT request->>'engine' AS engine, request->>'model_version' AS model_version, count(*) AS jobs"
        f" FROM jobs WHERE state IN ({LIVE_SQL}) GROUP BY 1, 2",
        timeout=5,
    )
    return {(str(r["engine"]), str(r["model_version"])): int(r["jobs"]) for r in rows}
