"""Measures: an amount and its unit, read with the unit's number agreeing with the amount.

The amount is a number ("2.5 kg"), a fraction or a mixed number ("1/2 tsp", "1\u00bd cups"), and the unit
one of :data:`_UNITS`: metric and imperial, kitchen, data sizes, rates and times. Also heights in feet
and inches ("5'10\"") and multipliers ("1.5x").
"""

from __future__ import annotations

import re
from typing import Final

from tts_node.normalization.numbers import (
    FRACTION,
    NUMBER,
    article,
    cardinal,
    fraction_parts,
    is_one,
    mixed,
    number,
    part,
)

_UNITS: Final = {
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour", "kilometers per hour"),
    "mph": ("mile per hour", "miles per hour"), "Mbps": ("megabit per second", "megabits per second"),
    "Gbps": ("gigabit per second", "gigabits per second"), "kbps": ("kilobit per second", "kilobits per second"),
    "Kbps": ("kilobit per second", "kilobits per second"),
    "MB/s": ("megabyte per second", "megabytes per second"), "GB/s": ("gigabyte per second", "gigabytes per second"),
    "km": ("kilometer", "kilometers"), "m": ("meter", "meters"), "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"), "kg": ("kilogram", "kilograms"), "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "mi": ("mile", "miles"), "ft": ("foot", "feet"), "in": ("inch", "inches"),
    "\u00b0C": ("degree Celsius", "degrees Celsius"), "\u00b0F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "\u00b0": ("degree", "degrees"), "L": ("liter", "liters"), "l": ("liter", "liters"),
    "ml": ("milliliter", "milliliters"), "mL": ("milliliter", "milliliters"),
    "cl": ("centiliter", "centiliters"), "dl": ("deciliter", "deciliters"),
    # Kitchen measures; "cup" and "pinch" are words already, listed so that the number agrees ("1\u00bd cups").
    "tsp": ("teaspoon", "teaspoons"), "tsps": ("teaspoon", "teaspoons"), "TSP": ("teaspoon", "teaspoons"),
    "tbsp": ("tablespoon", "tablespoons"), "tbsps": ("tablespoon", "tablespoons"),
    "Tbsp": ("tablespoon", "tablespoons"), "TBSP": ("tablespoon", "tablespoons"),
    "tbs": ("tablespoon", "tablespoons"), "Tbs": ("tablespoon", "tablespoons"),
    "cup": ("cup", "cups"), "cups": ("cup", "cups"), "pinch": ("pinch", "pinches"),
    "fl oz": ("fluid ounce", "fluid ounces"), "fl. oz": ("fluid ounce", "fluid ounces"),
    "fl.oz": ("fluid ounce", "fluid ounces"), "qt": ("quart", "quarts"), "gal": ("gallon", "gallons"),
    # Data sizes: decimal (kB, MB, ...) and binary (KiB, MiB, ...) bytes, and bits.
    "KB": ("kilobyte", "kilobytes"), "kB": ("kilobyte", "kilobytes"), "MB": ("megabyte", "megabytes"),
    "GB": ("gigabyte", "gigabytes"), "TB": ("terabyte", "terabytes"), "PB": ("petabyte", "petabytes"),
    "KiB": ("kibibyte", "kibibytes"), "MiB": ("mebibyte", "mebibytes"), "GiB": ("gibibyte", "gibibytes"),
    "TiB": ("tebibyte", "tebibytes"), "Mb": ("megabit", "megabits"), "Gb": ("gigabit", "gigabits"),
    "Hz": ("hertz", "hertz"), "kHz": ("kilohertz", "kilohertz"), "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"), "W": ("watt", "watts"), "kW": ("kilowatt", "kilowatts"),
    "V": ("volt", "volts"), "s": ("second", "seconds"), "sec": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"), "min": ("minute", "minutes"), "mins": ("minute", "minutes"),
    "h": ("hour", "hours"), "hr": ("hour", "hours"), "hrs": ("hour", "hours"),
}  # fmt: skip
_UNIT: Final = "|".join(re.escape(unit) for unit in sorted(_UNITS, key=len, reverse=True))
# Not after "/": "1/2 kg" is half a kilogram, never "1/" and two kilograms.
_AMOUNT: Final = rf"(?<![\w./])(?:(?P<fraction>{FRACTION})|(?P<amount>[-+\u2212]?{NUMBER}))"
# A unit's own period is dropped mid-sentence ("5 ft. tall"), kept where it may end the sentence.
_MEASURE: Final = re.compile(rf"{_AMOUNT}(?P<gap>\s?)(?P<unit>{_UNIT})(?![\w/])(?P<dot>\.(?=\s+[a-z]))?")
# "a 2 GB card": a measure between "a" and a noun describes the noun, and its unit stays singular.
_ARTICLE_BEFORE: Final = re.compile(r"(?<![\w'])(?:[Aa]|[Aa]n)\s\Z")
_NOUN_AFTER: Final = re.compile(r"\s[A-Za-z]")
# Inches under 12, and not after a degree sign: 40\u00b026'46" is an angle.
_FEET_INCHES: Final = re.compile(
    r"(?<![\w.'\u00b0])(?P<feet>[0-9]{1,2})(?:['\u2032]\s?(?P<inches>1[01]|0?[0-9])(?:\"|\u2033|'')"
    r"|\s?ft\.?\s(?P<spelled>1[01]|0?[0-9])\s?in\b\.?)"
)
_MULTIPLIER: Final = re.compile(rf"(?<![\w.])(?P<amount>{NUMBER})[x\u00d7](?!\w|\.?[0-9])")


def units(text: str, british: bool) -> str:
    """Measures: "2.5 kg" → "two point five kilograms", "1\u00bd cups" → "one and a half cups", "5'10\"".

    Singular for exactly 1 only: "1.0 kg" and "0.5 kg" are plural, as spoken. "5'10\"" and "5 ft 10 in"
    → "five feet ten inches"; "1.5x" → "one point five times".
    """
    text = _FEET_INCHES.sub(_feet_inches, text)
    text = _MULTIPLIER.sub(lambda m: f"{number(m['amount'], british=british)} times", text)
    return _MEASURE.sub(lambda m: _measure(m, british), text)


def _measure(match: re.Match[str], british: bool) -> str:
    if match["unit"] == "in" and match["gap"] and not match["dot"]:
        return match.group()  # "5 in the box": only "5in" and "5 in. wide" are inches
    one, many = _UNITS[match["unit"]]
    if match["fraction"]:
        return _fraction_of(match, one, many, british)
    amount = number(match["amount"], british=british)
    text, start = match.string, match.start()
    if _ARTICLE_BEFORE.search(text, max(0, start - 3), start) and _NOUN_AFTER.match(text, match.end()):
        return f"{amount} {one}"  # "a two gigabyte memory card"
    return f"{amount} {one if is_one(match['amount']) else many}"


def _fraction_of(match: re.Match[str], one: str, many: str, british: bool) -> str:
    """ "1/2 tsp" → "half a teaspoon", "3/4 cup" → "three quarters of a cup", "2 1/2 cups" → "two and a half cups"."""
    whole, numerator, denominator = fraction_parts(match)
    if not 0 < numerator < denominator <= 100:
        said = f"{cardinal(numerator)} over {cardinal(denominator)} {many}"
        return f"{cardinal(whole, british=british)} and {said}" if whole is not None else said
    if whole is not None:
        return f"{mixed(whole, numerator, denominator, british=british)} {many}"
    if (numerator, denominator) == (1, 2):
        return f"half {article(one)} {one}"
    return f"{part(numerator, denominator)} of {article(one)} {one}"


def _feet_inches(match: re.Match[str]) -> str:
    feet, inches = int(match["feet"]), int(match["inches"] or match["spelled"])
    said = f"{cardinal(feet)} {'foot' if feet == 1 else 'feet'}"
    return said + (f" {cardinal(inches)} {'inch' if inches == 1 else 'inches'}" if inches else "")
