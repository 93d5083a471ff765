"""The SSML subset voxlog speaks: parsed, checked and written canonically, by the API and the worker alike.

Where SSML is carried: a request with ``input_format="ssml"`` keeps its SSML in ``SynthesisRequest.text``,
in the canonical form :func:`parse` writes, and the worker parses that text again, with this module. So the
log stays auditable (a ``JobQueued`` holds the markup the client sent, not an expansion the API made), every
spelling of one document (whitespace, attribute order, ``0.5s`` or ``500ms``, comments, the ``<speak>``
attributes) is one canonical text and so one fingerprint, and the API refuses what the worker could not speak.
This module uses the standard library only, as all of ``contracts`` does: the API (``producers``) and the
engines (``tts_node``), which never import each other, share it from here. What it cannot do is read a
``say-as`` aloud: it checks the content (a cardinal is an integer or a decimal, a date a real date in its
format), and the engines' normalizer, whose number and date readers those are, reads it
(:mod:`tts_node.ssml`).

The subset, and what each element becomes (:class:`Ssml.pieces`):

* ``<speak>``: the root, once (``version``, ``xmlns`` and ``xml:lang`` accepted and dropped: the request's
  ``lang`` rules).
* text: :class:`Text`, normalized and phonemized as a plain request's text is.
* ``<break time="500ms|2s">`` or ``strength`` (:data:`BREAK_STRENGTH_MS`; no attribute: ``medium``):
  :class:`Pause` of that many milliseconds, at most :data:`MAX_BREAK_MS`.
* ``<p>``, ``<s>``: a :class:`Pause` of :data:`contracts.pauses.PAUSE_MS` (``p`` 700, ``s`` 250 ms) where one
  starts or ends between speech; pauses that meet add their breaks and keep the longest boundary.
* ``<say-as interpret-as="characters|cardinal|ordinal|date|telephone">`` (``format="ymd|mdy|dmy"`` for a
  date, ``ymd`` by default): :class:`SayAs`.
* ``<sub alias="...">``: :class:`Text` of the alias (what it wraps is not said).
* ``<phoneme ph="..." [alphabet="ipa"]>``: :class:`Phonemes`, said as written in ``ph`` (Kokoro's IPA:
  :data:`PHONEMES`), bypassing G2P.
* ``<prosody rate="x-slow|slow|medium|fast|x-fast|N%">``: the pieces inside are said at that rate
  (:data:`RATES`), nested rates multiplied; the request's speed times the rate must stay in
  :data:`MODEL_SPEED_RANGE` (checked where the speed is known: :func:`check_speed`).

Anything else (another element, an attribute the element does not take, a value out of range, malformed
XML, a DTD or an entity) raises :class:`SsmlError`, whose message names the element or attribute and what is
allowed, or the parser's line and column. Nesting is bounded (:data:`MAX_DEPTH`); the size is bounded by the
caller (the API's text limit).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, NoReturn, cast
from xml.parsers import expat

from contracts.errors import InvalidRequest
from contracts.fingerprint import fold_text
from contracts.pauses import PAUSE_MS
from contracts.safe_xml import safe_parser

InputFormat = Literal["text", "ssml"]
InterpretAs = Literal["characters", "cardinal", "ordinal", "date", "telephone"]
DateFormat = Literal["ymd", "mdy", "dmy"]

MAX_DEPTH: Final = 16
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
_ATTRIBUTES: Final[Mapping[str, frozenset[str]]] = {
    "speak": frozenset({"version", "xmlns", "xml:lang"}),
    "p": frozenset(),
    "s": frozenset(),
    "break": frozenset({"time", "strength"}),
    "say-as": frozenset({"interpret-as", "format"}),
    "sub": frozenset({"alias"}),
    "phoneme": frozenset({"ph", "alphabet"}),
    "prosody": frozenset({"rate"}),
}
_TEXT_ONLY: Final = frozenset({"say-as", "sub", "phoneme"})
_SPEAK_START: Final = re.compile(r"\s*<speak[\s/>]")
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


@dataclass(frozen=True)
class Text:
    text: str
    rate: float = 1.0


@dataclass(frozen=True)
class SayAs:
    text: str
    interpret_as: InterpretAs
    date_format: DateFormat = "ymd"
    rate: float = 1.0


@dataclass(frozen=True)
class Phonemes:
    ph: str
    text: str  # what the element wraps: its caption
    rate: float = 1.0


@dataclass(frozen=True)
class Pause:
    ms: int


Piece = Text | SayAs | Phonemes | Pause


@dataclass(frozen=True)
class Ssml:
    pieces: tuple[Piece, ...]
    canonical: str

    def rates(self) -> frozenset[float]:
        return frozenset(p.rate for p in self.pieces if not isinstance(p, Pause))

    def speaks(self, has_words: Callable[[str], bool]) -> bool:
        """Whether anything is said (``has_words`` of :mod:`contracts.request_text` for text)."""
        return any(isinstance(p, SayAs | Phonemes) or (isinstance(p, Text) and has_words(p.text)) for p in self.pieces)


def looks_like_ssml(text: str) -> bool:
    """Whether a request that did not say its format is SSML: it starts (after whitespace) with ``<speak``."""
    return _SPEAK_START.match(text) is not None


def check_speed(ssml: Ssml, speed: float) -> None:
    """Refuse a prosody rate that takes ``speed`` outside the model's range (:data:`MODEL_SPEED_RANGE`)."""
    low, high = MODEL_SPEED_RANGE
    for rate in sorted(ssml.rates()):
        if not low <= round(speed * rate, 4) <= high:
            raise SsmlError(
                f"<prosody rate> of {_percent(rate)} at speed {speed:g} is a speed of {speed * rate:g}, outside the"
                f" model's {low:g} to {high:g}: use a rate between {_percent(low / speed)} and {_percent(high / speed)}"
            )


def parse(source: str) -> Ssml:
    """``source``'s pieces and canonical text, or :class:`SsmlError`."""
    reader = _Reader()
    parser = safe_parser(_refuse)
    parser.buffer_text = True
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.data
    try:
        parser.Parse(source, True)
    except expat.ExpatError as e:
        raise SsmlError(f"the SSML is not well-formed XML: {e}") from None
    return Ssml(tuple(_resolve(reader.pieces)), "".join(reader.out))


def _refuse(what: str) -> NoReturn:
    raise SsmlError(f"the SSML {what}")


@dataclass(frozen=True)
class _Boundary:
    ms: int


@dataclass
class _Frame:
    name: str
    rate: float
    attrs: dict[str, str] = field(default_factory=dict)
    content: str = ""


class _Reader:
    """Expat's handlers: the pieces in order, and the canonical text written as it goes."""

    def __init__(self) -> None:
        self.pieces: list[Piece | _Boundary] = []
        self.out: list[str] = []
        self._stack: list[_Frame] = []
        self._pending = ""  # text read since the last tag (a comment does not end it)
        self._after_block = True  # whitespace beside <speak>, <p>, <s>, <break> and their ends says nothing

    def start(self, name: str, attrs: dict[str, str]) -> None:
        parent = self._stack[-1] if self._stack else None
        self._check_place(name, attrs, parent)
        frame = _Frame(name, (parent.rate if parent else 1.0) * (_rate(attrs) if name == "prosody" else 1.0))
        frame.attrs = _checked(name, attrs)
        if name in {"p", "s"}:
            self._write(f"<{name}>", block=True)
            self.pieces.append(_Boundary(PAUSE_MS[name]))
        elif name == "break":
            self._write(f'<break time="{frame.attrs["time"]}ms"/>', block=True)
            self.pieces.append(Pause(int(frame.attrs["time"])))
        elif name == "speak":
            self._write("<speak>", block=True)
        elif name == "prosody":
            self._write(f'<prosody rate="{frame.attrs["rate"]}">', block=False)
        else:
            self._flush(block=False)
        self._stack.append(frame)

    def _check_place(self, name: str, attrs: dict[str, str], parent: _Frame | None) -> None:
        if name not in _ATTRIBUTES:
            allowed = ", ".join(f"<{n}>" for n in _ATTRIBUTES)
            raise SsmlError(f"<{name}> is not supported in SSML here; the elements are: {allowed}")
        if (parent is None) != (name == "speak"):
            raise SsmlError("the SSML must be one <speak> element, with the others inside it")
        if parent is not None and parent.name in _TEXT_ONLY | {"break"}:
            raise SsmlError(f"<{parent.name}> may hold only text, not <{name}>")
        if name == "p" and any(f.name in {"p", "s"} for f in self._stack):
            raise SsmlError("<p> cannot be inside another <p> or an <s>")
        if len(self._stack) >= MAX_DEPTH:
            raise SsmlError(f"the SSML nests more than {MAX_DEPTH} elements deep")
        for attribute in attrs:
            if attribute not in _ATTRIBUTES[name]:
                takes = ", ".join(sorted(_ATTRIBUTES[name])) or "none"
                raise SsmlError(f"<{name}> has no attribute {attribute!r}; it takes: {takes}")

    def end(self, name: str) -> None:
        frame = self._stack[-1]
        if name in {"p", "s"}:
            self._write(f"</{name}>", block=True)
            self.pieces.append(_Boundary(PAUSE_MS[name]))
        elif name == "speak":
            self._write("</speak>", block=True)
        elif name == "prosody":
            self._write("</prosody>", block=False)
        elif name in _TEXT_ONLY:
            self._text_only(frame)
        self._stack.pop()

    def data(self, text: str) -> None:
        frame = self._stack[-1]
        if frame.name in _TEXT_ONLY:
            frame.content += text
        elif frame.name == "break" and text.strip():
            raise SsmlError("<break> may hold nothing: write it <break/>")
        else:
            self._pending += text

    def _text_only(self, frame: _Frame) -> None:
        content = fold_text(frame.content).strip()
        if frame.name == "say-as":
            interpret_as, date_format = frame.attrs["interpret-as"], frame.attrs.get("format", "ymd")
            _check_reading(content, interpret_as, date_format)
            reading = cast(InterpretAs, interpret_as)
            self.pieces.append(SayAs(content, reading, cast(DateFormat, date_format), frame.rate))
        elif frame.name == "sub":
            self.pieces.append(Text(frame.attrs["alias"], frame.rate))
        else:
            if not content:
                raise SsmlError("<phoneme> needs the word it says (its caption): <phoneme ph='...'>word</phoneme>")
            self.pieces.append(Phonemes(frame.attrs["ph"], content, frame.rate))
        attributes = "".join(f' {k}="{_escape(v, quote=True)}"' for k, v in sorted(frame.attrs.items()))
        self.out.append(f"<{frame.name}{attributes}>{_escape(content)}</{frame.name}>")
        self._after_block = False

    def _write(self, markup: str, *, block: bool) -> None:
        self._flush(block)
        self.out.append(markup)
        self._after_block = block

    def _flush(self, block: bool) -> None:
        """The text read since the last tag: folded, without the whitespace beside a block's tag."""
        text, self._pending = fold_text(self._pending), ""
        if self._after_block:
            text = text.lstrip()
        if block:
            text = text.rstrip()
        if text:
            self.out.append(_escape(text))
            self.pieces.append(Text(text, self._stack[-1].rate))
            self._after_block = False


def _checked(name: str, attrs: dict[str, str]) -> dict[str, str]:
    """``attrs`` checked, in their canonical form (what the canonical text writes)."""
    if name == "break":
        return {"time": str(_break_ms(attrs))}
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
        return {"ph": _phonemes(attrs)}
    if name == "prosody":
        return {"rate": _percent(_rate(attrs))}
    return {}


def _break_ms(attrs: Mapping[str, str]) -> int:
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


def _rate(attrs: Mapping[str, str]) -> float:
    value = attrs.get("rate", "").strip()
    if value in RATES:
        return RATES[value]
    percent = _PERCENT.fullmatch(value)
    if percent is None or float(percent["n"]) == 0:
        raise SsmlError(f"<prosody rate={value!r}> is not supported; use {', '.join(RATES)} or a percentage: 150%")
    return float(percent["n"]) / 100


def _percent(rate: float) -> str:
    return f"{round(rate * 100, 2):g}%"


def _phonemes(attrs: Mapping[str, str]) -> str:
    if attrs.get("alphabet", "ipa") != "ipa":
        raise SsmlError(f"<phoneme alphabet={attrs['alphabet']!r}> is not supported; use ipa")
    ph = fold_text(attrs.get("ph", "")).strip()
    if not ph or len(ph) > MAX_PHONEMES:
        raise SsmlError(f"<phoneme ph> needs 1 to {MAX_PHONEMES} phonemes")
    unknown = sorted(set(ph) - PHONEMES)
    if unknown:
        raise SsmlError(
            f"<phoneme ph={ph!r}> has {', '.join(repr(c) for c in unknown)}, not in the model's phonemes: use"
            f" {''.join(sorted(PHONEMES - {' '}))}"
        )
    return ph


def _check_reading(content: str, interpret_as: str, date_format: str) -> None:
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


def _resolve(found: list[Piece | _Boundary]) -> list[Piece]:
    """The pieces with each run of pauses as one: its breaks added, its longest boundary where speech is on both
    sides (none at the start or the end), none of 0 ms."""
    out: list[Piece] = []
    breaks, boundary, spoken = 0, 0, False
    for piece in found:
        if isinstance(piece, _Boundary):
            boundary = max(boundary, piece.ms)
        elif isinstance(piece, Pause):
            breaks += piece.ms
        elif isinstance(piece, Text) and not piece.text.strip():
            if not (breaks or boundary):  # a space beside a pause says nothing
                out.append(piece)
        else:
            pause = breaks + (boundary if spoken else 0)
            if pause:
                out.append(Pause(pause))
            breaks, boundary, spoken = 0, 0, True
            out.append(piece)
    if breaks:
        out.append(Pause(breaks))
    return out


def _escape(text: str, *, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text
