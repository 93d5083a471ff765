"""A random-initialized Kokoro-82M checkpoint: FOR TESTS AND BENCHMARKS ONLY.

It has the real architecture (81.8 M parameters, the same compute per second
of audio) but untrained weights, so it speaks noise; its duration predictor
holds each phoneme far longer than speech does, so feed it a few words only.
Never serve it: ``KokoroTorchEngine`` loads it exactly like real weights.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import torch

from tts_node.kokoro_torch import WEIGHTS_NAME, load_kmodel
from tts_node.model_files import load_vocab

MODULE_KEYS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
VOICE_SHAPE = (510, 1, 256)

# hexgrad/Kokoro-82M config.json, less the vocabulary (added from vocab.json).
_CONFIG: dict[str, Any] = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 50,
    "multispeaker": True,
    "n_layer": 3,
    "n_mels": 80,
    "n_token": 178,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
}


def kokoro_config() -> dict[str, Any]:
    """The hexgrad/Kokoro-82M config, vocabulary included."""
    config = copy.deepcopy(_CONFIG)
    config["vocab"] = dict(sorted(load_vocab().items(), key=lambda item: item[1]))
    return config


def write_random_checkpoint(
    directory: Path,
    *,
    seed: int = 0,
    voices: tuple[str, ...] = ("af_random",),
    frames_per_phoneme: float | None = None,
) -> Path:
    """Write ``config.json``, random weights and random voice packs into ``directory``.

    FOR TESTS AND BENCHMARKS ONLY: the weights are untrained. The same seed
    gives byte-identical files. ``frames_per_phoneme`` sets the duration head so
    that a phoneme lasts about that many frames (25 ms each; speech is about 3.3),
    varying a little from phoneme to phoneme, instead of the untrained maximum:
    audio of a realistic length for a sentence. Returns ``directory``.
    """
    if not voices:
        raise ValueError("at least one voice is needed")
    config = kokoro_config()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        # KModel builds its modules, then loads whatever the file holds: an empty
        # dict leaves them as initialized, built by the engine's own loading path.
        empty = Path(tmp) / "empty.pth"
        torch.save({}, empty)
        with torch.random.fork_rng(devices=[]):  # leave the caller's RNG state alone
            torch.manual_seed(seed)
            model = load_kmodel(config, empty, torch.device("cpu"))
    if frames_per_phoneme is not None:
        _set_durations(model, frames_per_phoneme, int(config["max_dur"]))
    torch.save({key: getattr(model, key).state_dict() for key in MODULE_KEYS}, directory / WEIGHTS_NAME)
    voices_dir = directory / "voices"
    voices_dir.mkdir(exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    for name in voices:
        pack = torch.randn(VOICE_SHAPE, generator=generator, dtype=torch.float32) * 0.2
        torch.save(pack, voices_dir / f"{name}.pt")
    return directory


def _set_durations(model: Any, frames: float, max_dur: int) -> None:
    """The duration head's sigmoids sum to about ``frames``: each about frames/max_dur, weights shrunk so the
    phonemes still differ a little."""
    if not 0 < frames < max_dur:
        raise ValueError(f"frames_per_phoneme must be between 0 and {max_dur}")
    head = model.predictor.duration_proj.linear_layer
    with torch.no_grad():
        head.weight.mul_(0.05)
        head.bias.fill_(math.log(frames / (max_dur - frames)))
