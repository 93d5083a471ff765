"""The standalone TTS node process: one engine served over HTTP."""

from __future__ import annotations

from foundation.settings import NodeSettings
from foundation.shutdown import Shutdown
from tts_node.engine_thread import EngineThread
from tts_node.server import serve_node
from voxlog.composition.resources import load_configured_engine


async def run_node(settings: NodeSettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    thread = EngineThread()  # the engine's load, its decoder's choice and every request on the one thread
    try:
        engine = await load_configured_engine(settings, thread)
        await serve_node(engine, settings.node_host, settings.node_port, shutdown, thread)
    finally:
        thread.close()
