"""Rules for letters and symbols: abbreviations, dotted initialisms, Roman numerals, stray symbols."""

from __future__ import annotations

import re
from typing import Final

from tts_node.normalization.numbers import cardinal, ordinal
from tts_node.normalization.punctuation import period_after, spaced

# Words that introduce what follows: their period never ends a sentence before it.
_INTRODUCING: Final = {
    "Mr": "Mister", "Mrs": "Missus", "Ms": "Miz", "Prof": "Professor", "Rev": "Reverend",
    "Capt": "Captain", "Lt": "Lieutenant", "Sgt": "Sergeant", "Gov": "Governor", "Sen": "Senator",
    "Mt": "Mount", "vs": "versus", "approx": "approximately", "Vol": "Volume", "Ch": "Chapter", "Fig": "Figure",
    "e.g": "for example", "i.e": "that is", "cf": "compare", "a.k.a": "also known as",
}  # fmt: skip
# Words that close a phrase: their period may end the sentence too.
_CLOSING: Final = {
    "Jr": "Junior", "Sr": "Senior", "etc": "et cetera", "Inc": "Incorporated", "Ltd": "Limited",
    "Corp": "Corporation", "Ave": "Avenue", "Blvd": "Boulevard", "Rd": "Road", "et al": "and others",
    "Feb": "February", "Mar": "March", "Apr": "April", "Jun": "June", "Jul": "July", "Aug": "August",
    "Sep": "September", "Sept": "September", "Oct": "October", "Nov": "November", "Dec": "December",
    "Mon": "Monday", "Tue": "Tuesday", "Tues": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday",
    "Thur": "Thursday", "Thurs": "Thursday", "Fri": "Friday", "Sat": "Saturday", "Sun": "Sunday",
}  # fmt: skip
_WEEKDAYS: Final = frozenset({"Mon", "Tue", "Tues", "Wed", "Thu", "Thur", "Thurs", "Fri", "Sat", "Sun"})
# Parts of an address, before their number only: "Apt 4B" → "Apartment 4B".
_NUMBERED_PLACES: Final = {"Apt": "Apartment", "Bldg": "Building", "Rm": "Room", "Ste": "Suite"}
_PLACE_OR_PERSON: Final = {"Dr": ("Doctor", "Drive"), "St": ("Saint", "Street")}
_DOTTED_WORDS: Final = sorted([*_INTRODUCING, *_CLOSING, *_PLACE_OR_PERSON], key=len, reverse=True)
ABBREVIATIONS: Final = frozenset(_DOTTED_WORDS)
"""What the abbreviation rule writes out when a period follows (some also undotted before a name)."""
_ABBREVIATION: Final = re.compile(
    rf"(?<![\w.])(?P<word>{'|'.join(re.escape(word) for word in _DOTTED_WORDS)})\."
    # British style drops the period after a contraction (Dr, Mr, St): undotted before a name.
    r"|(?<![\w.])(?P<bare>Dr|Mr|Mrs|Ms|St|Mt)(?=\s+[A-Z])"
    r"|\b(?P<versus>vs)\b"
    r"|(?<![\w.])(?P<number>[Nn]o\.|#)(?=\s?[0-9])"
    rf"|(?<![\w.])(?P<place>{'|'.join(_NUMBERED_PLACES)})\.?(?=\s?[0-9])"
)
_NAME_AFTER: Final = re.compile(r"\s+[A-Z]")
_NAME_WORD: Final = re.compile(r"[A-Z][a-z]+|[0-9][0-9A-Za-z]*")
_INITIALISM: Final = re.compile(r"(?<![\w.])(?:[A-Za-z]\.){2,}")

_ROMAN: Final = re.compile(r"(?=[IVXLC])C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})")
_ROMAN_VALUES: Final = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
_COUNTING_WORDS: Final = frozenset({
    "Chapter", "Part", "Book", "Volume", "Act", "Scene", "Section", "Article", "Episode", "Phase",
    "Stage", "Level", "Round", "Type", "Class", "Appendix", "Psalm", "Bowl", "War", "Mark", "Canto",
})  # fmt: skip
_REGNAL_NAMES: Final = frozenset({
    "Alexander", "Alfonso", "Anne", "Benedict", "Catherine", "Charles", "Christian", "Clement", "Constantine",
    "Edward", "Elizabeth", "Ferdinand", "Francis", "Frederick", "George", "Gregory", "Gustav", "Harald",
    "Henri", "Henry", "Innocent", "Ivan", "James", "John", "Leo", "Louis", "Ludwig", "Mary", "Napoleon",
    "Nicholas", "Otto", "Paul", "Peter", "Philip", "Pius", "Ptolemy", "Ramesses", "Richard", "Rudolf",
    "Urban", "Wilhelm", "William",
})  # fmt: skip
_NUMBERED: Final = re.compile(r"\b(?P<word>[A-Z][a-z]+)(?P<gap>\s+)(?P<numeral>[IVXLC]+)\b")
_HEADING: Final = re.compile(r"^(?P<numeral>[IVX]{2,})(?=[.:]\s)", re.MULTILINE)
_WORD_AFTER: Final = re.compile(r"\s+[A-Za-z]")
# The lookbehind starts a match only at the start of a run of blanks: one try per run, not per blank.
_SYMBOLS: Final = re.compile("(?:(?<![ \\t])[ \\t]+)?(?P<symbol>[&%@\u00b0])[ \\t]*|(?<=\\s)(?P<spaced>[+=])(?=\\s)")
_SYMBOL_WORDS: Final = {"&": "and", "%": "percent", "@": "at", "\u00b0": "degrees", "+": "plus", "=": "equals"}


def abbreviations(text: str, british: bool) -> str:
    """Titles, Latin, street words, months and weekdays, "No. 5": "Dr. Smith" → "Doctor Smith"."""
    return _ABBREVIATION.sub(_abbreviation, text)


def _abbreviation(match: re.Match[str]) -> str:
    if match["number"]:
        return spaced(match, "number")
    if match["place"]:
        return spaced(match, _NUMBERED_PLACES[match["place"]])
    if match["versus"]:
        return "versus"
    word = match["word"] or match["bare"]
    if word in _PLACE_OR_PERSON:
        return _place_or_person(match, word)
    if word in _INTRODUCING:
        return _INTRODUCING[word] + (period_after(match.string, match.end(), introduces=True) if match["word"] else "")
    if word in _WEEKDAYS and match.string[max(0, match.start() - 4) : match.start()] in ("the ", "The "):
        return match.group()  # "the Sun." is a star
    return _CLOSING[word] + period_after(match.string, match.end())


def _place_or_person(match: re.Match[str], word: str) -> str:
    """Saint/Doctor before a name, Street/Drive after one.

    After a capitalized word that is not the sentence's first ("Baker St.") or
    a number ("5th St.") it is a place, whatever follows; otherwise a capital
    after it is a name ("St. Louis", "Visit St. Paul"). "Mount St. Helens" is a saint.
    """
    text = match.string
    person, place = _PLACE_OR_PERSON[word]
    before = _two_words_before(text, match.start())
    after_name = bool(
        before
        and _NAME_WORD.fullmatch(before[1])
        and before[1] not in ("Mount", "Mt")
        and (before[0] is not None and before[0][-1] not in ".!?:")
    )
    if not after_name and _NAME_AFTER.match(text, match.end()):
        return person
    if not after_name and word == "Dr":
        return person + (period_after(text, match.end(), introduces=True) if match["word"] else "")
    return place + (period_after(text, match.end()) if match["word"] else "")


def _two_words_before(text: str, end: int) -> tuple[str | None, str] | None:
    """The two words before the blank(s) that end at ``end``, as far as 60 characters back (the earlier one
    ``None`` when there is one only); ``None`` when no blank ends there. Words split, not searched for: a
    pattern for them went quadratic on runs of dots."""
    window = text[max(0, end - 60) : end]
    words = window.split()
    if not words or not window[-1:].isspace():
        return None
    return (words[-2] if len(words) > 1 else None), words[-1]


def initialisms(text: str, british: bool) -> str:
    """Dotted letters said one by one: "U.N." → "U N"; undotted acronyms ("NASA") are G2P's."""
    return _INITIALISM.sub(lambda m: " ".join(m.group().rstrip(".").split(".")) + period_after(m.string, m.end()), text)


def roman_numerals(text: str, british: bool) -> str:
    """Numerals in context: "Chapter IV" → "Chapter four", "Henry VIII" → "Henry the eighth"."""
    return _NUMBERED.sub(_numbered, _HEADING.sub(_heading, text))


def _roman_value(numeral: str) -> int | None:
    """The value of a canonical numeral up to 399 ("XIV" → 14); None for "IIII", "MIX", "CIVIL"."""
    if not _ROMAN.fullmatch(numeral):
        return None
    values = [_ROMAN_VALUES[letter] for letter in numeral]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def _heading(match: re.Match[str]) -> str:
    value = _roman_value(match["numeral"])
    return cardinal(value) if value else match.group()


def _numbered(match: re.Match[str]) -> str:
    word, numeral = match["word"], match["numeral"]
    value = _roman_value(numeral)
    if value is None:
        return match.group()
    if word in _REGNAL_NAMES or word in _COUNTING_WORDS:
        if numeral in ("L", "C"):
            return match.group()  # "Part C", "Appendix L" are letters
        # A lone "I" is the pronoun ("In Chapter I argue") unless no word follows it, or it ends "World War".
        world_war = word == "War" and match.string[max(0, match.start() - 6) : match.start()] == "World "
        if numeral == "I" and not world_war and _WORD_AFTER.match(match.string, match.end()):
            return match.group()
        said = f"the {ordinal(value)}" if word in _REGNAL_NAMES else cardinal(value)
        return f"{word}{match['gap']}{said}"
    if len(numeral) >= 2 and set(numeral) <= set("IVX"):
        return f"{word}{match['gap']}{cardinal(value)}"  # "Rocky II", "Final Fantasy VII"
    return match.group()


def symbols(text: str, british: bool) -> str:
    """What is left of "&", "%", "@", "°", and a free-standing "+" or "=": "R&D" → "R and D"."""
    return _SYMBOLS.sub(lambda m: spaced(m, _SYMBOL_WORDS[m["symbol"] or m["spaced"]]), text)
