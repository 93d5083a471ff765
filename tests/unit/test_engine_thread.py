"""The engine's one thread: every call on it, none after it is closed, and a close that does not wait."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tts_node.engine_thread import EngineThread, EngineThreadClosed

DEADLINE_S = 30.0


async def test_every_call_runs_on_the_one_thread_off_the_event_loop():
    thread = EngineThread()
    try:
        idents = {await thread.run(threading.get_ident) for _ in range(5)}
        names = await thread.run(lambda: threading.current_thread().name)
        assert len(idents) == 1
        assert threading.get_ident() not in idents
        assert names.startswith("synth")
        assert await thread.run(int, "ff", base=16) == 255
    finally:
        thread.close()


async def test_a_closed_thread_refuses_calls_and_closing_does_not_wait_for_the_call_in_hand():
    thread = EngineThread()
    entered, release = threading.Event(), threading.Event()

    def held() -> str:
        entered.set()
        release.wait(DEADLINE_S)
        return "finished"

    running = asyncio.ensure_future(thread.run(held))
    assert await asyncio.to_thread(entered.wait, DEADLINE_S)
    thread.close()  # returns while held() still runs: the gate is shut
    assert thread.closed
    with pytest.raises(EngineThreadClosed):
        await thread.run(threading.get_ident)
    release.set()
    assert await asyncio.wait_for(running, DEADLINE_S) == "finished", "the call in hand is abandoned, not cut"
