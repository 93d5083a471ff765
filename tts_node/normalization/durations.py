"""Durations and race times written like clock times: "2:01:09", "1:59.4".

A clock never shows tenths of a second, so "M:SS.f" and "H:MM:SS.f" are always durations. "H:MM:SS" is a
duration after a word that introduces one ("in", "record", "clocked", "a"), or with a one-digit hour and
no word that introduces a time of day ("at", "until", "from") before it nor am/pm after it: a clock with
seconds is written zero-padded or in 24 hours ("09:15:30", "14:05:30"). An hour past 23 is a duration.
"H:MM" stays a time of day: "3:43" is said "three forty-three" whether it is a mile or a time of day,
and "16:9" or "4:3" (no two-digit minutes) are neither.
"""

from __future__ import annotations

import re
from typing import Final

from tts_node.normalization.numbers import cardinal, number

_DURATION: Final = re.compile(
    r"(?<![\w.:])(?P<first>[0-9]{1,2}):(?P<second>[0-5][0-9])(?::(?P<third>[0-5][0-9]))?(?P<fraction>\.[0-9]{1,3})?"
    r"(?![0-9]|[:.][0-9])(?P<ap>\s?[AaPp]\.?[Mm]\b)?"
)
_CLOCK_WORDS: Final = frozenset({"at", "by", "until", "till", "til", "from", "since", "before", "after", "around"})
_DURATION_WORDS: Final = frozenset({
    "in", "of", "a", "an", "record", "finished", "clocked", "ran", "run", "took", "lasted", "lasts",
    "runtime", "duration", "length", "time", "best", "pb", "pr",
})  # fmt: skip


def durations(text: str, british: bool) -> str:
    """ "2:01:09" → "two hours, one minute and nine seconds", "1:59.4" → "one minute and fifty-nine point four
    seconds"; clock times are left to :func:`tts_node.normalization.dates.times`."""
    return _DURATION.sub(_duration, text)


def _duration(match: re.Match[str]) -> str:
    if match["ap"] or not (match["fraction"] or (match["third"] and _is_duration(match))):
        return match.group()
    parts = [int(match["first"]), int(match["second"])]
    if match["third"]:
        parts.append(int(match["third"]))
    hours = parts[0] if len(parts) == 3 else 0
    minutes, seconds = parts[-2], parts[-1]
    said = [
        f"{cardinal(count)} {name}{'' if count == 1 else 's'}"
        for count, name in ((hours, "hour"), (minutes, "minute"))
        if count
    ]
    fraction = match["fraction"] or ""
    if seconds or fraction or not said:
        plural = "" if seconds == 1 and not fraction else "s"
        said.append(f"{number(f'{seconds}{fraction}')} second{plural}")
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def _is_duration(match: re.Match[str]) -> bool:
    """Whether "H:MM:SS" (no fraction, no am/pm) is a duration: see the module's docstring."""
    window = match.string[max(0, match.start() - 24) : match.start()]
    words = window.split()
    before = words[-1].strip(",;(").lower() if words and window[-1:].isspace() else ""
    if int(match["first"]) > 23 or before in _DURATION_WORDS:
        return True
    return before not in _CLOCK_WORDS and len(match["first"]) == 1
