"""What a loaded speech engine is, as it says of itself: the one description of an engine, and what one
forward of it carries at most.

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


@dataclass(frozen=True)
class BatchLimits:
    """What one forward of an engine carries at most: ``segments``, and ``padded_ids`` (its count times its
    longest segment's ids; 0: unbounded). A forward always takes its first segment, whatever its length.
    ``tts_node.batch_sizing`` measures them on a device; the worker's turns (``consumers.engine_turns``) keep
    every forward within them."""

    segments: int
    padded_ids: int = 0

    def fits(self, count: int, longest: int) -> bool:
        """Whether ``count`` segments padded to ``longest`` ids are within both bounds."""
        if count <= 1:
            return True
        return count <= self.segments and (not self.padded_ids or count * longest <= self.padded_ids)
