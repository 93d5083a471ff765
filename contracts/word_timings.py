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


def shifted(words: tuple[WordTiming, ...] | None, by: int) -> tuple[WordTiming, ...] | None:
    """``words`` with their characters ``by`` further on: a segment's own, or its request's."""
    if words is None:
        return None
    return tuple(w.model_copy(update={"start": w.start + by, "end": w.end + by}) for w in words)
