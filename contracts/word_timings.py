"""A segment's word timings as the projection keeps them: one JSON array, in ``segments.words``."""

from __future__ import annotations

from typing import Final

from pydantic import TypeAdapter

from contracts.events import WordTiming

_WORDS: Final = TypeAdapter(tuple[WordTiming, ...])


def words_json(words: tuple[WordTiming, ...] | None) -> str | None:
    return None if words is None else _WORDS.dump_json(words).decode()


def words_of(stored: str | None) -> tuple[WordTiming, ...] | None:
    """The timings ``words_json`` wrote (``None``: the segment has none)."""
    return None if stored is None else _WORDS.validate_json(stored)
