"""The TTS worker node: engines that turn request text into audio.

``load_engine`` gives an ``Engine``; callers ``segment`` a request's text and
``synthesize`` each ``Segment``, so progress and retries work per segment.
"""

from __future__ import annotations

import re
from pathlib import Path

from tts_node.engine import Audio, Engine, EngineInfo, Segment, Speech, WordTime
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable, TtsNodeError
from tts_node.stretching import SpeedRange

# bench-sleep is for benchmarks only (see tts_node.bench_sleep); never a default.
ENGINES = ("kokoro-onnx", "kokoro", "bench-sleep")
# Device forms each engine accepts; N is a CUDA device index.
DEVICES = {"kokoro-onnx": ("cpu",), "kokoro": ("cpu", "cuda:N"), "bench-sleep": ("cpu", "cuda:N")}
_DEVICE_RES = {
    "kokoro-onnx": re.compile("cpu"),
    "kokoro": re.compile(r"cpu|cuda:\d+"),
    "bench-sleep": re.compile(r"cpu|cuda:\d+"),
}

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
    "Speech",
    "TtsNodeError",
    "WordTime",
    "load_engine",
]


def load_engine(
    name: str,
    *,
    device: str = "cpu",
    threads: int = 2,
    cache_dir: Path | None = None,
    model_dir: Path | None = None,
    voices_dir: Path | None = None,
    decoder: str = "eager",
) -> Engine:
    """Load, verify and warm up engine ``name``; raises ``TtsNodeError`` on bad settings. It takes every
    speed of ``contracts.speed.SPEED_RANGE``: beyond the model's own, time-stretched (``tts_node.stretching``).

    ``kokoro-onnx`` uses ``cache_dir`` (assembled weights) and ``voices_dir``
    (extra voice packs); ``kokoro`` reads ``model_dir`` (config.json, the .pth
    weights, voices/*.pt), or the local Hugging Face cache when it is None.
    ``decoder`` is how ``kokoro`` runs its decoder (``tts_node.kokoro_compile``: eager, compile, graphs).
    ``bench-sleep`` (benchmarks only) is made as the process's entry point said: untimed unless
    ``bench.paced`` set its pace (see :mod:`tts_node.bench_sleep`).
    """
    return SpeedRange(_load(name, device, threads, cache_dir, model_dir, voices_dir, decoder))


def _load(
    name: str,
    device: str,
    threads: int,
    cache_dir: Path | None,
    model_dir: Path | None,
    voices_dir: Path | None,
    decoder: str,
) -> Engine:
    if name not in ENGINES:
        raise TtsNodeError(f"unknown engine {name!r}; known engines: {', '.join(ENGINES)}")
    if not _DEVICE_RES[name].fullmatch(device):
        raise TtsNodeError(f"engine {name!r} runs on {', '.join(DEVICES[name])}, not {device!r}")
    if decoder != "eager" and name != "kokoro":
        raise TtsNodeError(f"decoder {decoder!r} is the kokoro (torch) engine's; engine {name!r} runs its own")
    # Imported here so that importing tts_node loads neither onnxruntime nor torch.
    if name == "bench-sleep":
        from tts_node.bench_sleep import made

        return made(device)
    if name == "kokoro":
        from tts_node.kokoro_torch import KokoroTorchEngine

        return KokoroTorchEngine(model_dir, device=device, threads=threads, voices_dir=voices_dir, decoder=decoder)
    from tts_node.kokoro_onnx import KokoroOnnxEngine

    return KokoroOnnxEngine(cache_dir=cache_dir, threads=threads, voices_dir=voices_dir)
