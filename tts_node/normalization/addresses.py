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
_DIGIT_GROUP: Final = re.compile(r"[0-9]+")
_TRAILING: Final = ".,;:!?)]}'\""
_LOCAL: Final = "[A-Za-z0-9._%+-]"
# What an address's local part may be made of, a run at a time, and the domain after it: see _emails.
_LOCAL_RUN: Final = re.compile(rf"(?<!{_LOCAL}){_LOCAL}++")
_DOMAIN: Final = re.compile(r"@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)++")
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
    return _URL.sub(lambda m: _address(m.group()), _emails(text))


def _emails(text: str) -> str:
    """Every email address spelled out: a local part, ``@``, a dotted domain. One was looked for after every
    "%" of a run too (a word character runs into "é%a@b.c", so the address is "a@b.c"), which took a
    quadratic number of steps on a run of 100,000 of them: every start in a run ends where the run ends,
    so each run is read once, from its first start on (:func:`_first_start`), and one domain looked for."""
    pieces, done = [], 0
    for run in _LOCAL_RUN.finditer(text):
        start = _first_start(text, run, done)
        domain = _DOMAIN.match(text, run.end()) if start is not None else None
        if start is not None and domain is not None:
            pieces += [text[done:start], _address(text[start : domain.end()])]
            done = domain.end()
    return "".join([*pieces, text[done:]])


def _first_start(text: str, run: re.Match[str], after: int) -> int | None:
    """Where in ``run``, at ``after`` or later, an address may start: the run's start unless a word character
    runs into it, else just after a "%" (with something after it)."""
    if run.start() >= after and not (run.start() and (text[run.start() - 1].isalnum() or text[run.start() - 1] == "_")):
        return run.start()
    percent = text.find("%", max(run.start(), after - 1), run.end() - 1)
    return percent + 1 if percent >= 0 else None


def _address(address: str) -> str:
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
    groups = telephone(match.group())
    return f"plus {groups}" if match["international"] else groups


def telephone(number: str) -> str:
    """A telephone number's digit groups, digit by digit, a comma between groups (an SSML say-as telephone)."""
    return ", ".join(digits(group) for group in _DIGIT_GROUP.findall(number))
