"""An SSML request's segments: its pieces (:mod:`contracts.ssml`, the API's own parser) as the model says them.

The worker gets the canonical SSML the API wrote (``SynthesisRequest.text`` with ``input_format="ssml"``)
and parses it again with the same module, so nothing the API accepted is read otherwise here. Then:

* Text, a ``<sub>``'s alias, and a ``<say-as>`` read aloud here (:func:`reading`, with the normalizer's
  own number, date and telephone readers) join into runs: consecutive pieces said at one rate, with no pause
  or ``<phoneme>`` between them. Each run is segmented as a plain request's text is (sentences, clauses,
  normalized before G2P unless the request says not to), so a sentence with a say-as in it is still one
  sentence to the model, said with one intonation.
* A ``<phoneme ph>`` is a segment of its own whose ids are ``ph``'s, in the model's alphabet: G2P never
  sees it.
* A pause is a segment of ``silence`` samples, exactly ``round(ms * sample_rate / 1000)``, and no ids: the
  adapter writes zeros for it without calling the model.
* A ``<prosody rate>`` is each segment's ``rate``: the worker says it at the request's speed times it.

A request's pronunciations (:mod:`contracts.pronunciations`), of a plain text or an SSML one, make each word
they name a ``<phoneme>`` piece of its own, said by this same path (:func:`request_segments`).

Spans (and word timings) count characters of what is said as written: the SSML's text without its markup,
each say-as as its reading, each sub as its alias, each phoneme as the word it wraps; a pause is an empty
span where it falls. A caption of an SSML job so shows the words the listener hears.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from contracts.pronunciations import spoken_pieces
from contracts.request_text import has_words
from contracts.ssml import Pause, Phonemes, Piece, SayAs, SsmlError, Text, date_parts, parse
from tts_node.engine import Engine, Segment
from tts_node.errors import EngineInputError
from tts_node.normalization.addresses import telephone
from tts_node.normalization.dates import said
from tts_node.normalization.numbers import digits, number, ordinal, year

_BRITISH: Final = frozenset({"b", "en-gb"})


def request_segments(
    engine: Engine,
    text: str,
    lang: str,
    *,
    normalize: bool = True,
    ssml: bool = False,
    pronunciations: Mapping[str, str] | None = None,
) -> list[Segment]:
    """The segments of a request's ``text`` (SSML when ``ssml``), its ``pronunciations``' words said as their
    phonemes; a plain text without any is segmented by the engine alone, as it always was."""
    if not ssml and not pronunciations:
        return engine.segment(text, lang, normalize=normalize)
    try:
        pieces: Sequence[Piece] = parse(text).pieces if ssml else [Text(text)]
    except SsmlError as exc:
        raise EngineInputError(str(exc)) from exc
    return pieces_segments(engine, spoken_pieces(pieces, pronunciations or {}), lang, normalize=normalize)


def ssml_segments(engine: Engine, source: str, lang: str, *, normalize: bool = True) -> list[Segment]:
    """The segments of the SSML ``source``, numbered in order; ``EngineInputError`` when it cannot be said."""
    return request_segments(engine, source, lang, normalize=normalize, ssml=True)


def pieces_segments(engine: Engine, pieces: Sequence[Piece], lang: str, *, normalize: bool = True) -> list[Segment]:
    """The segments of ``pieces``, numbered in order; ``EngineInputError`` when nothing is said."""
    segments: list[Segment] = []
    at = 0  # where the next piece starts, in characters of what is said as written
    run: list[str] = []
    run_rate = 1.0

    def flush() -> None:
        nonlocal at
        text = "".join(run)
        run.clear()
        if has_words(text):
            found = engine.segment(text, lang, normalize=normalize)
            segments.extend(replace(s, start=at + s.start, end=at + s.end, rate=run_rate) for s in found)
        at += len(text)

    for piece in pieces:
        if isinstance(piece, Text | SayAs):
            if run and piece.rate != run_rate:
                flush()
            run_rate = piece.rate
            run.append(piece.text if isinstance(piece, Text) else reading(piece, lang))
            continue
        flush()
        segments.append(_alone(engine, piece, at))
        at += len(segments[-1].text)
    flush()
    if not any(s.token_ids for s in segments):
        raise EngineInputError("the text has nothing to speak: it needs at least one word, not only breaks")
    return [replace(s, index=i) for i, s in enumerate(segments)]


def _alone(engine: Engine, piece: Piece, at: int) -> Segment:
    """A pause or a ``<phoneme>``: a segment of its own."""
    if isinstance(piece, Pause):
        samples = round(piece.ms * engine.info.sample_rate / 1000)
        return Segment(index=0, start=at, end=at, text="", token_ids=(), silence=samples)
    assert isinstance(piece, Phonemes)
    ids = engine.phoneme_ids(piece.ph)
    return Segment(0, at, at + len(piece.text), piece.text, ids, spoken=piece.text, rate=piece.rate)


def reading(piece: SayAs, lang: str) -> str:
    """What a ``<say-as>`` says, in words (its content was checked by the API: :mod:`contracts.ssml`)."""
    british = lang.strip().lower() in _BRITISH
    content = piece.text
    if piece.interpret_as == "characters":
        # Hyphened, one word to espeak: "A B C" would read its "A" as the article, "A-B-C" says each letter.
        return "-".join(digits(c) if "0" <= c <= "9" else c.upper() for c in content if c.isalnum())
    if piece.interpret_as == "cardinal":
        return number(content, british=british)
    if piece.interpret_as == "ordinal":
        return ordinal(int(content.rstrip("stndrh").replace(",", "")), british=british)
    if piece.interpret_as == "telephone":
        return ("plus " if content.startswith("+") else "") + telephone(content)
    parts = date_parts(content, piece.date_format)
    if parts is None:  # not reached for what the API accepted
        raise EngineInputError(f"<say-as interpret-as='date'> cannot read {content!r}")
    year_number, month, day = parts
    return said(month, day, year(year_number, british=british))
