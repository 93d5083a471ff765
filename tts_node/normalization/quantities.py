"""Rules for what is left of the digits once addresses, dates and times are read."""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from tts_node.normalization.numbers import (
    FRACTION,
    INT,
    MAX_DIGITS,
    NUMBER,
    cardinal,
    fraction_name,
    fraction_parts,
    integer,
    is_one,
    mixed,
    nominal,
    number,
    ordinal,
    plural,
    year,
)
from tts_node.normalization.punctuation import spaced

_SIGN: Final = "[-+\u2212]"
# A sign belongs to the number only at a word's start: "x-1" is "x-one", not "x minus one".
_SIGNED: Final = rf"(?<![\w.])(?P<amount>{_SIGN}?{NUMBER})"
# The left end starts a word: in "A3-2B" or "x86-64" the dash is part of a name.
_RANGE: Final = re.compile(
    "(?<![\\w.,:%])(?P<left>[0-9][0-9.,:]*+%?)(?:-|\\s?\u2013\\s?)(?=[$\u20ac\u00a3\u00a5]?[0-9])"
)
_BETWEEN: Final = re.compile(r"\b[Bb]etween\s+\Z")  # "between 9-11" is "between nine and eleven"


class _Currency(NamedTuple):
    one: str
    many: str
    cent: str | None  # None: no coins worth saying (yen)
    cents: str | None
    joined_by_and: bool  # "two dollars and fifty cents", but "two pounds fifty"


_CURRENCIES: Final = {
    "$": _Currency("dollar", "dollars", "cent", "cents", joined_by_and=True),
    "\u20ac": _Currency("euro", "euros", "cent", "cents", joined_by_and=True),
    "\u00a3": _Currency("pound", "pounds", "penny", "pence", joined_by_and=False),
    "\u00a5": _Currency("yen", "yen", None, None, joined_by_and=False),
}
_CODES: Final = {"USD": "$", "EUR": "\u20ac", "GBP": "\u00a3", "JPY": "\u00a5"}
_SCALES: Final = {
    "thousand": "thousand", "million": "million", "billion": "billion", "trillion": "trillion",
    "k": "thousand", "K": "thousand", "m": "million", "M": "million", "mn": "million",
    "bn": "billion", "B": "billion", "tn": "trillion",
}  # fmt: skip
_SCALE: Final = r"(?:\s(?P<scale>thousand|million|billion|trillion)\b|(?P<abbr>k|K|mn|m|M|bn|B|tn)\b)?"
_CODE: Final = "|".join(_CODES)
_PER_WORDS: Final = {
    "h": "hour", "hr": "hour", "hour": "hour", "day": "day", "wk": "week", "week": "week", "mo": "month",
    "month": "month", "yr": "year", "year": "year", "person": "person", "kg": "kilogram", "lb": "pound",
}  # fmt: skip
_PER: Final = rf"(?:/(?P<per>{'|'.join(_PER_WORDS)})\b)?"  # "$20/month" → "twenty dollars per month"
_MONEY: Final = (
    re.compile(rf"(?<![\w.])(?P<sign>{_SIGN})?(?P<symbol>[$\u20ac\u00a3\u00a5])\s?(?P<amount>{NUMBER}){_SCALE}{_PER}"),
    re.compile(rf"\b(?P<code>{_CODE})\s?(?P<amount>{NUMBER}){_SCALE}{_PER}"),
    re.compile(rf"(?<![\w.])(?P<amount>{NUMBER}){_SCALE}\s?(?P<code>{_CODE})\b{_PER}"),
)
_PERCENT: Final = re.compile(rf"{_SIGNED}\s?%")

_DECADE: Final = re.compile(r"(?<![\w.,])(?P<year>1[1-9][0-9]0|20[0-9]0)['\u2019]?s\b")
_SHORT_DECADE: Final = re.compile(
    r"(?P<lead>['\u2018\u2019]|\b(?:[Tt]he|his|her|their|my|our|your|[Ee]arly|[Mm]id|[Ll]ate)[\s-])"
    r"(?P<tens>[1-9]0)['\u2019]?s\b"
)
_ORDINAL: Final = re.compile(rf"(?<![\w.])(?P<n>{INT})(?:st|nd|rd|th|ST|ND|RD|TH)\b")
_DOTTED: Final = re.compile(r"(?<![\w.])(?P<v>[vV])?(?P<parts>[0-9]{1,9}(?:\.[0-9]{1,9})+)(?!\w|\.[0-9])")
_VERSION_WORD: Final = re.compile(r"\b(?:[Vv]ersion|[Rr]elease|[Pp]ython)\s+\Z")
_DECIMAL: Final = re.compile(rf"(?<![\w.])(?P<amount>{_SIGN}?(?:{INT})?\.[0-9]+)(?![0-9]|\.[0-9])")
_FRACTION: Final = re.compile(rf"(?<![\w/.]){FRACTION}(?!\w|/|\.[0-9])")
_DIMENSIONS: Final = re.compile("(?<![\\w.])[0-9]{1,9}(?:\\s?[x\u00d7]\\s?[0-9]{1,9})+(?!\\w|\\.[0-9])")
# Digits after a word that names a room, flight, route or model are a name: "Room 104" is "room one oh four".
_NAMING_WORD: Final = (
    "[Rr]oom|[Aa]partment|[Ss]uite|[Uu]nit|[Gg]ate|[Ff]light|[Pp]latform|[Tt]rack|[Bb]us|[Rr]oute|[Hh]ighway"
    "|[Ii]nterstate|[Ee]xit|[Tt]erminal|[Mm]odel|Boeing|[A-Z]{2,5}"  # an all-capital name: "RTX 4090"
)
_NAMED: Final = re.compile(rf"\b(?:{_NAMING_WORD})\s(?P<n>[0-9]{{3,4}})(?!\w|[.,:/-]?[0-9])")
_ALPHANUMERIC: Final = re.compile(r"\b(?=[0-9]*[A-Za-z])(?=[A-Za-z]*[0-9])[A-Za-z0-9]+\b")
_DIGIT_GROUP: Final = re.compile(r"[0-9]+")
_LETTERS_OR_DIGITS: Final = re.compile(r"[A-Za-z]+|[0-9]+")
# Not after a sign: "-1500" is minus a number, not a year BC.
_YEAR: Final = re.compile("(?<![\\w.,+\u2212-])(?P<year>1[1-9][0-9]{2}|20[0-9]{2})(?!\\w|[.,][0-9])")
_COUNTED_BEFORE: Final = re.compile(r"\b(?:[Pp]ages?|[Nn]umbers?|pp?)\.?\s+\Z")
# Separators only between groups of three ("1,2,3" stays a list); runs past the scale names, digit by digit.
_INTEGER: Final = re.compile(rf"(?P<sign>(?<![\w.]){_SIGN})?(?P<n>{INT}|[0-9]{{{MAX_DIGITS + 1},}})")


def ranges(text: str, british: bool) -> str:
    """A dash between numbers says "to": "10-20" → "10 to 20"; the later rules read the numbers."""
    return _RANGE.sub(_range, text)


def _range(match: re.Match[str]) -> str:
    between = _BETWEEN.search(match.string, max(0, match.start() - 10), match.start())
    return f"{match['left']} {'and' if between else 'to'} "


def money(text: str, british: bool) -> str:
    """Amounts: "$1,234.56" → "one thousand two hundred thirty-four dollars and fifty-six cents", "$3 million"."""
    for pattern in _MONEY:
        text = pattern.sub(lambda m: _money(m, british), text)
    return text


def _money(match: re.Match[str], british: bool) -> str:
    per = match["per"]
    return _amount(match, british) + (f" per {_PER_WORDS[per]}" if per else "")


def _amount(match: re.Match[str], british: bool) -> str:
    groups = match.groupdict()
    currency = _CURRENCIES[groups.get("symbol") or _CODES[groups["code"]]]
    sign = "minus " if groups.get("sign") in ("-", "\u2212") else ""
    amount = match["amount"]
    scale = match["scale"] or _SCALES.get(match["abbr"] or "")
    if scale:
        return f"{sign}{number(amount, british=british)} {scale} {currency.many}"
    whole, _, cents = amount.partition(".")
    if currency.cent is None or currency.cents is None or len(cents) > 2:
        return f"{sign}{number(amount, british=british)} {currency.one if is_one(amount) else currency.many}"
    major = whole.replace(",", "")
    minor = int(cents.ljust(2, "0")) if cents else 0
    pieces = []
    if int(major) or not minor:
        pieces.append(f"{integer(whole, british=british)} {currency.one if major == '1' else currency.many}")
    if minor:
        coins = f"{cardinal(minor)} {currency.cent if minor == 1 else currency.cents}"
        if not pieces:
            pieces.append(coins)
        elif currency.joined_by_and:
            pieces.append(f"and {coins}")
        else:
            pieces.append(cardinal(minor))
    return sign + " ".join(pieces)


def percentages(text: str, british: bool) -> str:
    """Percentages: "45%" → "forty-five percent", "2.5%" → "two point five percent"."""
    return _PERCENT.sub(lambda m: f"{number(m['amount'], british=british)} percent", text)


def decades(text: str, british: bool) -> str:
    """Decades: "1990s" → "nineteen nineties", "the '80s" → "the eighties", "mid-90s" → "mid-nineties"."""
    text = _DECADE.sub(lambda m: plural(year(int(m["year"]))), text)
    return _SHORT_DECADE.sub(_short_decade, text)


def _short_decade(match: re.Match[str]) -> str:
    # A bare "30s" is as likely thirty seconds: a short decade needs an apostrophe or a word like "the".
    lead = "" if match["lead"] in "'\u2018\u2019" else match["lead"]
    return lead + plural(cardinal(int(match["tens"])))


def ordinals(text: str, british: bool) -> str:
    """Ordinals: "5th" → "fifth", "21st" → "twenty-first"; the suffix is not checked against the number."""
    return _ORDINAL.sub(lambda m: ordinal(int(m["n"].replace(",", "")), british=british), text)


def dotted_numbers(text: str, british: bool) -> str:
    """Versions "2.4.1" → "two point four point one"; IP addresses "192.168.0.1" → "one ninety-two dot ..."."""
    return _DOTTED.sub(_dotted, text)


def _dotted(match: re.Match[str]) -> str:
    parts = match["parts"].split(".")
    if not match["v"] and len(parts) == 4 and all(int(part) <= 255 for part in parts):
        return " dot ".join(nominal(part) for part in parts)
    if match["v"] or len(parts) > 2 or _VERSION_WORD.search(match.string, max(0, match.start() - 12), match.start()):
        # Parts of a version are counted, not decimal digits: "3.11" is "three point eleven".
        said = " point ".join(integer(part) for part in parts)
        return f"version {said}" if match["v"] else said
    return match.group()


def decimals(text: str, british: bool) -> str:
    """Decimals: "2.5" → "two point five", "0.75" → "zero point seven five", ".5" → "point five"."""
    return _DECIMAL.sub(lambda m: number(m["amount"], british=british), text)


def fractions(text: str, british: bool) -> str:
    """Fractions: "3/4" → "three quarters"; anything but a proper fraction up to tenths is two numbers ("24/7")."""
    return _FRACTION.sub(lambda m: _fraction(m, british), text)


def _fraction(match: re.Match[str], british: bool) -> str:
    whole, numerator, denominator = fraction_parts(match)
    if not 0 < numerator < denominator <= 10:
        said = f"{cardinal(numerator)} {cardinal(denominator)}"
        return said if whole is None else f"{cardinal(whole, british=british)} {said}"
    if whole is not None:
        return mixed(whole, numerator, denominator, british=british)
    return f"{cardinal(numerator)} {fraction_name(numerator, denominator)}"


def dimensions(text: str, british: bool) -> str:
    """Dimensions: "1920x1080" → "nineteen twenty by ten eighty", "2 x 4" → "two by four"."""
    return _DIMENSIONS.sub(lambda m: " by ".join(nominal(n) for n in _DIGIT_GROUP.findall(m.group())), text)


def named_numbers(text: str, british: bool) -> str:
    """Three or four digits after a naming word: "Room 104" → "Room one oh four", "RTX 4090" → "RTX forty ninety"."""
    return _NAMED.sub(lambda m: m.group()[: m.start("n") - m.start()] + nominal(m["n"]), text)


def alphanumerics(text: str, british: bool) -> str:
    """Digits that name, in a word with letters: "221B" → "two twenty-one B", "A380" → "A three eighty"."""
    return _ALPHANUMERIC.sub(_alphanumeric, text)


def _alphanumeric(match: re.Match[str]) -> str:
    pieces = _LETTERS_OR_DIGITS.findall(match.group())
    return " ".join(nominal(piece) if piece[0].isdigit() else piece for piece in pieces)


def years(text: str, british: bool) -> str:
    """A lone 4-digit number from 1100 to 2099 is a year: "1999" → "nineteen ninety-nine"."""
    return _YEAR.sub(lambda m: _year(m, british), text)


def _year(match: re.Match[str], british: bool) -> str:
    if _COUNTED_BEFORE.search(match.string, max(0, match.start() - 12), match.start()):
        return match.group()  # "page 1999", "number 1999" count; the cardinal rule reads them
    return year(int(match["year"]), british=british)


def cardinals(text: str, british: bool) -> str:
    """Every digit left: "17" → "seventeen", "1,024" → "one thousand twenty-four", "-12" → "minus twelve"."""
    return _INTEGER.sub(lambda m: _cardinal(m, british), text)


def _cardinal(match: re.Match[str], british: bool) -> str:
    sign = "minus " if match["sign"] in ("-", "\u2212") else "plus " if match["sign"] == "+" else ""
    return spaced(match, sign + integer(match["n"], british=british))
