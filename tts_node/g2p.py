"""Offline English G2P shared by both Kokoro engines: text → Kokoro phoneme ids.

espeak-ng (through misaki, with espeakng-loader's bundled library and data)
phonemizes with no download. Emoji and their joiners are blanked first:
espeak would read them aloud by name ("grinning face"). A piece whose ids are
all punctuation, space or symbols has nothing to say and maps to no ids.
Written forms espeak reads badly ("$1,234.56", "4:07 PM", "2.5 kg") are spelled
out first (:mod:`tts_node.normalization`), unless a request turns that off.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Final, Protocol

from tts_node.engine import Segment, WordTime
from tts_node.errors import EngineFailure, EngineInputError, ModelUnavailable
from tts_node.normalization import RULES_VERSION
from tts_node.normalization import normalize as normalize_text
from tts_node.segmenter import segment_text
from tts_node.word_timing import word_times

LANGUAGES: Final = ("en-us", "en-gb")
_EMOJI: Final = re.compile(
    "[\u2600-\u27bf\u2b00-\u2bff\U0001f000-\U0001faff\U000e0020-\U000e007f\u200d\ufe0e\ufe0f\u20e3]"
)


class _G2P(Protocol):
    def __call__(self, text: str) -> tuple[str, object]: ...


_ESPEAK: Final = threading.Lock()
"""The one owner of espeak-ng in a process. Its C library keeps global state (the voice, the output
buffer), so concurrent calls can corrupt each other's output (kokoro-onnx issue #191): every G2P call, of
every :class:`Phonemizer` and language, holds this lock, not a lock of its own instance's."""


class Phonemizer:
    """Thread-safe: every call into espeak-ng holds the process's one lock (``_ESPEAK``)."""

    def __init__(self, vocab: Mapping[str, int]) -> None:
        self._vocab = dict(vocab)
        self._silent_ids = frozenset(i for c, i in self._vocab.items() if unicodedata.category(c)[0] in "PZS")
        self._space_id = self._vocab.get(" ")
        self._g2p: dict[str, _G2P] = {}

    def for_language(self, lang: str) -> _G2P:
        key = lang.strip().lower()
        if key not in LANGUAGES:
            raise EngineInputError(f"unsupported language {lang!r}; supported: {', '.join(LANGUAGES)}")
        with _ESPEAK:  # building a backend initializes espeak-ng too
            g2p = self._g2p.get(key)
            if g2p is None:
                g2p = self._g2p[key] = _make_g2p(key)
            return g2p

    def segment(self, text: str, lang: str, max_tokens: int, *, normalize: bool = True) -> list[Segment]:
        """Model-sized segments of ``text`` (see ``tts_node.segmenter``), each with its spoken form."""
        phonemize = self.phonemizer_for(lang, normalize=normalize)
        segments = segment_text(text, phonemize, max_tokens)
        if not segments:
            raise EngineInputError("the text has nothing to speak: it needs at least one word, not only symbols")
        spoken = (lambda piece: normalize_text(piece, lang)) if normalize else (lambda piece: piece)
        return [replace(segment, spoken=spoken(segment.text)) for segment in segments]

    def word_times(self, segment: Segment, durations: Sequence[int], samples: int) -> tuple[WordTime, ...] | None:
        """Where ``segment``'s words are said in its audio, from the model's frames per id (see
        :mod:`tts_node.word_timing`)."""
        return word_times(segment, durations, samples, self._space_id, self._silent_ids)

    def phonemizer_for(self, lang: str, *, normalize: bool = True) -> Callable[[str], list[int]]:
        """Ids of a piece of text in ``lang``, spelled out first by :mod:`tts_node.normalization` (numbers,
        dates, units, ...) unless ``normalize`` is false. The segmenter measures pieces with it, so a
        segment's ids are those of its normalized text while its span stays in the text as written."""
        g2p = self.for_language(lang)
        if not normalize:
            return lambda piece: self.ids(g2p, piece)
        return lambda piece: self.ids(g2p, normalize_text(piece, lang))

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        """The ids of phonemes written in the model's own alphabet (an SSML ``<phoneme ph>``): no G2P."""
        unknown = sorted({c for c in phonemes if c not in self._vocab})
        if unknown:
            raise EngineInputError(f"phonemes {phonemes!r} have characters the model does not know: {unknown}")
        return tuple(self._vocab[c] for c in phonemes)

    def ids(self, g2p: _G2P, text: str) -> list[int]:
        try:
            with _ESPEAK:
                phonemes, _ = g2p(_EMOJI.sub(" ", text))
        except Exception as exc:
            raise EngineFailure(f"phonemizing failed: {exc}") from exc
        # Characters outside the model's vocabulary have no embedding; dropping
        # them is what the reference pipeline does too.
        ids = [self._vocab[c] for c in phonemes if c in self._vocab]
        return ids if not self._silent_ids.issuperset(ids) else []


def announced_version(model_version: str) -> str:
    """The version an engine with this G2P front announces: its model's, and the normalization rules it
    applies, so that a change of rules changes every fingerprint instead of serving audio made under
    the old ones."""
    return f"{model_version}+{RULES_VERSION}"


def _make_g2p(lang: str) -> _G2P:
    try:
        # Importing loads the espeak-ng C library: only pay that once a language is used.
        from misaki import espeak

        g2p: _G2P = espeak.EspeakG2P(language=lang)
    except Exception as exc:
        raise ModelUnavailable(f"espeak-ng G2P for {lang} is unavailable (misaki/espeakng-loader): {exc}") from exc
    # phonemizer (re)configures its logger when a backend is built, at WARNING, and then warns on every
    # piece whose word count its punctuation split changes: expected with our segmenting, never actionable.
    logging.getLogger("phonemizer").setLevel(logging.ERROR)
    return g2p
