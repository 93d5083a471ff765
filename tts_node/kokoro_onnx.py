"""Kokoro-82M (int8 ONNX) on CPU with offline espeak-ng English G2P."""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from pathlib import Path
from typing import Protocol

import numpy as np
import onnxruntime as ort

from tts_node.engine import Audio, EngineInfo, Segment
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable
from tts_node.model_files import ensure_model, load_vocab, load_voices
from tts_node.segmenter import MAX_TOKENS, segment_text
from tts_node.voices import VoiceBank

SAMPLE_RATE = 24_000
LANGUAGES = ("en-us", "en-gb")
SPEED_RANGE = (0.25, 4.0)
_WARM_UP_TEXT = "Hello."

# Pictographs, dingbats, flags, skin tones, keycaps, joiners and variation
# selectors. espeak would read emoji out by their CLDR names ("grinning
# face"), which listeners do not expect from a text they wrote.
_EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\U000e0020-\U000e007f\u200d\ufe0e\ufe0f\u20e3]")


class _G2P(Protocol):
    def __call__(self, text: str) -> tuple[str, object]: ...


class KokoroOnnxEngine:
    """Kokoro-82M int8 weights run by onnxruntime on CPU.

    Voices are the bundled packs plus, when ``voices_dir`` is given, the extra
    packs in it (see ``VoiceBank.from_dir``); ``synthesize`` also takes mixes.
    """

    def __init__(self, cache_dir: Path | None = None, threads: int = 2, *, voices_dir: Path | None = None) -> None:
        if threads < 1:
            raise ValueError("threads must be at least 1")
        model_path, sha256 = ensure_model(cache_dir)
        self._vocab = load_vocab()
        self._valid_ids = frozenset(self._vocab.values())
        # Punctuation, spaces and intonation arrows shape prosody but carry no
        # sound: a piece made only of them has nothing to say.
        self._silent_ids = frozenset(i for c, i in self._vocab.items() if unicodedata.category(c)[0] in "PZS")
        bank = VoiceBank(load_voices())
        self._voices = bank.merge(VoiceBank.from_dir(voices_dir)) if voices_dir is not None else bank
        self._session = self._open_session(model_path, threads)
        self._g2p: dict[str, _G2P] = {}
        # espeak-ng keeps global state in C; calls from several threads would race.
        self._g2p_lock = threading.Lock()
        self._info = EngineInfo(
            name="kokoro-onnx",
            model_version=sha256[:16],
            sample_rate=SAMPLE_RATE,
            voices=self._voices.names(),
            languages=LANGUAGES,
            device="cpu",
        )
        self._warm_up()

    @property
    def info(self) -> EngineInfo:
        return self._info

    def segment(self, text: str, lang: str) -> list[Segment]:
        """Model-sized segments of ``text`` (see ``tts_node.segmenter``)."""
        g2p = self._g2p_for(lang)
        segments = segment_text(text, lambda piece: self._phonemize(g2p, piece), MAX_TOKENS)
        if not segments:
            raise EngineInputError("the text has nothing to speak: it needs at least one word, not only symbols")
        return segments

    def synthesize(self, segment: Segment, voice: str, speed: float) -> Audio:
        """Mono float32 audio at ``SAMPLE_RATE`` for one segment; ``voice`` is a name or a mix spec."""
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
        return audio

    def _g2p_for(self, lang: str) -> _G2P:
        key = lang.strip().lower()
        if key not in LANGUAGES:
            raise EngineInputError(f"unsupported language {lang!r}; supported: {', '.join(LANGUAGES)}")
        with self._g2p_lock:
            g2p = self._g2p.get(key)
            if g2p is None:
                g2p = self._g2p[key] = _make_g2p(key)
            return g2p

    def _phonemize(self, g2p: _G2P, text: str) -> list[int]:
        speakable = _EMOJI.sub(" ", text)
        try:
            with self._g2p_lock:
                phonemes, _ = g2p(speakable)
        except Exception as exc:
            raise EngineFailure(f"phonemizing failed: {exc}") from exc
        # Characters outside the model's vocabulary have no embedding; dropping
        # them is what the reference pipeline does too.
        ids = [self._vocab[c] for c in phonemes if c in self._vocab]
        return ids if not self._silent_ids.issuperset(ids) else []

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
            return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            raise ModelUnavailable(f"onnxruntime cannot load {model_path}: {exc}") from exc


def _make_g2p(lang: str) -> _G2P:
    try:
        # Importing loads the espeak-ng C library: only pay that once a language is used.
        from misaki import espeak

        g2p: _G2P = espeak.EspeakG2P(language=lang)
    except Exception as exc:
        raise ModelUnavailable(f"espeak-ng G2P for {lang} is unavailable (misaki/espeakng-loader): {exc}") from exc
    return g2p
