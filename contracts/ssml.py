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
  starts or ends between speech; pauses that meet add their breaks and keep the longest boundary, and are
  one pause of at most :data:`MAX_BREAK_MS` in all.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, NoReturn, cast
from xml.parsers import expat

from contracts.fingerprint import fold_text
from contracts.pauses import PAUSE_MS
from contracts.safe_xml import safe_parser
from contracts.ssml_attributes import (
    BREAK_STRENGTH_MS,
    INTERPRET_AS,
    MAX_BREAK_MS,
    MODEL_SPEED_RANGE,
    PHONEMES,
    RATES,
    DateFormat,
    InterpretAs,
    SsmlError,
    check_reading,
    checked,
    date_parts,
    percent,
    rate_of,
)

InputFormat = Literal["text", "ssml"]
MAX_DEPTH: Final = 16
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


__all__ = [
    "BREAK_STRENGTH_MS",
    "INTERPRET_AS",
    "MAX_BREAK_MS",
    "MAX_DEPTH",
    "MODEL_SPEED_RANGE",
    "PHONEMES",
    "RATES",
    "DateFormat",
    "InputFormat",
    "InterpretAs",
    "Pause",
    "Phonemes",
    "Piece",
    "SayAs",
    "Ssml",
    "SsmlError",
    "Text",
    "check_speed",
    "date_parts",
    "looks_like_ssml",
    "parse",
]


def looks_like_ssml(text: str) -> bool:
    """Whether a request that did not say its format is SSML: it starts (after whitespace) with ``<speak``."""
    return _SPEAK_START.match(text) is not None


def check_speed(ssml: Ssml, speed: float) -> None:
    """Refuse a prosody rate that takes ``speed`` outside the model's range (:data:`MODEL_SPEED_RANGE`)."""
    low, high = MODEL_SPEED_RANGE
    for rate in sorted(ssml.rates()):
        if not low <= round(speed * rate, 4) <= high:
            raise SsmlError(
                f"<prosody rate> of {percent(rate)} at speed {speed:g} is a speed of {speed * rate:g}, outside the"
                f" model's {low:g} to {high:g}: use a rate between {percent(low / speed)} and {percent(high / speed)}"
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
    content: list[str] = field(default_factory=list)  # a text-only element's text, in the chunks expat gave


class _Reader:
    """Expat's handlers: the pieces in order, and the canonical text written as it goes."""

    def __init__(self) -> None:
        self.pieces: list[Piece | _Boundary] = []
        self.out: list[str] = []
        self._stack: list[_Frame] = []
        self._pending: list[str] = []  # text read since the last tag (a comment does not end it)
        self._after_block = True  # whitespace beside <speak>, <p>, <s>, <break> and their ends says nothing

    def start(self, name: str, attrs: dict[str, str]) -> None:
        parent = self._stack[-1] if self._stack else None
        self._check_place(name, attrs, parent)
        frame = _Frame(name, (parent.rate if parent else 1.0) * (rate_of(attrs) if name == "prosody" else 1.0))
        frame.attrs = checked(name, attrs)
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
            frame.content.append(text)
        elif frame.name == "break" and text.strip():
            raise SsmlError("<break> may hold nothing: write it <break/>")
        else:
            self._pending.append(text)

    def _text_only(self, frame: _Frame) -> None:
        content = fold_text("".join(frame.content)).strip()
        if frame.name == "say-as":
            interpret_as, date_format = frame.attrs["interpret-as"], frame.attrs.get("format", "ymd")
            check_reading(content, interpret_as, date_format)
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
        text, self._pending = fold_text("".join(self._pending)), []
        if self._after_block:
            text = text.lstrip()
        if block:
            text = text.rstrip()
        if text:
            self.out.append(_escape(text))
            self.pieces.append(Text(text, self._stack[-1].rate))
            self._after_block = False


def _resolve(found: list[Piece | _Boundary]) -> list[Piece]:
    """The pieces with each run of pauses as one: its breaks added, its longest boundary where speech is on both
    sides (none at the start or the end), none of 0 ms, none longer than :data:`MAX_BREAK_MS` (breaks that meet
    are one pause, bounded as one break is: 216 ten-second breaks made a 36-minute silence)."""
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
            pause = min(MAX_BREAK_MS, breaks + (boundary if spoken else 0))
            if pause:
                out.append(Pause(pause))
            breaks, boundary, spoken = 0, 0, True
            out.append(piece)
    if breaks:
        out.append(Pause(min(MAX_BREAK_MS, breaks)))
    return out


def _escape(text: str, *, quote: bool = False) -> str:
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;") if quote else text
