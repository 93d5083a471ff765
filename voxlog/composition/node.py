"""The standalone TTS node process: one engine served over HTTP."""

from __future__ import annotations

from foundation.settings import NodeSettings
from foundation.shutdown import Shutdown
from tts_node.server import serve_node
from voxlog.composition.resources import load_configured_engine


async def run_node(settings: NodeSettings) -> None:
    shutdown = Shutdown(settings.shutdown_timeout_s)
    await serve_node(await load_configured_engine(settings), settings.node_host, settings.node_port, shutdown)
