"""The TTS worker node: engines that turn request text into audio.

``load_engine`` gives an ``Engine``; callers ``segment`` a request's text and
``synthesize`` each ``Segment``, so progress and retries work per segment.
"""

from __future__ import annotations

from pathlib import Path

from tts_node.engine import Audio, Engine, EngineInfo, Segment
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable, TtsNodeError

ENGINES = ("kokoro-onnx",)
DEVICES = {"kokoro-onnx": ("cpu",)}

__all__ = [
    "DEVICES",
    "ENGINES",
    "Audio",
    "Engine",
    "EngineFailure",
    "EngineInfo",
    "EngineInputError",
    "ModelUnavailable",
    "Segment",
    "TtsNodeError",
    "load_engine",
]


def load_engine(name: str, *, device: str = "cpu", threads: int = 2, cache_dir: Path | None = None) -> Engine:
    """Load, verify and warm up engine ``name``; raises ``TtsNodeError`` on bad settings."""
    if name not in ENGINES:
        raise TtsNodeError(f"unknown engine {name!r}; known engines: {', '.join(ENGINES)}")
    if device not in DEVICES[name]:
        raise TtsNodeError(f"engine {name!r} runs on {', '.join(DEVICES[name])}, not {device!r}")
    # Imported here so that importing tts_node does not load onnxruntime.
    from tts_node.kokoro_onnx import KokoroOnnxEngine

    return KokoroOnnxEngine(cache_dir=cache_dir, threads=threads)
