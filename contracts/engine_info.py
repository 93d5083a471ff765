"""What a loaded speech engine is, as it says of itself: the one description of an engine.

The engine (:mod:`tts_node.engine`) gives it, the worker's port (:mod:`consumers.ports`) passes it on, and a
worker's ``NodeAnnounced`` records it; both services read it from here, for neither may import the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineInfo:
    """Identity of a loaded engine, as advertised to the rest of the system."""

    name: str
    model_version: str
    sample_rate: int
    voices: tuple[str, ...]
    languages: tuple[str, ...]
    device: str
