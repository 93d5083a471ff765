"""Kokoro-82M in PyTorch (the ``kokoro`` library's own ``KModel``), offline espeak-ng English G2P.

Model files come from a local directory only (``config.json``, ``*.pth``,
``voices/*.pt``): the Hugging Face hub is never contacted.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from contracts.ssml import MODEL_SPEED_RANGE
from tts_node.engine import Audio, EngineInfo, Segment, Speech, SpeechRequest
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable, TtsNodeError
from tts_node.g2p import LANGUAGES, Phonemizer, announced_version
from tts_node.kokoro_batch import BatchItem, forward_batch, segment_seed
from tts_node.kokoro_compile import COMPILE_MODES, EAGER, CompiledDecoding, Decoding, decoding_for
from tts_node.model_files import _sha256_of
from tts_node.segmenter import MAX_TOKENS
from tts_node.voices import VoiceBank, model_version

SAMPLE_RATE = 24_000
SPEED_RANGE = MODEL_SPEED_RANGE  # what the API lets a request's speed and <prosody rate> come to
DEVICE_PATTERN = re.compile(r"cpu|cuda:\d+")
HF_REPO = "hexgrad/Kokoro-82M"
WEIGHTS_NAME = "kokoro-v1_0.pth"
WARM_FRAMES = 2_048  # a compiled decoder's shapes warmed up to: 510 ids (the model's most) at 4 frames an id
_WARM_UP_TEXT = "Hi."
_WARM_UP_PHONEMES = "h\u02c8I."  # what the G2P makes of it (\u02c8: the stress mark)


class KokoroTorchEngine:
    """Kokoro-82M weights run by PyTorch on ``cpu`` or ``cuda:N``."""

    def __init__(
        self,
        model_dir: Path | None,
        device: str = "cpu",
        threads: int = 2,
        *,
        voices_dir: Path | None = None,
        decoder: str = "eager",
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self._device = _torch_device(device)
        _check_decoder(decoder, self._device)  # before the weights load: a bad setting is said at once
        directory = model_dir.expanduser() if model_dir is not None else hf_snapshot_dir()
        config_path, weights_path, _ = find_model_files(directory)
        config = _read_config(config_path)
        self._vocab: dict[str, int] = {str(k): int(v) for k, v in config["vocab"].items()}
        self._valid_ids = frozenset(self._vocab.values())
        if device == "cpu":
            torch.set_num_threads(threads)  # process-wide: torch has no per-model setting
        self._model = load_kmodel(config, weights_path, self._device)
        self._decoding: Decoding = EAGER
        self._decodings: dict[str, Decoding] = {"eager": EAGER}  # each compiled once, whatever switches back
        self._max_tokens = min(MAX_TOKENS, int(self._model.context_length) - 2)
        # The same VoiceBank as kokoro-onnx: .pt/.npy/.bin packs, extras, and weighted mixes.
        bank = VoiceBank.from_dir(directory / "voices")
        extra = VoiceBank.from_dir(voices_dir) if voices_dir is not None else None
        self._voices = bank.merge(extra) if extra is not None else bank
        self._phonemizer = Phonemizer(self._vocab)
        self._info = EngineInfo(
            name="kokoro",
            model_version=announced_version(model_version(_sha256_of(weights_path), extra)),
            sample_rate=SAMPLE_RATE,
            voices=self._voices.names(),
            languages=LANGUAGES,
            device=device,
        )
        # Pay allocation and kernel choice at load. The warm-up's ids are written in the model's alphabet: loading
        # the model runs no G2P (a device image may carry the model without the espeak data).
        warm_up = Segment(0, 0, len(_WARM_UP_TEXT), _WARM_UP_TEXT, self.phoneme_ids(_WARM_UP_PHONEMES), _WARM_UP_TEXT)
        self.synthesize(warm_up, self._info.voices[0], 1.0)
        self.use_decoder(decoder)

    @property
    def info(self) -> EngineInfo:
        return self._info

    @property
    def max_ids(self) -> int:
        """The most phoneme ids one segment may have (the model's context, less its two boundary pads)."""
        return self._max_tokens

    def device_memory(self) -> TorchDeviceMemory:
        """The model's device, as measuring its forward's sizes sees it (``tts_node.batch_sizing``)."""
        return TorchDeviceMemory(self._device)

    @property
    def decoder(self) -> str:
        """How the decoder runs now (``tts_node.kokoro_compile``): eager, compile or graphs; eager after a
        compiled decoder failed."""
        return self._decoding.mode

    def use_decoder(self, mode: str) -> None:
        """Run the decoder ``mode``'s way from the next forward on; a compiled one is compiled here, the first
        time it is asked for (its shapes warmed: ``_warm``)."""
        _check_decoder(mode, self._device)
        if mode not in self._decodings:
            decoding = decoding_for(self._model.decoder, mode)
            if isinstance(decoding, CompiledDecoding):
                self._warm(decoding)
            self._decodings[mode] = decoding
        self._decoding = self._decodings[mode]

    def _warm(self, decoding: CompiledDecoding) -> None:
        """Compile at start-up, not under a request (``CompiledDecoding.warm``), up to the frames of the longest
        segment: on a GPU one segment and several (2, 16); on a CPU one, as its forwards carry."""
        batches = (1, 2, 16) if self._device.type == "cuda" else (1,)
        try:
            with torch.inference_mode():
                decoding.warm(self._model.decoder, batches, WARM_FRAMES, self._device)
        except torch.cuda.OutOfMemoryError as exc:
            raise EngineFailure(f"warming the {decoding.mode} decoder ran out of device memory: {exc}") from exc

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        """Model-sized segments of ``text`` (see ``tts_node.segmenter``), normalized before G2P unless not asked."""
        return self._phonemizer.segment(text, lang, self._max_tokens, normalize=normalize)

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        """Ids of phonemes in the model's alphabet, for an SSML ``<phoneme ph>`` (no G2P)."""
        return self._phonemizer.phoneme_ids(phonemes)

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        """Mono float32 audio at ``SAMPLE_RATE`` for one segment."""
        return self.speak(segment, voice, speed).audio

    def speak(self, segment: Segment, voice: str, speed: float) -> Speech:
        """``synthesize``'s audio with its words' times, from ``KModel``'s predicted durations (``pred_dur``)."""
        return self.speak_batch([SpeechRequest(segment, voice, speed)])[0]

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]:
        """Every request's speech from one forward (``tts_node.kokoro_batch``): each the same as it is alone.

        A segment's noise is seeded by its ids, voice and speed, so its audio is the same on every call
        (a retry, a replay), in any batch, on a given device and model."""
        items = [self._item(r) for r in requests]
        try:
            with torch.inference_mode():
                outputs = forward_batch(self._model, items, self._decoding)
        except Exception as exc:
            indexes = ", ".join(str(r.segment.index) for r in requests)
            raise EngineFailure(f"torch failed on segment(s) {indexes}: {exc}") from exc
        speeches = []
        for request, output in zip(requests, outputs, strict=True):
            if output.audio.size == 0 or not np.isfinite(output.audio).all():
                raise EngineFailure(f"the model returned no usable audio for segment {request.segment.index}")
            words = self._phonemizer.word_times(request.segment, output.durations, output.audio.size)
            speeches.append(Speech(output.audio, words))
        return speeches

    def _item(self, request: SpeechRequest) -> BatchItem:
        low, high = SPEED_RANGE
        speed, ids = request.speed, request.segment.token_ids
        if not (math.isfinite(speed) and low <= speed <= high):
            raise EngineInputError(f"speed {speed} is out of range; use {low} to {high}")
        if not 1 <= len(ids) <= self._max_tokens or not self._valid_ids.issuperset(ids):
            raise EngineInputError(f"segment {request.segment.index} needs 1 to {self._max_tokens} known phoneme ids")
        pack = self._voices.resolve(request.voice).reshape(-1, 256)
        style = torch.from_numpy(pack[min(len(ids), len(pack) - 1)].copy())
        return BatchItem(ids, style, speed, segment_seed(ids, request.voice, speed))


class TorchDeviceMemory:
    """A CUDA device's memory and queue (``tts_node.batch_sizing.DeviceMemory``); on a CPU, nothing is told."""

    def __init__(self, device: torch.device) -> None:
        self._cuda = device.type == "cuda"
        self._device = device

    def synchronize(self) -> None:
        if self._cuda:
            torch.cuda.synchronize(self._device)

    def reset_peak(self) -> None:
        if self._cuda:
            torch.cuda.reset_peak_memory_stats(self._device)

    def peak_bytes(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self._device)) if self._cuda else None

    def free_bytes(self) -> int | None:
        return int(torch.cuda.mem_get_info(self._device)[0]) if self._cuda else None

    def allocated_bytes(self) -> int | None:
        return int(torch.cuda.memory_allocated(self._device)) if self._cuda else None

    def release(self) -> None:
        if self._cuda:
            torch.cuda.empty_cache()


def hf_snapshot_dir() -> Path:
    """The local Hugging Face cache snapshot of hexgrad/Kokoro-82M (read only, never downloaded)."""
    hub = os.environ.get("HF_HUB_CACHE") or str(Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    repo = Path(hub).expanduser() / f"models--{HF_REPO.replace('/', '--')}"
    ref = repo / "refs" / "main"
    if ref.is_file():
        return repo / "snapshots" / ref.read_text(encoding="ascii").strip()
    snapshots = sorted((repo / "snapshots").glob("*/"), key=lambda p: p.stat().st_mtime)
    if not snapshots:
        raise ModelUnavailable(f"no {HF_REPO} snapshot in {repo / 'snapshots'}; set VOXLOG_KOKORO_DIR")
    return snapshots[-1]


def find_model_files(directory: Path) -> tuple[Path, Path, dict[str, Path]]:
    """``config.json``, the weights and voice name -> pack path in ``directory``."""
    config = directory / "config.json"
    if not config.is_file():
        raise ModelUnavailable(f"{config} is missing")
    weights = directory / WEIGHTS_NAME
    if not weights.is_file():
        found = sorted(directory.glob("*.pth"))
        if len(found) != 1:
            raise ModelUnavailable(f"{weights} is missing" + (f" (and {len(found)} other .pth files)" if found else ""))
        weights = found[0]
    voices = {p.stem: p for p in sorted((directory / "voices").glob("*.pt")) if p.is_file()}
    if not voices:
        raise ModelUnavailable(f"no voice packs in {directory / 'voices'}")
    return config, weights, voices


def _check_decoder(mode: str, device: torch.device) -> None:
    if mode not in COMPILE_MODES:
        raise TtsNodeError(f"decoder must be one of {', '.join(COMPILE_MODES)}, not {mode!r}")
    if mode == "graphs" and device.type != "cuda":
        raise TtsNodeError("the graphs decoder (CUDA graphs) runs on a cuda:N device only")


def _torch_device(device: str) -> torch.device:
    if not DEVICE_PATTERN.fullmatch(device):
        raise TtsNodeError(f"device must be 'cpu' or 'cuda:N', not {device!r}")
    if device != "cpu":
        if not torch.cuda.is_available():
            raise TtsNodeError(f"device {device!r}: CUDA is not available on this machine")
        if int(device[5:]) >= torch.cuda.device_count():
            raise TtsNodeError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return torch.device(device)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"cannot read {path}: {exc}") from exc
    if not isinstance(config, dict) or not isinstance(config.get("vocab"), dict) or not config["vocab"]:
        raise ModelUnavailable(f"{path} has no 'vocab' mapping")
    return config


def load_kmodel(config: dict[str, Any], weights: Path, device: torch.device) -> Any:
    """``kokoro.KModel`` from local files only, on ``device``, in eval mode."""
    try:
        from kokoro import KModel

        with warnings.catch_warnings():
            # The library's own modules warn about LSTM dropout and the old weight_norm.
            warnings.filterwarnings("ignore", category=UserWarning, message="dropout option")
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*weight_norm")
            model = KModel(repo_id=HF_REPO, config=config, model=str(weights))
        return model.to(device).eval()
    except Exception as exc:
        raise ModelUnavailable(f"cannot load Kokoro weights {weights}: {exc}") from exc
