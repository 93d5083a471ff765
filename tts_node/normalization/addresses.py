"""Addresses read aloud: email addresses, URLs and phone numbers."""

from __future__ import annotations

import re
from typing import Final

from tts_node.normalization.numbers import digits

_SYMBOL_NAMES: Final = {
    ".": "dot", "/": "slash", "-": "dash", "_": "underscore", ":": "colon", "?": "question mark",
    "=": "equals", "&": "and", "#": "hash", "%": "percent", "~": "tilde", "+": "plus", "@": "at",
}  # fmt: skip
_PIECE: Final = re.compile(r"(?P<word>[^\W\d_]+)|(?P<digits>[0-9]+)|(?P<other>.)", re.DOTALL)
_SCHEME: Final = re.compile(r"^[A-Za-z]+://")
_TRAILING: Final = ".,;:!?)]}'\""
_EMAIL: Final = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_TLDS: Final = "com|org|net|edu|gov|io|dev|ai|app|co|uk|us|de|fr|eu|info|me|tv|ly|xyz"
_URL: Final = re.compile(
    r"\b(?:https?|ftp)://[^\s<>\"]+"
    r"|\bwww\.[^\s<>\"]+"
    # A bare domain needs a known top-level domain: "node.js" or "e.g." are not addresses.
    rf"|(?<![\w.@/-])[A-Za-z0-9][A-Za-z0-9-]*(?:\.[A-Za-z0-9-]+)*\.(?:{_TLDS})(?![\w-])(?:/[^\s<>\"]*)?"
)
_PHONE: Final = re.compile(
    r"(?<![\w+.-])(?:"
    r"(?P<international>\+[0-9]{1,3}(?:[ .-]\(?[0-9]{2,4}\)?){2,5}|\+[0-9]{8,15})"  # +1 555 123 4567
    r"|(?:1[ .-])?(?:\([2-9][0-9]{2}\)\s?|[2-9][0-9]{2}[ .-])[0-9]{3}[ .-][0-9]{4}"  # (555) 123-4567
    # Seven digits as 3-4 only from an exchange starting 2-9, as North American ones do:
    # "100-1000" stays a range.
    r"|[2-9][0-9]{2}-[0-9]{4}"
    r")(?![\w-]|\.[0-9])"
)


def emails_and_urls(text: str, british: bool) -> str:
    """Addresses spelled out: "jane.doe@example.org" → "jane dot doe at example dot org".

    "https://example.com/docs" → "example dot com slash docs": the scheme is dropped, it says nothing a listener needs.
    """
    return _URL.sub(_address, _EMAIL.sub(_address, text))


def _address(match: re.Match[str]) -> str:
    address = match.group()
    body = address.rstrip(_TRAILING)
    # Sentence punctuation after an address is not part of it, and a trailing slash says nothing.
    return _spoken(_SCHEME.sub("", body).rstrip("/")) + address[len(body) :]


def _spoken(address: str) -> str:
    words: list[str] = []
    for piece in _PIECE.finditer(address):
        if piece["word"]:
            words.append("w w w" if piece["word"].lower() == "www" else piece["word"])
        elif piece["digits"]:
            words.append(digits(piece["digits"]))
        else:
            words.append(_SYMBOL_NAMES.get(piece["other"], piece["other"]))
    return " ".join(words)


def phone_numbers(text: str, british: bool) -> str:
    """Digit by digit, a pause (comma) between groups: "555-0199" → "five five five, zero one nine nine"."""
    return _PHONE.sub(_phone, text)


def _phone(match: re.Match[str]) -> str:
    groups = ", ".join(digits(group) for group in re.findall(r"[0-9]+", match.group()))
    return f"plus {groups}" if match["international"] else groups
