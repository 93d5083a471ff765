"""Pronunciations: a word said as given phonemes, by a request's own map or the server's lexicon.

One rule of what a word is, for the API (which resolves a request's pronunciations when it is submitted) and
the worker (which says them) alike:

* A word is a run of letters and digits, with apostrophes (``'`` or U+2019) and hyphens inside it:
  ``tomato``, ``don't``, ``x-ray``, ``R2D2``. It is matched whole and case-insensitively (by its casefolded
  form, U+2019 read as ``'``): ``Tomato`` and ``TOMATO`` are ``tomato``, but ``tomatoes``, ``tomato's`` and
  ``tomato-red`` are other words.
* Its phonemes are Kokoro's phoneme alphabet, the one ``<phoneme ph>`` takes
  (:data:`contracts.ssml_attributes.PHONEMES`), checked by the same rule.
* A request's pronunciations (``SynthesisRequest.pronunciations``) are those of the words its text says:
  the lexicon's entries for them, and the request's own, which win. An entry for a word the text does not
  say changes nothing and is not kept, so a lexicon change changes the fingerprint of exactly the texts that
  say its word.
* The worker says each such word as a ``<phoneme>`` of its own (:func:`spoken_pieces`): the SSML path, with
  the word as written as its caption.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from contracts.errors import InvalidRequest
from contracts.fingerprint import fold_text
from contracts.ssml import Phonemes, Piece, Text
from contracts.ssml_attributes import MAX_PHONEMES, phoneme_problem

MAX_WORD_CHARS: Final = 64
MAX_REQUEST_ENTRIES: Final = 100
"""How many pronunciations one request may give (the lexicon's entries it says come on top)."""
WORD: Final = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")
"""A word as written (see the module docstring); matched in a text with ``finditer``."""


class PronunciationError(InvalidRequest):
    """A word or its phonemes cannot be a pronunciation: the message names the word and what to fix."""


def word_key(word: str) -> str:
    """How a word is matched: casefolded, U+2019 (right single quotation mark) read as ``'``."""
    return unicodedata.normalize("NFC", word).casefold().replace("\u2019", "'")


def checked_word(word: str) -> str:
    """``word`` as the lexicon and requests key it (:func:`word_key`), or :class:`PronunciationError`."""
    written = unicodedata.normalize("NFC", word).strip()
    if not written or len(written) > MAX_WORD_CHARS or WORD.fullmatch(written) is None:
        raise PronunciationError(
            f"{word!r} is not a word a pronunciation can be given for: a word is 1 to {MAX_WORD_CHARS} letters"
            " and digits, with apostrophes or hyphens inside it (tomato, don't, x-ray)"
        )
    return word_key(written)


def checked_phonemes(word: str, phonemes: str) -> str:
    """``phonemes`` folded (whitespace runs as one space, trimmed), or :class:`PronunciationError` naming the
    word and the symbols the model does not have."""
    folded = fold_text(phonemes).strip()
    problem = phoneme_problem(folded)
    if problem is not None:
        raise PronunciationError(f"the pronunciation of {word!r} {problem}")
    return folded


def checked_map(given: Mapping[str, str]) -> dict[str, str]:
    """A request's own pronunciations, canonical (keys by :func:`checked_word`, sorted), or
    :class:`PronunciationError`: over :data:`MAX_REQUEST_ENTRIES` entries, a word that is none, bad phonemes,
    or two spellings of one word."""
    if len(given) > MAX_REQUEST_ENTRIES:
        raise PronunciationError(
            f"pronunciations has {len(given)} entries; the limit is {MAX_REQUEST_ENTRIES}: put the common ones"
            " in the server's lexicon (voxlog lexicon add)"
        )
    out: dict[str, str] = {}
    for word, phonemes in given.items():
        key = checked_word(word)
        if key in out:
            raise PronunciationError(f"pronunciations gives {word!r} twice (words are matched case-insensitively)")
        out[key] = checked_phonemes(word, phonemes)
    return dict(sorted(out.items()))


def words_said(texts: Iterable[str]) -> set[str]:
    """The words (:func:`word_key`) that ``texts`` say."""
    return {word_key(found[0]) for text in texts for found in WORD.finditer(text)}


def applied(texts: Iterable[str], own: Mapping[str, str], lexicon: Mapping[str, str]) -> dict[str, str]:
    """The pronunciations a request whose text pieces are ``texts`` is said with: for each word it says, its own
    entry, else the lexicon's; sorted by word."""
    found: dict[str, str] = {}
    for word in words_said(texts):
        phonemes = own.get(word, lexicon.get(word))
        if phonemes is not None:
            found[word] = phonemes
    return dict(sorted(found.items()))


def spoken_pieces(pieces: Sequence[Piece], pronunciations: Mapping[str, str]) -> list[Piece]:
    """``pieces`` with every word of their text that ``pronunciations`` names as a :class:`Phonemes` of its own
    (the word as written its caption, at its piece's rate); the text around it stays text, every character
    kept, so spans still count the text as written."""
    if not pronunciations:
        return list(pieces)
    out: list[Piece] = []
    for piece in pieces:
        if not isinstance(piece, Text):
            out.append(piece)
            continue
        at = 0
        for found in WORD.finditer(piece.text):
            phonemes = pronunciations.get(word_key(found[0]))
            if phonemes is None:
                continue
            if found.start() > at:
                out.append(Text(piece.text[at : found.start()], piece.rate))
            out.append(Phonemes(phonemes, found[0], piece.rate))
            at = found.end()
        if at < len(piece.text):
            out.append(Text(piece.text[at:], piece.rate))
    return out


__all__ = [
    "MAX_PHONEMES",
    "MAX_REQUEST_ENTRIES",
    "MAX_WORD_CHARS",
    "WORD",
    "PronunciationError",
    "applied",
    "checked_map",
    "checked_phonemes",
    "checked_word",
    "spoken_pieces",
    "word_key",
    "words_said",
]
