"""Split request text into model-sized segments, keeping char spans.

Rules, applied in order (each level only to pieces still longer than
``max_tokens`` phoneme ids):

1. Sentences: cut after a run of ``. ! ? …`` (plus closing quotes/brackets)
   followed by whitespace or the end, after the CJK full stop, exclamation
   and question marks (U+3002, U+FF01, U+FF1F) anywhere, and at every line
   break. A ``.``-only run is not a cut before a digit or after a
   title such as "Dr." or "Mr."; no terminator cuts before a lower-case letter
   ("a.m. on", "wait... what"). Splitting there would give the voice a
   sentence-final fall mid-sentence.
2. Clauses: cut after ``, ; : …`` followed by whitespace, after em, en and
   bar dashes, and after the CJK comma, semicolon and colon; clauses are
   regrouped greedily, in order, into the longest runs that still phonemize
   to ``max_tokens`` ids.
3. Words: cut at whitespace and regrouped the same way.
4. A single word still too long keeps its whole span but only its first
   ``max_tokens`` ids: the tail is not spoken.
5. A quick start: the first segment ends at the first clause end (rule 2's
   cuts) that has at least ``FIRST_CLAUSE_MIN_WORDS`` words before it, when the
   first sentence has one. The first audio then waits for one clause's
   synthesis, not a whole sentence's, as streaming TTS servers do; the clause's
   own fall in pitch is the price, paid once per request.

Spans exclude surrounding whitespace, so ``text[start:end]`` never starts or
ends with it. Pieces with no ids (punctuation, emoji, ...) are dropped and the
survivors numbered 0..n-1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from tts_node.engine import Segment

Phonemize = Callable[[str], list[int]]
Span = tuple[int, int]

MAX_TOKENS = 510
FIRST_CLAUSE_MIN_WORDS = 4

_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines() splits at
# Each run is matched from its first character only (the lookbehinds), possessively: one try per run. Tried
# from every character, a run of 30,000 full stops took a quadratic number of steps.
_SENTENCE_END = re.compile(
    "(?<![.!?\u2026])[.!?\u2026]++[\"'\u201d\u2019)\\]]*+(?=\\s|\\Z)"  # Latin ones need a space after: "3.14"
    "|(?<![\u3002\uff01\uff1f])[\u3002\uff01\uff1f]++[\u201d\u2019\u300d\u300f\uff09]*+"  # CJK runs on without spaces
    rf"|{_LINE_BREAK.pattern}"
)
_NEXT_CHAR = re.compile(r"[ \t]*(\S?)")
_CLAUSE_END = re.compile("(?<![,;:\u2026])[,;:\u2026]++(?=\\s)|[\u2014\u2013\u2015]++|[\u3001\uff0c\uff1b\uff1a]++")
_WORD = re.compile(r"\S+")
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "mt", "vs"})


def segment_text(
    text: str, phonemize: Phonemize, max_tokens: int = MAX_TOKENS, *, quick_start: bool = True
) -> list[Segment]:
    """Segments of ``text`` in order, each with 1..``max_tokens`` ids (rule 5 only with ``quick_start``)."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    pieces: list[tuple[Span, list[int]]] = []
    for span in sentence_spans(text):
        pieces.extend(_fit(text, span, phonemize(_at(text, span)), phonemize, max_tokens, level=0))
    if quick_start and pieces:
        pieces[:1] = _first_clause(text, pieces[0], phonemize)
    return [
        Segment(index=i, start=s, end=e, text=text[s:e], token_ids=tuple(ids))
        for i, ((s, e), ids) in enumerate(p for p in pieces if p[1])
    ]


def sentence_spans(text: str) -> list[Span]:
    """Sentence spans of ``text`` per rule 1, whitespace-stripped, non-empty."""
    cuts = (m.end() for m in _SENTENCE_END.finditer(text) if _is_sentence_end(text, m))
    return _between(text, 0, len(text), cuts)


def _is_sentence_end(text: str, match: re.Match[str]) -> bool:
    run = match.group()
    if _LINE_BREAK.fullmatch(run):
        return True
    following = _NEXT_CHAR.match(text, match.end())
    nxt = following.group(1) if following else ""
    if nxt.islower():
        return False
    if set(run) == {"."}:
        if nxt.isdigit():
            return False
        word_start = match.start()
        while word_start > 0 and text[word_start - 1].isalnum():
            word_start -= 1
        if text[word_start : match.start()].lower() in _TITLES:
            return False
    return True


def _clause_spans(text: str, span: Span) -> list[Span]:
    start, end = span
    cuts = (start + m.end() for m in _CLAUSE_END.finditer(text[start:end]))
    return _between(text, start, end, cuts)


def _word_spans(text: str, span: Span) -> list[Span]:
    start, end = span
    return [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]


_SPLITTERS: tuple[Callable[[str, Span], list[Span]], ...] = (_clause_spans, _word_spans)


def _fit(
    text: str, span: Span, ids: list[int], phonemize: Phonemize, max_tokens: int, level: int
) -> list[tuple[Span, list[int]]]:
    """``span`` as pieces of at most ``max_tokens`` ids, splitting per ``level``."""
    if len(ids) <= max_tokens:
        return [(span, ids)]
    if level == len(_SPLITTERS):
        return [(span, ids[:max_tokens])]
    parts = _SPLITTERS[level](text, span)
    if len(parts) <= 1:
        return _fit(text, span, ids, phonemize, max_tokens, level + 1)
    out: list[tuple[Span, list[int]]] = []
    group, group_ids = parts[0], phonemize(_at(text, parts[0]))
    for part in parts[1:]:
        # Re-phonemize the joined span rather than adding counts: G2P output
        # for a run is not the sum of its parts (spaces, liaison).
        joined = (group[0], part[1])
        joined_ids = phonemize(_at(text, joined))
        if len(joined_ids) <= max_tokens:
            group, group_ids = joined, joined_ids
            continue
        out.extend(_fit(text, group, group_ids, phonemize, max_tokens, level + 1))
        group, group_ids = part, phonemize(_at(text, part))
    out.extend(_fit(text, group, group_ids, phonemize, max_tokens, level + 1))
    return out


def _first_clause(text: str, piece: tuple[Span, list[int]], phonemize: Phonemize) -> list[tuple[Span, list[int]]]:
    """The first piece as its first long-enough clause and the rest (rule 5), or as it was."""
    clauses = _clause_spans(text, piece[0])
    for clause in clauses[:-1]:
        if len(_WORD.findall(_at(text, (piece[0][0], clause[1])))) >= FIRST_CLAUSE_MIN_WORDS:
            head, rest = _strip(text, piece[0][0], clause[1]), _strip(text, clause[1], piece[0][1])
            if head is None or rest is None:
                break
            return [(head, phonemize(_at(text, head))), (rest, phonemize(_at(text, rest)))]
    return [piece]


def _between(text: str, start: int, end: int, cuts: Iterable[int]) -> list[Span]:
    spans = []
    lo = start
    for cut in [*cuts, end]:
        span = _strip(text, lo, cut)
        if span is not None:
            spans.append(span)
        lo = cut
    return spans


def _strip(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _at(text: str, span: Span) -> str:
    return text[span[0] : span[1]]
