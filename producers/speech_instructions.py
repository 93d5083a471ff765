"""OpenAI's ``instructions`` ("speak slowly", "use the nova voice"): what Kokoro can do of them.

Kokoro has no style prompt: it takes a voice and a speed, nothing else. So ``instructions`` are read for
those two, by the rules below, and what is left is reported, never silently dropped: the speech route
answers with ``X-Voxlog-Instructions`` saying what was mapped, and what was not and why.

Rules, in order (the first speed rule that matches wins; words are matched whole, case ignored):

* a factor: "1.5x", "at 0.8x speed", "half speed" (0.5), "double speed" or "twice as fast" (2);
* "very"/"really"/"extremely" + slow/slowly: 0.6; + fast/quickly/rapidly: 1.5;
* slow, slowly, slower, unhurried, leisurely: 0.8;
* fast, faster, quick, quickly, quicker, rapidly, briskly, hurried, hurriedly: 1.25;
* a voice: a name the engine has (``jf_alpha``), anywhere; or an OpenAI voice name beside the word
  "voice" ("the nova voice", "voice: nova") — alone, "sage" or "echo" are ordinary words.

The speed is the request's ``speed`` times the factor, kept within the accepted range; the voice replaces
the request's ``voice``. Words left once these phrases and filler ("speak", "please", "the", "voice", ...)
are taken out are what could not be mapped.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

HEADER: Final = "X-Voxlog-Instructions"
WHY_NOT: Final = "Kokoro takes no style prompt, only a speed and a voice"

SPEED_RULES: Final[tuple[tuple[re.Pattern[str], float | None], ...]] = (
    # None: the factor is the number matched.
    (re.compile(r"\b(?:at\s+)?(\d+(?:\.\d+)?)\s*x(?:\s+(?:the\s+)?speed)?(?![a-z])"), None),
    (re.compile(r"\b(?:at\s+)?half\s+(?:the\s+)?speed\b"), 0.5),
    (re.compile(r"\b(?:at\s+)?double\s+(?:the\s+)?speed\b|\btwice\s+as\s+fast\b"), 2.0),
    (re.compile(r"\b(?:very|really|extremely)\s+slow(?:ly)?\b"), 0.6),
    (re.compile(r"\b(?:very|really|extremely)\s+(?:fast|quickly|rapidly)\b"), 1.5),
    (re.compile(r"\b(?:more\s+)?(?:slow|slowly|slower|unhurried|leisurely)\b"), 0.8),
    (re.compile(r"\b(?:more\s+)?(?:fast|faster|quick|quickly|quicker|rapidly|briskly|hurried|hurriedly)\b"), 1.25),
)
_FILLER: Final = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "please",
        "speak",
        "talk",
        "say",
        "read",
        "it",
        "this",
        "in",
        "with",
        "at",
        "use",
        "using",
        "voice",
        "tone",
        "pace",
        "speed",
        "of",
        "as",
        "like",
        "be",
        "your",
        "you",
        "should",
        "sound",
        "that",
        "to",
        "for",
        "more",
        "bit",
        "little",
        "slightly",
    }
)
_WORD: Final = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True)
class Steering:
    """What ``instructions`` map to: a speed factor and a voice (``None``: the request's own), what was
    mapped (for the header), and the words that were not."""

    speed_factor: float = 1.0
    voice: str | None = None
    mapped: tuple[str, ...] = ()
    unmapped: tuple[str, ...] = ()


def read_instructions(instructions: str, voices: Collection[str], openai_voices: Collection[str]) -> Steering:
    """``instructions`` read for a speed and a voice; ``voices`` are the engine's, ``openai_voices`` OpenAI's
    names (see the module docstring)."""
    text = instructions.lower()
    consumed: list[tuple[int, int]] = []
    factor, mapped = 1.0, []
    for pattern, value in SPEED_RULES:
        match = pattern.search(text)
        if match is None:
            continue
        factor = value if value is not None else float(match.group(1))
        if factor <= 0:
            continue
        consumed.append(match.span())
        mapped.append(f"speed x{factor:g}")
        break
    voice = None
    for match in _WORD.finditer(text):
        name = match.group()
        own = name in voices and "_" in name
        if own or (name in openai_voices and _beside_voice(text, match.start(), match.end())):
            voice = name
        else:
            continue
        consumed.append(match.span())
        mapped.append(f"voice {voice}")
        break
    left = [
        word.group()
        for word in _WORD.finditer(text)
        if word.group() not in _FILLER and not any(a <= word.start() < b for a, b in consumed)
    ]
    return Steering(factor, voice, tuple(mapped), tuple(left))


def _beside_voice(text: str, start: int, end: int) -> bool:
    before, after = text[max(0, start - 12) : start], text[end : end + 8]
    return re.search(r"voice\W*$", before) is not None or re.match(r"\W*voice\b", after) is not None


def header_value(steering: Steering, speed: float | None = None, clamped: bool = False) -> str:
    """The ``X-Voxlog-Instructions`` header: ``mapped``, ``partly mapped`` or ``ignored``, then what and why.
    ``speed`` is the speed the request gets once the factor is applied (``clamped``: held to the range)."""
    parts = [m if not (m.startswith("speed") and speed is not None) else f"{m} = {speed:g}" for m in steering.mapped]
    if clamped:
        parts.append("speed held to the accepted range")
    if not steering.unmapped:
        return "mapped; " + "; ".join(parts) if parts else "mapped; nothing to do"
    unmapped = f"not mapped: {' '.join(steering.unmapped)[:200]} ({WHY_NOT})"
    return "; ".join(["partly mapped", *parts, unmapped]) if parts else f"ignored; {unmapped}"
