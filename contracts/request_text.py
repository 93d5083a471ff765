"""What a request's text may contain.

Control characters (Unicode category Cc: NUL, BEL, ESC, DEL, the C1 range,
...) other than whitespace, and lone surrogates (Cs), are refused: they have
no sound, and PostgreSQL can store neither NUL nor a lone surrogate in text
or jsonb, so an event carrying one could be acknowledged by Kafka and then
never projected. Whitespace controls (tab, newline, carriage return, form
feed, ...) are folded into spaces by normalization instead (see
:mod:`contracts.fingerprint`). Refusing rather than silently dropping keeps
the fingerprint rules as they are and tells the client what to fix.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class RefusedCharacter:
    position: int  # index in the text as submitted
    character: str

    def describe(self) -> str:
        kind = "a lone surrogate" if unicodedata.category(self.character) == "Cs" else "the control character"
        return f"{kind} U+{ord(self.character):04X} at position {self.position}"


def has_words(text: str) -> bool:
    """Whether ``text`` has anything to speak: a letter or a digit (Unicode categories L and N).

    Punctuation, symbols, emoji and marks alone (``...``, ``* * *``, ``⁂``) have no sound: the engines'
    G2P gives them no phoneme, so a request of only those is refused when it is submitted, and a document's
    part of only those becomes a pause."""
    return any(unicodedata.category(character)[0] in "LN" for character in text)


def first_refused_character(text: str) -> RefusedCharacter | None:
    """The first character of ``text`` that a request may not contain, if any."""
    for position, character in enumerate(text):
        if unicodedata.category(character) in {"Cc", "Cs"} and not character.isspace():
            return RefusedCharacter(position, character)
    return None
