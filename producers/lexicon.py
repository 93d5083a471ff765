"""The server's lexicon as the API reads it: each word's phonemes, from the projection, kept ``cache_s``.

Submission adds to every request the lexicon's entries for the words its text says
(:func:`contracts.pronunciations.applied`), so the pronunciations a job is said with are in its
``JobQueued`` and its fingerprint, and every worker follows the lexicon without reading it. A change is
followed by every API instance at most ``cache_s`` (a second: ``voxlog.composition.api.LEXICON_CACHE_S``) after
the projector applied it. While PostgreSQL cannot be read, the lexicon last read is used; one never read is empty
(the request is said by G2P, and its fingerprint says so), logged as a warning.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol

import structlog

from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")


class LexiconRows(Protocol):
    async def lexicon(self) -> dict[str, str]:
        """Every word of the lexicon and its phonemes (``ProjectionUnavailable`` while PostgreSQL is down)."""
        ...


class Lexicon:
    """The lexicon, read again once ``cache_s`` have passed since it was."""

    def __init__(self, rows: LexiconRows, cache_s: float) -> None:
        self._rows = rows
        self._cache_s = cache_s
        self._read: dict[str, str] | None = None
        self._read_at = 0.0

    async def entries(self) -> Mapping[str, str]:
        if self._read is not None and time.monotonic() - self._read_at < self._cache_s:
            return self._read
        try:
            entries = await self._rows.lexicon()
        except ProjectionUnavailable as exc:
            if self._read is None:
                log.warning("submitting without the lexicon: it was never read", error=str(exc))
                return {}
            return self._read  # what was read last, rather than saying its words by G2P
        self._read, self._read_at = entries, time.monotonic()
        return entries
