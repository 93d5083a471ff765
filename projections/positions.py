"""Where a projector stands in the log: its rows of ``projection_offsets`` (it keeps no offsets in Kafka)."""

from __future__ import annotations

import asyncpg


async def projector_positions(pool: asyncpg.Pool, consumer: str, topic: str) -> dict[int, int]:
    """Partition -> the next offset the projector ``consumer`` will apply on ``topic``."""
    rows = await pool.fetch(
        "SELECT partition, next_offset FROM projection_offsets WHERE consumer = $1 AND topic = $2",
        consumer,
        topic,
        timeout=5,
    )
    return {int(r["partition"]): int(r["next_offset"]) for r in rows}
