"""Dates and times of day."""

from __future__ import annotations

import re
from typing import Final

from tts_node.normalization.numbers import cardinal, ordinal, year
from tts_node.normalization.punctuation import period_after

MONTHS: Final = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_MONTH_NUMBERS: Final = {
    **{name: i for i, name in enumerate(MONTHS, start=1)},
    **{name[:3]: i for i, name in enumerate(MONTHS, start=1)},
    "Sept": 9,
}
# Full names first, so that "March" is not read as "Mar" + "ch".
_MONTH: Final = rf"\b(?P<month>{'|'.join(sorted(_MONTH_NUMBERS, key=len, reverse=True))})\b(?P<dot>\.)?"
_DAY: Final = r"(?P<day>[0-9]{1,2})(?:st|nd|rd|th)?\b"
_YEAR: Final = r"(?P<year>[0-9]{4})\b(?![.,:][0-9])"
_ISO: Final = re.compile(
    r"(?<![\w.-])(?P<year>[0-9]{4})-(?P<month>0[1-9]|1[0-2])-(?P<day>0[1-9]|[12][0-9]|3[01])(?![\w-])"
)
_NUMERIC: Final = re.compile(
    r"(?<![\w./-])(?P<first>[0-9]{1,2})(?P<sep>[/-])(?P<second>[0-9]{1,2})(?P=sep)(?P<year>[0-9]{4}|[0-9]{2})"
    r"(?![\w/-]|\.[0-9])"
)
_MONTH_FIRST: Final = re.compile(rf"{_MONTH}\s+{_DAY}(?![:.,][0-9])(?:,?\s+{_YEAR})?")
_DAY_FIRST: Final = re.compile(rf"(?:\b(?P<the>[Tt]he)\s+)?(?<![\w.,]){_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?")
_MONTH_YEAR: Final = re.compile(rf"{_MONTH}\s+{_YEAR}")

_AM_PM: Final = r"(?P<ap>[AaPp])(?P<apdot>\.)?[Mm]\b(?P<mdot>\.)?"
_CLOCK: Final = re.compile(
    r"(?<![\w.:])(?P<hour>[01]?[0-9]|2[0-3]):(?P<minute>[0-5][0-9])(?::(?P<second>[0-5][0-9]))?"
    rf"(?![0-9]|[:.][0-9])(?:\s?{_AM_PM})?"
)
_HOUR: Final = re.compile(rf"(?<![\w.:])(?P<hour>1[0-2]|0?[1-9])\s?{_AM_PM}")


def dates(text: str, british: bool) -> str:
    """ISO, numeric (month first), "Jan. 5th, 2027", "5 January 2027" and "January 2027", each as said."""
    text = _ISO.sub(_iso, text)
    text = _NUMERIC.sub(lambda m: _numeric(m, british), text)
    text = _MONTH_FIRST.sub(lambda m: _month_first(m, british), text)
    text = _DAY_FIRST.sub(lambda m: _day_first(m, british), text)
    return _MONTH_YEAR.sub(lambda m: f"{MONTHS[_MONTH_NUMBERS[m['month']] - 1]} {year(int(m['year']))}", text)


def said(month: int, day: int, year_words: str | None) -> str:
    """A date as said: "March fourth, twenty twenty-seven" (an SSML say-as date reads the same)."""
    return f"{MONTHS[month - 1]} {ordinal(day)}" + (f", {year_words}" if year_words else "")


def _iso(match: re.Match[str]) -> str:
    return said(int(match["month"]), int(match["day"]), year(int(match["year"])))


def _numeric(match: re.Match[str], british: bool) -> str:
    month, day = int(match["first"]), int(match["second"])
    if month > 12 >= day:
        month, day = day, month  # only a day-first date can have a "month" over 12
    year_text = match["year"]
    year_words = year(int(year_text), british=british) if len(year_text) == 4 else _short_year(year_text)
    if not (1 <= month <= 12 and 1 <= day <= 31):
        separator = " slash " if match["sep"] == "/" else " dash "
        return separator.join([cardinal(int(match["first"])), cardinal(int(match["second"])), year_words])
    return said(month, day, year_words)


def _short_year(text: str) -> str:
    return f"oh {cardinal(int(text[1]))}" if text[0] == "0" else cardinal(int(text))


def _month_first(match: re.Match[str], british: bool) -> str:
    day = int(match["day"])
    if not 1 <= day <= 31:
        return match.group()
    year_words = year(int(match["year"]), british=british) if match["year"] else None
    return said(_MONTH_NUMBERS[match["month"]], day, year_words)


def _day_first(match: re.Match[str], british: bool) -> str:
    day = int(match["day"])
    if not 1 <= day <= 31:
        return match.group()
    the = match["the"] or "the"
    said = f"{the} {ordinal(day)} of {MONTHS[_MONTH_NUMBERS[match['month']] - 1]}"
    if match["year"]:
        return f"{said}, {year(int(match['year']), british=british)}"
    # "on 5 Jan." may end the sentence with the abbreviation's period.
    return said + (period_after(match.string, match.end()) if match["dot"] else "")


def times(text: str, british: bool) -> str:
    """Clock times: "9:30 a.m." → "nine thirty a m", "14:05" → "fourteen oh five", "12:00" → "twelve o'clock"."""
    return _HOUR.sub(_clock, _CLOCK.sub(_clock, text))


def _clock(match: re.Match[str]) -> str:
    groups = match.groupdict()
    hour, minute = int(groups["hour"]), int(groups.get("minute") or 0)
    words = cardinal(hour)
    if minute:
        words += f" oh {cardinal(minute)}" if minute < 10 else f" {cardinal(minute)}"
    elif not groups["ap"]:
        words += " o'clock" if 1 <= hour <= 12 else " hundred"  # 24-hour "14:00" is "fourteen hundred"
    seconds = int(groups.get("second") or 0)
    if seconds:
        words += f" and {cardinal(seconds)} second" + ("s" if seconds > 1 else "")
    if groups["ap"]:
        words += f" {groups['ap'].lower()} m"
        if groups["mdot"]:
            # "a.m." owns its last period; a bare "am." is followed by a real one.
            words += period_after(match.string, match.end()) if groups["apdot"] else "."
    return words
