"""Written text and how the rules say it: docs/engines.md's normalization tables, kept here once.

``tests/unit/test_normalization_examples.py`` runs every row through :func:`normalize` (one test per row).
``voxlog docs`` writes :func:`markdown_table` of each tuple into docs/engines.md ("Text normalization"),
as ``python -m tts_node.normalization.examples`` prints them, and ``voxlog docs --check`` fails while the
page shows anything else.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Example(NamedTuple):
    kind: str
    written: str
    spoken: str


SENTENCES: Final = (
    Example(
        "money, date",
        "The invoice total is $1,234.56, due on 03/04/2027.",
        "The invoice total is one thousand two hundred thirty-four dollars and fifty-six cents,"
        " due on March fourth, twenty twenty-seven.",
    ),
    Example(
        "title, address",
        "Dr. Smith lives at 221B Baker St., London.",
        "Doctor Smith lives at two twenty-one B Baker Street, London.",
    ),
    Example(
        "phone, time, date",
        "Call 555-0199 before 9:30 a.m. on Jan. 5th.",
        "Call five five five, zero one nine nine before nine thirty a m on January fifth.",
    ),
    Example(
        "measure, time",
        "It weighs 2.5 kg and ships at 4:07 PM.",
        "It weighs two point five kilograms and ships at four oh seven p m.",
    ),
    Example(
        "temperature, time",
        "The temperature dropped to -12\u00b0C at 6 AM.",
        "The temperature dropped to minus twelve degrees Celsius at six a m.",
    ),
    Example(
        "Roman numerals",
        "Chapter IV: Henry VIII and World War II.",
        "Chapter four: Henry the eighth and World War two.",
    ),
    Example(
        "kitchen",
        "Add 1/2 tsp of salt, 3 tbsp of sugar and 1\u00bd cups of flour.",
        "Add half a teaspoon of salt, three tablespoons of sugar and one and a half cups of flour.",
    ),
    Example(
        "race time",
        "The marathon record is 2:01:09 as of 2022.",
        "The marathon record is two hours, one minute and nine seconds as of twenty twenty-two.",
    ),
    Example(
        "data size",
        "Mr. Jones paid \u00a345 for a 2 GB memory card.",
        "Mister Jones paid forty-five pounds for a two gigabyte memory card.",
    ),
)
"""Whole sentences, several rules in each."""

CASES: Final = (
    Example("address", "221B Baker St.", "two twenty-one B Baker Street."),
    Example("address", "Apt 4, No. 10 Downing St.", "Apartment four, number ten Downing Street."),
    Example("address", "Room 104, Bldg 7", "Room one oh four, Building seven"),
    Example("model number", "RTX 4090", "RTX forty ninety"),
    Example("model number", "iPhone 15 Pro", "iPhone fifteen Pro"),
    Example("model number", "Boeing 747", "Boeing seven forty-seven"),
    Example("model number", "Flight 417", "Flight four seventeen"),
    Example("version", "v2.10.3", "version two point ten point three"),
    Example("version", "Python 3.11", "Python three point eleven"),
    Example("score", "won 21-18", "won twenty-one to eighteen"),
    Example("score", "a 3-2 win", "a three to two win"),
    Example("fraction", "3/4 of voters", "three quarters of voters"),
    Example("fraction", "2 1/2 years", "two and a half years"),
    Example("fraction", "24/7", "twenty-four seven"),
    Example("kitchen", "1/2 tsp of salt", "half a teaspoon of salt"),
    Example("kitchen", "3/4 cup of milk", "three quarters of a cup of milk"),
    Example("kitchen", "1\u00bd cups", "one and a half cups"),
    Example("kitchen", "2 tbsp", "two tablespoons"),
    Example("kitchen", "8 fl oz", "eight fluid ounces"),
    Example("kitchen", "1 lb 4 oz", "one pound four ounces"),
    Example("temperature", "72\u00b0F", "seventy-two degrees Fahrenheit"),
    Example("temperature", "-5 \u00b0C", "minus five degrees Celsius"),
    Example("data size", "2 GB", "two gigabytes"),
    Example("data size", "16 GiB of RAM", "sixteen gibibytes of RAM"),
    Example("data rate", "100 Mbps", "one hundred megabits per second"),
    Example("duration", "finished in 2:01:09", "finished in two hours, one minute and nine seconds"),
    Example("race time", "ran 3:43.13", "ran three minutes and forty-three point one three seconds"),
    Example("time of day", "at 10:30", "at ten thirty"),
    Example("time of day", "at 7:45 p.m. sharp", "at seven forty-five p m sharp"),
    Example("time of day", "14:05:30", "fourteen oh five and thirty seconds"),
    Example("ordinal", "the 101st Airborne", "the one hundred first Airborne"),
    Example("percentage", "3.75%", "three point seven five percent"),
    Example("range", "10-20 people", "ten to twenty people"),
    Example("range", "between 9-11 a.m. tomorrow", "between nine and eleven a m tomorrow"),
    Example("phone", "(555) 123-4567", "five five five, one two three, four five six seven"),
    Example("money", "$1.2M", "one point two million dollars"),
    Example("money", "$4.99", "four dollars and ninety-nine cents"),
    Example("year", "in 1984", "in nineteen eighty-four"),
    Example("number", "1,984 votes", "one thousand nine hundred eighty-four votes"),
    Example("speed", "100 km/h", "one hundred kilometers per hour"),
    Example("speed", "65 mph", "sixty-five miles per hour"),
    Example("height", "5'10\"", "five feet ten inches"),
    Example("multiplier", "1.5x faster", "one point five times faster"),
)
"""Real-world cases, one rule or two each, in the page's order."""


def markdown_table(rows: tuple[Example, ...], indent: str = "") -> str:
    """``rows`` as docs/engines.md shows them: what it is, the text as written, and as said."""
    lines = ["| | written | spoken |", "|---|---|---|"]
    lines += [f"| {row.kind} | `{row.written}` | {row.spoken} |" for row in rows]
    return "\n".join(indent + line for line in lines)


if __name__ == "__main__":
    print(markdown_table(SENTENCES), markdown_table(CASES), sep="\n\n")
