"""Request fingerprints: the key that coalesces identical synthesis requests.

The fingerprint is the hex sha256 of canonical JSON over every field that
determines the audio, and nothing else (never the job id, the client's
idempotency key or a timestamp). Normalization rules, applied before hashing:

* text: Unicode NFC; the invisible format characters U+200B (zero width
  space), U+2060 (word joiner), U+FEFF (byte order mark) and U+00AD (soft
  hyphen) removed, since they change no sound; every run of Unicode whitespace
  (spaces, tabs, newlines, no-break spaces) folded to one ASCII space; leading
  and trailing whitespace removed. Case, punctuation and digits are kept:
  they change what the model says.
* voice: surrounding whitespace removed; kept case-sensitive.
* lang, engine, format: surrounding whitespace removed, lower-cased.
* speed: rounded to two decimals and written as a fixed-point string
  (``"1.00"``), so ``1``, ``1.0`` and ``1.001`` hash alike. A speed beyond
  what the model makes (``contracts.speed``) also hashes ``time_stretch``,
  the stretching's version; others hash as before it existed.
* sample_rate: an integer (Hz).
* model_version: kept as given (a hash of the weights, and the version of the
  engine's text normalization rules).
* normalize: hashed only when ``False`` (the text goes to G2P as written), so
  a request that normalizes, the default, keeps the fingerprint it had before
  the field existed.
* cache_scope: hashed only when set (``VOXLOG_CACHE_SCOPE=tenant`` sets it to
  the tenant), so that identical requests of different tenants have different
  fingerprints and share nothing; unset, they share one synthesis.
* input_format: hashed only when not ``"text"``: ``"ssml"`` (the text is SSML,
  in the canonical form :mod:`contracts.ssml` writes, so every spelling of one
  document is one fingerprint); a plain text and the same characters read as
  SSML never share audio, and a plain request keeps the fingerprint it had
  before the field existed.
* pronunciations: hashed only when not empty (word -> phonemes, casefolded words, sorted by the canonical
  JSON): the words of the text said as given phonemes (:mod:`contracts.pronunciations`), so a request whose
  text says a word of the lexicon changes fingerprint when that entry does, and every other keeps its own.

Canonical JSON: keys sorted, no insignificant whitespace, UTF-8 without
escaping non-ASCII, plus a ``fingerprint_version`` field so that a change of
these rules changes every fingerprint instead of silently colliding.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Final

from contracts.speed import STRETCH_VERSION, stretched

FINGERPRINT_VERSION: Final = 1

_INVISIBLE: Final = dict.fromkeys(map(ord, "\u200b\u2060\ufeff\u00ad"))
_WHITESPACE_RUN: Final = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Return ``text`` as the fingerprint sees it (see the module docstring)."""
    return fold_text(text).strip()


def fold_text(text: str) -> str:
    """``text`` in NFC, without its invisible format characters, each whitespace run one space (kept at the
    ends: a piece of a longer text, such as an SSML text node, keeps the space that parts it from the next)."""
    composed = unicodedata.normalize("NFC", text).translate(_INVISIBLE)
    return _WHITESPACE_RUN.sub(" ", composed)


def normalize_speed(speed: float) -> str:
    """Speed as a two-decimal fixed-point string: ``1`` → ``"1.00"``."""
    return str(Decimal(repr(float(speed))).quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def canonical_json(value: object) -> bytes:
    """Deterministic JSON bytes: sorted keys, compact separators, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fingerprint(
    *,
    text: str,
    voice: str,
    speed: float,
    lang: str,
    engine: str,
    model_version: str,
    audio_format: str,
    sample_rate: int,
    normalize: bool = True,
    cache_scope: str | None = None,
    input_format: str = "text",
    pronunciations: Mapping[str, str] | None = None,
) -> str:
    """Hex sha256 identifying the audio a request produces."""
    document = {
        "fingerprint_version": FINGERPRINT_VERSION,
        "text": normalize_text(text),
        "voice": voice.strip(),
        "speed": normalize_speed(speed),
        "lang": lang.strip().lower(),
        "engine": engine.strip().lower(),
        "model_version": model_version,
        "format": audio_format.strip().lower(),
        "sample_rate": int(sample_rate),
    }
    if stretched(speed):
        document["time_stretch"] = STRETCH_VERSION
    if not normalize:
        document["normalize"] = False
    if cache_scope is not None:
        document["cache_scope"] = cache_scope
    if input_format != "text":
        document["input_format"] = input_format
    if pronunciations:
        document["pronunciations"] = dict(pronunciations)
    return hashlib.sha256(canonical_json(document)).hexdigest()


SEGMENT_KEY_VERSION: Final = 1


def segment_key(
    *, engine: str, model_version: str, voice: str, speed: float, ids: Sequence[int], cache_scope: str | None = None
) -> str:
    """Hex sha256 of what makes one segment's audio: the engine and its model version, the voice and
    speed, and the segment's phoneme ids (its text after normalization and G2P). Identical sentences of
    different requests share it, so the worker synthesizes them once. ``cache_scope`` (the request's, set by
    ``VOXLOG_CACHE_SCOPE=tenant`` to its tenant) is hashed only when set, as in :func:`fingerprint`: a tenant's
    sentences then share audio with its own requests only, and unscoped keys are what they were before."""
    document: dict[str, object] = {
        "segment_key_version": SEGMENT_KEY_VERSION,
        "engine": engine.strip().lower(),
        "model_version": model_version,
        "voice": voice.strip(),
        "speed": normalize_speed(speed),
        "ids": list(ids),
    }
    if stretched(speed):
        document["time_stretch"] = STRETCH_VERSION
    if cache_scope is not None:
        document["cache_scope"] = cache_scope
    return hashlib.sha256(canonical_json(document)).hexdigest()
