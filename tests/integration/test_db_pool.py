"""The shared connection pool skips asyncpg's reset query; what a release must still undo, it undoes."""

from __future__ import annotations

import asyncio

from foundation.db import open_pool


async def test_a_connection_released_inside_a_transaction_comes_back_rolled_back(stack, schema):
    pool = await open_pool(stack.database_url, schema, min_size=1, max_size=1)
    loop = asyncio.get_running_loop()
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, _context: None)  # asyncpg reports the open transaction; expected here
    try:
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute("CREATE TABLE half_done (x int)")
        async with pool.acquire() as conn:  # the same, only, connection
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT to_regclass('half_done')") is None
            assert await conn.fetchval("SHOW search_path") == schema, "the schema is a startup setting: it stays"
    finally:
        loop.set_exception_handler(previous)
        await pool.close()
