"""The values the SSML subset's attributes and say-as contents may take (:mod:`contracts.ssml`), each checked
into the one spelling the canonical text writes."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Final, Literal

from contracts.errors import InvalidRequest
from contracts.fingerprint import fold_text

InterpretAs = Literal["characters", "cardinal", "ordinal", "date", "telephone"]
DateFormat = Literal["ymd", "mdy", "dmy"]
MAX_BREAK_MS: Final = 10_000
MAX_PHONEMES: Final = 500  # one model call takes 510 ids
BREAK_STRENGTH_MS: Final[Mapping[str, int]] = {
    "none": 0, "x-weak": 100, "weak": 250, "medium": 500, "strong": 700, "x-strong": 1500,
}  # fmt: skip
RATES: Final[Mapping[str, float]] = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.5}
MODEL_SPEED_RANGE: Final = (0.25, 4.0)
"""The Kokoro engines' native speed input: a request's speed times a prosody rate must lie in it."""
PHONEMES: Final = frozenset(
    "AIOQSTWYabcdefhijklmnopqrstuvwxyzæçðøŋœɐɑɒɔɕɖəɚɛɜɟɡɣɤɥɨɪɯɰɲɳɴɸɹɻɽɾʁʂʃʈʊʋʌʎʒʔʝʣʤʥʦʧʨʰʲˈˌː\u0303βθχᵊᵝᵻꭧ "  # noqa: RUF001
)
"""What ``<phoneme ph>`` may hold: the letters and marks of Kokoro's phoneme vocabulary, and spaces."""
INTERPRET_AS: Final = ("characters", "cardinal", "ordinal", "date", "telephone")
_TIME: Final = re.compile(r"(?P<n>[0-9]{1,6}(?:\.[0-9]{1,3})?)(?P<unit>ms|s)")
_PERCENT: Final = re.compile(r"(?P<n>[0-9]{1,4}(?:\.[0-9]{1,2})?)%")
_INTEGER: Final = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,36})"
_CONTENT: Final[Mapping[str, re.Pattern[str]]] = {
    "cardinal": re.compile(rf"[+\-\u2212]?{_INTEGER}(?:\.[0-9]{{1,12}})?"),
    "ordinal": re.compile(rf"{_INTEGER}(?:st|nd|rd|th)?"),
    "telephone": re.compile(r"\+?[0-9()][0-9 ().\-]{1,30}"),
}
_DATE: Final = re.compile(r"([0-9]{1,4})[-/.]([0-9]{1,2})[-/.]([0-9]{1,4})")


class SsmlError(InvalidRequest):
    """The SSML is outside the subset, or not XML: the message says what to fix."""


def checked(name: str, attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` checked, in their canonical form (what the canonical text writes)."""
    if name == "break":
        return {"time": str(break_ms(attrs))}
    if name == "say-as":
        interpret_as = attrs.get("interpret-as")
        if interpret_as not in INTERPRET_AS:
            allowed = ", ".join(INTERPRET_AS)
            raise SsmlError(f"<say-as interpret-as={interpret_as!r}> is not supported; use one of: {allowed}")
        date_format = attrs.get("format")
        if date_format is not None and (interpret_as != "date" or date_format not in ("ymd", "mdy", "dmy")):
            raise SsmlError("<say-as format> is for interpret-as='date' only, and one of: ymd, mdy, dmy")
        return {"interpret-as": interpret_as} | ({"format": date_format} if date_format not in (None, "ymd") else {})
    if name == "sub":
        alias = fold_text(attrs.get("alias", "")).strip()
        if not any(unicodedata.category(c)[0] in "LN" for c in alias):
            raise SsmlError("<sub> needs an alias with a word to say: <sub alias='World Wide Web'>WWW</sub>")
        return {"alias": alias}
    if name == "phoneme":
        return {"ph": phonemes(attrs)}
    if name == "prosody":
        return {"rate": percent(rate_of(attrs))}
    return {}


def break_ms(attrs: Mapping[str, str]) -> int:
    if "time" in attrs:
        time = _TIME.fullmatch(attrs["time"].strip())
        if time is None:
            raise SsmlError(f"<break time={attrs['time']!r}> is not a time; write milliseconds or seconds: 500ms, 2s")
        ms = round(float(time["n"]) * (1000 if time["unit"] == "s" else 1))
        if ms > MAX_BREAK_MS:
            raise SsmlError(f"<break time={attrs['time']!r}> is longer than {MAX_BREAK_MS} ms: split it")
        return ms
    strength = attrs.get("strength", "medium")
    if strength not in BREAK_STRENGTH_MS:
        raise SsmlError(f"<break strength={strength!r}> is not supported; use one of: {', '.join(BREAK_STRENGTH_MS)}")
    return BREAK_STRENGTH_MS[strength]


def rate_of(attrs: Mapping[str, str]) -> float:
    value = attrs.get("rate", "").strip()
    if value in RATES:
        return RATES[value]
    percent = _PERCENT.fullmatch(value)
    if percent is None or float(percent["n"]) == 0:
        raise SsmlError(f"<prosody rate={value!r}> is not supported; use {', '.join(RATES)} or a percentage: 150%")
    return float(percent["n"]) / 100


def percent(rate: float) -> str:
    return f"{round(rate * 100, 2):g}%"


def phonemes(attrs: Mapping[str, str]) -> str:
    if attrs.get("alphabet", "ipa") != "ipa":
        raise SsmlError(f"<phoneme alphabet={attrs['alphabet']!r}> is not supported; use ipa")
    ph = fold_text(attrs.get("ph", "")).strip()
    problem = phoneme_problem(ph)
    if problem is not None:
        named = f"={ph!r}" if 0 < len(ph) <= MAX_PHONEMES else ""
        raise SsmlError(f"<phoneme ph{named}> {problem}")
    return ph


def phoneme_problem(ph: str) -> str | None:
    """What keeps ``ph`` (folded) from being said as phonemes: none, too many, or symbols outside the model's
    vocabulary (named); ``None`` when it can be. The one check of ``<phoneme ph>`` and of pronunciations
    (:mod:`contracts.pronunciations`)."""
    if not ph or len(ph) > MAX_PHONEMES:
        return f"needs 1 to {MAX_PHONEMES} phonemes"
    unknown = sorted(set(ph) - PHONEMES)
    if unknown:
        return (
            f"has {', '.join(repr(c) for c in unknown)}, not in the model's phonemes: use"
            f" {''.join(sorted(PHONEMES - {' '}))}"
        )
    return None


def check_reading(content: str, interpret_as: str, date_format: str) -> None:
    if interpret_as == "characters":
        ok = any(unicodedata.category(c)[0] in "LN" for c in content)
    elif interpret_as == "date":
        ok = date_parts(content, date_format) is not None
    else:
        ok = _CONTENT[interpret_as].fullmatch(content) is not None
    if not ok:
        example = {"characters": "ABC", "cardinal": "1,024", "ordinal": "21", "telephone": "555-0199"}.get(
            interpret_as, {"ymd": "2027-03-04", "mdy": "03/04/2027", "dmy": "04/03/2027"}.get(date_format, "")
        )
        raise SsmlError(f"<say-as interpret-as='{interpret_as}'> cannot read {content!r}; write it as {example}")


def date_parts(content: str, date_format: str) -> tuple[int, int, int] | None:
    """``(year, month, day)`` of a say-as date in ``date_format``, or ``None`` if it is not a real date."""
    found = _DATE.fullmatch(content)
    if found is None:
        return None
    first, second, third = (int(g) for g in found.groups())
    year, month, day = {"ymd": (first, second, third), "mdy": (third, first, second), "dmy": (third, second, first)}[
        date_format
    ]
    year_digits = len(found[1] if date_format == "ymd" else found[3])
    if year_digits != 4 or not 1 <= month <= 12 or not 1 <= day <= 31:
        return None
    return year, month, day
