"""Kokoro-82M (int8 ONNX) on CPU with offline espeak-ng English G2P."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import onnxruntime as ort

from contracts.ssml import MODEL_SPEED_RANGE
from tts_node.engine import Audio, EngineInfo, Segment, Speech
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable
from tts_node.g2p import LANGUAGES, Phonemizer, announced_version
from tts_node.model_files import ensure_model, load_vocab, load_voices
from tts_node.onnx_outputs import with_output
from tts_node.segmenter import MAX_TOKENS
from tts_node.voices import VoiceBank, model_version

SAMPLE_RATE = 24_000
SPEED_RANGE = MODEL_SPEED_RANGE  # what the API lets a request's speed and <prosody rate> come to
_WARM_UP_TEXT = "Hello."
_log = logging.getLogger(__name__)


class KokoroOnnxEngine:
    """Kokoro-82M int8 weights run by onnxruntime on CPU.

    Voices are the bundled packs plus, when ``voices_dir`` is given, the extra
    packs in it (see ``VoiceBank.from_dir``); ``synthesize`` also takes mixes.
    The graph is loaded with its phoneme durations as a second output
    (:mod:`tts_node.onnx_outputs`), which place each word in the audio.
    """

    def __init__(self, cache_dir: Path | None = None, threads: int = 2, *, voices_dir: Path | None = None) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        model_path, sha256 = ensure_model(cache_dir)
        self._vocab = load_vocab()
        self._valid_ids = frozenset(self._vocab.values())
        extra = VoiceBank.from_dir(voices_dir) if voices_dir is not None else None
        bank = VoiceBank(load_voices())
        self._voices = bank.merge(extra) if extra is not None else bank
        self._session = self._open_session(model_path, threads)
        self._phonemizer = Phonemizer(self._vocab)
        self._info = EngineInfo(
            name="kokoro-onnx",
            model_version=announced_version(model_version(sha256, extra)),
            sample_rate=SAMPLE_RATE,
            voices=self._voices.names(),
            languages=LANGUAGES,
            device="cpu",
        )
        self._warm_up()

    @property
    def info(self) -> EngineInfo:
        return self._info

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        """Model-sized segments of ``text`` (see ``tts_node.segmenter``), normalized before G2P unless not asked."""
        return self._phonemizer.segment(text, lang, MAX_TOKENS, normalize=normalize)

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        """Ids of phonemes in the model's alphabet, for an SSML ``<phoneme ph>`` (no G2P)."""
        return self._phonemizer.phoneme_ids(phonemes)

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        """Mono float32 audio at ``SAMPLE_RATE`` for one segment; ``voice`` is a name or a mix spec."""
        return self.speak(segment, voice, speed).audio

    def speak(self, segment: Segment, voice: str, speed: float) -> Speech:
        """``synthesize``'s audio with its words' times, from the durations the graph outputs."""
        pack = self._voices.resolve(voice)
        low, high = SPEED_RANGE
        if not (math.isfinite(speed) and low <= speed <= high):
            raise EngineInputError(f"speed {speed} is out of range; use {low} to {high}")
        ids = segment.token_ids
        if not 1 <= len(ids) <= MAX_TOKENS or not self._valid_ids.issuperset(ids):
            raise EngineInputError(f"segment {segment.index} needs 1 to {MAX_TOKENS} known phoneme ids")
        feeds = {
            # Id 0 pads both ends: the model was trained with boundary tokens.
            "tokens": np.array([[0, *ids, 0]], dtype=np.int64),
            "style": pack[min(len(ids), len(pack) - 1)].reshape(1, -1).astype(np.float32, copy=False),
            "speed": np.array([speed], dtype=np.float32),
        }
        try:
            outputs = self._session.run(None, feeds)
        except Exception as exc:
            raise EngineFailure(f"onnxruntime failed on segment {segment.index}: {exc}") from exc
        audio = np.asarray(outputs[0], dtype=np.float32).reshape(-1)
        if audio.size == 0 or not np.isfinite(audio).all():
            raise EngineFailure(f"the model returned no usable audio for segment {segment.index}")
        if len(outputs) < 2:
            return Speech(audio, None)
        durations = np.asarray(outputs[1]).reshape(-1).tolist()
        return Speech(audio, self._phonemizer.word_times(segment, durations, audio.size))

    def _warm_up(self) -> None:
        # The first run allocates arenas and picks kernels; pay that at load, not on a job.
        segment = self.segment(_WARM_UP_TEXT, LANGUAGES[0])[0]
        self.synthesize(segment, self._info.voices[0], 1.0)

    @staticmethod
    def _open_session(model_path: Path, threads: int) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            model = model_path.read_bytes()
        except OSError as exc:
            raise ModelUnavailable(f"cannot read {model_path}: {exc}") from exc
        try:
            return ort.InferenceSession(with_output(model), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # a graph without the tensor still speaks, only without word times
            _log.warning("%s: no phoneme durations to expose (%s); jobs will have no word times", model_path, exc)
        try:
            return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelUnavailable(f"onnxruntime cannot load {model_path}: {exc}") from exc
