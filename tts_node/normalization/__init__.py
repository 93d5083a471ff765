"""English text normalization: written text → the words a reader would say, before G2P.

espeak (through misaki) reads "$1,234.56" or "9:30 a.m." symbol by symbol, or
not at all; these rules spell such text out first. They apply to a segment's
text, in this order, each to what the ones before it left:

1. emails_and_urls: email addresses, ``http(s)://`` and ``www.`` URLs, and bare
   domains with a known top-level domain. The scheme is dropped, symbols named,
   digits read one by one. "https://example.com/docs" → "example dot com slash
   docs", "jane.doe@example.org" → "jane dot doe at example dot org". First:
   their dots, slashes, dashes and digits would feed every later rule.
2. phone_numbers: "+1 555 123 4567", "(555) 123-4567", "555-123-4567" and
   "555-0199" (exchange 2-9), digit by digit with a comma between groups.
   "555-0199" → "five five five, zero one nine nine". Before ranges: "555-0199"
   is no range.
3. dates: ISO "2027-03-04", numeric month-first "03/04/2027" (also for British
   English: a day-first reading is used only when the first number is over 12),
   "Jan. 5th, 2027", "5 January 2027", "January 2027". "03/04/2027" → "March
   fourth, twenty twenty-seven"; "5 January 2027" → "the fifth of January,
   twenty twenty-seven". Before ranges (ISO dashes) and abbreviations ("Jan.").
   A bare "3/4" is a fraction (rule 16).
4. ranges: a hyphen or en dash between numbers says "to": "10-20" → "10 to 20",
   "pages 5\u20137" → "pages 5 to 7", a score "won 21-18" → "won 21 to 18"; after
   "between", "and": "between 9-11" → "between 9 and 11". The left
   number starts a word: "A3-2B" is a name. Before durations, times, money,
   percentages and units, so that "9:30-10:30", "$10-20" and "10-20%" read both ends.
5. durations: race and elapsed times. "2:01:09" → "two hours, one minute and
   nine seconds", "1:59.4" → "one minute and fifty-nine point four seconds".
   Tenths of a second make a duration; "H:MM:SS" is one after "in", "of", "a",
   "record", "clocked", ..., or with a one-digit hour and no "at", "until",
   "from", ... before it nor am/pm after it ("14:05:30", "at 2:01:09" are times of
   day). "H:MM" is left to times: "3:43" is said the same either way, and "16:9"
   or "4:3" are neither (a ratio keeps its colon). Before times.
6. times: "H:MM[:SS]" (24-hour too) and an hour with am/pm. "9:30 a.m." → "nine
   thirty a m", "4:07 PM" → "four oh seven p m", "6 AM" → "six a m", "9:00 pm" →
   "nine p m", "12:00" → "twelve o'clock", "14:05" → "fourteen oh five", "14:00" →
   "fourteen hundred". Before abbreviations and initialisms, which would take "a.m.".
7. abbreviations: titles ("Dr. Smith" → "Doctor Smith", "Mr.", "Mrs.", "Ms.",
   "Prof.", "Mt."), "Jr.", "Sr.", "vs.", "etc.", "e.g.", "i.e.", "approx.", "Inc.",
   "Ave.", month and weekday abbreviations ("Feb." → "February"; "Jan." only in a
   date, it is also a name), "No. 5" / "#5" → "number 5", and before a number
   "Apt", "Bldg", "Rm", "Ste" ("Apt 4B" → "Apartment 4B"). "St." and "Dr." are
   a place after a capitalized word other than the sentence's first, or after a
   number ("Baker St." → "Baker Street", "Mulholland Dr." → "Mulholland Drive"),
   otherwise a person before a capitalized word ("St. Louis" → "Saint Louis").
   British undotted contractions ("Dr Smith", "St Paul") count before a name.
8. initialisms: dotted letters are said one by one: "U.N." → "U N". Undotted
   acronyms ("NASA", "FBI") are left to G2P.
9. money: "$", "\u20ac", "\u00a3", "\u00a5" before, or USD, EUR, GBP, JPY before
   or after, an amount, with an optional scale ("million", "k", "bn").
   "$1,234.56" → "one thousand two hundred thirty-four dollars and fifty-six
   cents", "$1" → "one dollar", "\u00a32.50" → "two pounds fifty", "$3 million" →
   "three million dollars", "$20/month" → "twenty dollars per month".
10. percentages: "45%" → "forty-five percent", "2.5%" → "two point five percent".
11. decades: "1990s" → "nineteen nineties", "the '80s" → "the eighties". Before
    units, where "90s" would be seconds: a bare two-digit "30s" stays "thirty
    seconds"; a short decade needs an apostrophe or "the", "his", "mid-", ....
12. units (``measures.py``): after a number, a fraction or a mixed number; the
    unit singular for exactly 1 (km, m, cm, mm, kg, g, mg, lb, oz, mi, ft, in,
    mph, km/h, \u00b0C, \u00b0F, \u00b0, L, l, ml; kitchen tsp, tbsp, cup, fl oz, qt,
    gal, pinch; data KB-PB, KiB-TiB, Mb, Gb, Mbps, MB/s; Hz-GHz, W, kW, V, s, ms,
    min, h, ...). "1 kg" → "one kilogram", "-12\u00b0C" → "minus twelve degrees
    Celsius", "3 tbsp" → "three tablespoons", "1/2 tsp" → "half a teaspoon",
    "3/4 cup" → "three quarters of a cup", "1\u00bd cups" and "1 1/2 cups" → "one
    and a half cups", "2 GB" → "two gigabytes"; between "a" and a noun the unit
    stays singular: "a 2 GB card" → "a two gigabyte card". Heights "5'10\"" and
    "5 ft 10 in" → "five feet ten inches"; multipliers "1.5x" → "one point five
    times". "in" is inches only glued ("12in") or as "in." mid-sentence:
    "5 in the box" is a preposition. Spelling is American for both Englishes
    ("meter"); it is said the same.
13. ordinals: "5th" → "fifth", "21st" → "twenty-first", "2nd", "3rd".
14. dotted_numbers: three or more parts, or after "v"/"version": a version,
    each part a cardinal. "2.4.1" → "two point four point one", "v3.11" →
    "version three point eleven". Four parts up to 255: an IP address,
    "192.168.0.1" → "one ninety-two dot one sixty-eight dot zero dot one".
    Before decimals, which would read "2.4" of "2.4.1".
15. decimals: "2.5" → "two point five", "0.75" → "zero point seven five".
16. fractions: "3/4" and "\u00be" → "three quarters", "1/2" → "one half", mixed
    numbers "2 1/2" and "2\u00bd" → "two and a half"; anything but a proper
    fraction up to tenths is said as two numbers: "24/7" → "twenty-four seven",
    "9/11" → "nine eleven".
17. dimensions: "1920x1080" → "nineteen twenty by ten eighty".
18. named_numbers: three or four digits after a word that names a room,
    flight, gate, route or model, or after an all-capital name, name rather than
    count: "Room 104" → "Room one oh four", "Flight 417" → "Flight four
    seventeen", "RTX 4090" → "RTX forty ninety". Before years and cardinals.
19. alphanumerics: letters and digits in one word; the digits name ("house
    number" style): "221B" → "two twenty-one B", "A380" → "A three eighty",
    "MP3" → "MP three". Before years and cardinals, which would count them.
20. years: a lone 4-digit number from 1100 to 2099, with no thousands
    separator, not after "page" or "number" (units and currencies have been read
    by now): "1999" → "nineteen ninety-nine", "1900" → "nineteen hundred",
    "2000" → "two thousand", "2007" → "two thousand seven", "2027" → "twenty
    twenty-seven". "2024 people" reads as a year too: the price of the heuristic.
21. cardinals: every digit left, signed at a word start: "17" → "seventeen",
    "1,024" → "one thousand twenty-four", "-12" → "minus twelve", "3,000,000" →
    "three million"; names up to decillions (10^33), digit by digit beyond,
    and for a leading zero ("007" → "zero zero seven").
22. roman_numerals: after a counting word (Chapter, Part, Book, Volume, Act,
    Scene, Section, War, ...): "Chapter IV" → "Chapter four", "World War II" →
    "World War two"; after a regnal name: "Henry VIII" → "Henry the eighth";
    after any capitalized word for I/V/X numerals of two letters or more ("Rocky
    II" → "Rocky two"); and a heading's "IV. " at a line start. Canonical numerals
    up to 399 only ("MIX", "DIV", "CIVIL" are words). A lone "I" is the pronoun
    unless no word follows it ("Part I:") or it ends "World War"; a lone "L" or "C"
    is a letter ("Part C"). After abbreviations ("Vol. IV") and after every rule
    that writes a capitalized word ("Celsius", "Doctor"), so that a second pass
    finds no new "Celsius II".
23. symbols: what is left of "&", "%", "@", "\u00b0", and a free-standing "+" or
    "=": "R&D" → "R and D", "2 + 2" → "two plus two".

An abbreviation's period stays where it may also end the sentence (at the end,
or before a capital, as the segmenter decides), so "at 6 a.m." still ends with
"a m.". British English ("b", "en-gb") differs only in "and" after hundreds and
before a last group under a hundred: "1,024" → "one thousand and twenty-four",
"2007" → "two thousand and seven". Output is ASCII words, spaces, hyphens, the
apostrophe of "o'clock", and the input's own punctuation; running the rules on
their own output changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

from tts_node.normalization import addresses, dates, durations, measures, quantities, words

RULES_VERSION: Final[str] = "en-2"
"""Part of request fingerprints: bump it whenever any rule changes any output."""
NORMALIZED_LANGUAGES: Final[frozenset[str]] = frozenset({"a", "b", "en", "en-us", "en-gb"})
_BRITISH: Final = frozenset({"b", "en-gb"})


class Rule(NamedTuple):
    name: str
    apply: Callable[[str, bool], str]  # (text, british) → text


RULES: Final[tuple[Rule, ...]] = (
    Rule("emails_and_urls", addresses.emails_and_urls),
    Rule("phone_numbers", addresses.phone_numbers),
    Rule("dates", dates.dates),
    Rule("ranges", quantities.ranges),
    Rule("durations", durations.durations),
    Rule("times", dates.times),
    Rule("abbreviations", words.abbreviations),
    Rule("initialisms", words.initialisms),
    Rule("money", quantities.money),
    Rule("percentages", quantities.percentages),
    Rule("decades", quantities.decades),
    Rule("units", measures.units),
    Rule("ordinals", quantities.ordinals),
    Rule("dotted_numbers", quantities.dotted_numbers),
    Rule("decimals", quantities.decimals),
    Rule("fractions", quantities.fractions),
    Rule("dimensions", quantities.dimensions),
    Rule("named_numbers", quantities.named_numbers),
    Rule("alphanumerics", quantities.alphanumerics),
    Rule("years", quantities.years),
    Rule("cardinals", quantities.cardinals),
    Rule("roman_numerals", words.roman_numerals),
    Rule("symbols", words.symbols),
)


def normalize(text: str, lang: str) -> str:
    """``text`` as it is said in ``lang``; unchanged for a language not in ``NORMALIZED_LANGUAGES``."""
    key = lang.strip().lower()
    if key not in NORMALIZED_LANGUAGES:
        return text
    british = key in _BRITISH
    for rule in RULES:
        text = rule.apply(text, british)
    return text


__all__ = ["NORMALIZED_LANGUAGES", "RULES", "RULES_VERSION", "Rule", "normalize"]
