"""Numbers as words: the readings every rule shares.

Readings are American ("one thousand twenty-four"); with ``british`` a
hundred and the last group below a hundred take "and" ("one thousand and
twenty-four"), the one place where British speakers read digits differently.
Only ASCII digits are read: the rules match ``[0-9]``, never ``\\d``, so digits
of other scripts never reach ``int`` here and stay as they are.
"""

from __future__ import annotations

import re
from typing import Final

_ONES: Final = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
)  # fmt: skip
_TENS: Final = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES: Final = (
    "", "thousand", "million", "billion", "trillion", "quadrillion",
    "quintillion", "sextillion", "septillion", "octillion", "nonillion", "decillion",
)  # fmt: skip
_IRREGULAR_ORDINALS: Final = {
    "one": "first", "two": "second", "three": "third", "five": "fifth",
    "eight": "eighth", "nine": "ninth", "twelve": "twelfth",
}  # fmt: skip
_FRACTION_NAMES: Final = {2: ("half", "halves"), 4: ("quarter", "quarters")}
VULGAR_FRACTIONS: Final = {
    "\u00bd": (1, 2), "\u2153": (1, 3), "\u2154": (2, 3), "\u00bc": (1, 4), "\u00be": (3, 4),
    "\u2155": (1, 5), "\u2156": (2, 5), "\u2157": (3, 5), "\u2158": (4, 5), "\u2159": (1, 6),
    "\u215a": (5, 6), "\u2150": (1, 7), "\u215b": (1, 8), "\u215c": (3, 8), "\u215d": (5, 8),
    "\u215e": (7, 8), "\u2151": (1, 9), "\u2152": (1, 10),
}  # fmt: skip
FRACTION: Final = (
    # A whole number only before a fraction: "2 1/2", "1\u00bd". At most 3 digits, so "in 2019 1/3" is a year.
    rf"(?:(?P<whole>[0-9]{{1,3}})(?:[ \t]+(?=[0-9]{{1,9}}/[0-9])|[ \t]?(?=[{''.join(VULGAR_FRACTIONS)}])))?"
    rf"(?:(?P<n>[0-9]{{1,9}})/(?P<d>[0-9]{{1,9}})|(?P<vulgar>[{''.join(VULGAR_FRACTIONS)}]))"
)
"""A fraction as written: "3/4", "\u00be", or a mixed number, "2 1/2" or "2\u00bd"; see :func:`fraction_parts`."""
MAX_DIGITS: Final = 3 * len(_SCALES)  # past "decillion" there is no name: digit by digit
INT: Final = rf"(?:[0-9]{{1,3}}(?:,[0-9]{{3}}){{1,{len(_SCALES) - 1}}}|[0-9]{{1,{MAX_DIGITS}}})(?![0-9])"
"""An integer, optionally with thousands separators; bounded, so ``int`` never sees a huge string."""
NUMBER: Final = rf"{INT}(?:\.[0-9]+)?"
_LAST_WORD: Final = re.compile(r"(?<![a-z])[a-z]++$")  # from a word's start only: one try per word


def cardinal(n: int, *, british: bool = False) -> str:
    """``1024`` → "one thousand twenty-four" (British: "one thousand and twenty-four")."""
    if n < 0:
        return "minus " + cardinal(-n, british=british)
    if n == 0:
        return "zero"
    groups: list[int] = []
    rest = n
    while rest:
        rest, group = divmod(rest, 1000)
        groups.append(group)
    if len(groups) > len(_SCALES):
        return digits(str(n))
    words = [
        f"{_below_thousand(group, british)} {_SCALES[scale]}".rstrip()
        for scale, group in reversed(list(enumerate(groups)))
        if group
    ]
    if british and len(groups) > 1 and 0 < groups[0] < 100:
        words[-1] = "and " + words[-1]
    return " ".join(words)


def _below_thousand(n: int, british: bool) -> str:
    hundreds, rest = divmod(n, 100)
    words = [f"{_ONES[hundreds]} hundred"] if hundreds else []
    if rest:
        words.extend(["and", _below_hundred(rest)] if hundreds and british else [_below_hundred(rest)])
    return " ".join(words)


def _below_hundred(n: int) -> str:
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")


def ordinal(n: int, *, british: bool = False) -> str:
    """``21`` → "twenty-first": only the last word changes."""
    return _LAST_WORD.sub(lambda m: _ordinal_word(m.group()), cardinal(n, british=british))


def _ordinal_word(word: str) -> str:
    if word in _IRREGULAR_ORDINALS:
        return _IRREGULAR_ORDINALS[word]
    return word[:-1] + "ieth" if word.endswith("y") else word + "th"


def plural(words: str) -> str:
    """The last number word in the plural, for decades: "nineteen ninety" → "nineteen nineties"."""
    return _LAST_WORD.sub(lambda m: m.group()[:-1] + "ies" if m.group().endswith("y") else m.group() + "s", words)


def digits(text: str) -> str:
    """Every ASCII digit of ``text`` by name: "0199" → "zero one nine nine"."""
    return " ".join(_ONES[ord(c) - ord("0")] for c in text if "0" <= c <= "9")


def integer(text: str, *, british: bool = False) -> str:
    """An integer token, separators allowed; a leading zero ("007") or a run past decillions: digit by digit."""
    plain = text.replace(",", "")
    if not plain or (len(plain) > 1 and plain[0] == "0") or len(plain) > MAX_DIGITS:
        return digits(plain)
    return cardinal(int(plain), british=british)


def number(text: str, *, british: bool = False) -> str:
    """A decimal token as said: "-2.5" → "minus two point five", "0.75" → "zero point seven five"."""
    sign = {"-": "minus ", "\u2212": "minus ", "+": "plus "}.get(text[:1], "")
    body = text[1:] if sign else text
    whole, dot, fraction = body.partition(".")
    words = integer(whole, british=british) if whole else ""
    if dot:
        words = f"{words} point {digits(fraction)}".lstrip()
    return sign + words


def is_one(text: str) -> bool:
    """Whether a number token takes the singular: exactly 1, signed or not ("1.0" is plural, as in speech)."""
    return text.lstrip("-+\u2212") == "1"


def paired(n: int, *, british: bool = False) -> str:
    """A four-digit number in pairs, as years and street numbers are said: 1905 → "nineteen oh five"."""
    if n % 1000 == 0 or not 1000 <= n <= 9999:
        return cardinal(n, british=british)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{cardinal(high)} hundred"
    return f"{cardinal(high)} {'oh ' + _ONES[low] if low < 10 else cardinal(low)}"


def year(n: int, *, british: bool = False) -> str:
    """A year: 1999 → "nineteen ninety-nine", 2000 → "two thousand", 2027 → "twenty twenty-seven".

    Pairs, except 2000-2009 ("two thousand seven"): "twenty oh seven" is rarely said.
    """
    if 2000 <= n <= 2009:
        return cardinal(n, british=british)
    return paired(n, british=british)


def nominal(text: str) -> str:
    """Digits that name rather than count (house, flight, model numbers): "221" → "two twenty-one"."""
    if len(text) > 4 or (len(text) > 1 and text[0] == "0"):
        return digits(text)
    n = int(text)
    if len(text) == 3 and n % 100:
        rest = n % 100
        return f"{_ONES[n // 100]} {'oh ' + _ONES[rest] if rest < 10 else cardinal(rest)}"
    return paired(n)


def fraction_parts(match: re.Match[str]) -> tuple[int | None, int, int]:
    """The whole number (None when there is none), numerator and denominator a :data:`FRACTION` matched."""
    whole = int(match["whole"]) if match["whole"] else None
    if match["vulgar"]:
        return (whole, *VULGAR_FRACTIONS[match["vulgar"]])
    return whole, int(match["n"]), int(match["d"])


def fraction_name(numerator: int, denominator: int) -> str:
    """The denominator's name, as the numerator wants it: (1, 4) → "quarter", (3, 8) → "eighths"."""
    one, many = _FRACTION_NAMES.get(denominator, (ordinal(denominator), ordinal(denominator) + "s"))
    return one if numerator == 1 else many


def article(word: str) -> str:
    """ "a" or "an" before a number word or unit as said: "an eighth", "an ounce", "an hour", "a unit"."""
    return "an" if word[:1] in ("a", "e", "i", "o") or word.startswith("hour") else "a"


def mixed(whole: int, numerator: int, denominator: int, *, british: bool = False) -> str:
    """A whole number and a proper fraction: (2, 1, 2) → "two and a half"."""
    return f"{cardinal(whole, british=british)} and {part(numerator, denominator)}"


def part(numerator: int, denominator: int) -> str:
    """A proper fraction after "and" in a mixed number: "a half", "an eighth", "three quarters"."""
    count = article(fraction_name(1, denominator)) if numerator == 1 else cardinal(numerator)
    return f"{count} {fraction_name(numerator, denominator)}"
