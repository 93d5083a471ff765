"""Split a long document (Markdown, plain text or EPUB) into chapters and parts for speech synthesis.

Pure and stdlib-only: the same input always gives the same :class:`Document`. The rules, in order:

1. Paragraphs are separated by blank lines. Each paragraph, heading, list item and table row is its own
   part when it fits in ``max_part_chars``. Consecutive short paragraphs are never merged: a repeated
   paragraph gives an identical part text, and the service synthesizes identical parts once.
2. A longer paragraph is split at sentence ends (``. ! ? …``, optionally closed by quotes or brackets,
   followed by a space) and whole sentences are packed greedily into parts of at most ``max_part_chars``.
   A ``.`` is not a sentence end after a common abbreviation ("Mr.", "Dr.", "etc.", ...), after initials
   ("J.", "e.g.", "U.S."), and no terminator is one before a lower-case letter ("a.m. on", "wait... what"):
   a voice reads a sentence end with a falling pitch and a pause, wrong mid-sentence.
3. A sentence longer than ``max_part_chars`` is cut after its last clause mark (``; : ,`` or a dash,
   followed by a space) that leaves a piece within the limit, else at its last space within it, else hard at the
   limit (not between a letter and its combining accent). Its pieces are packed like sentences.
4. Parts are plain spoken text: control characters (Unicode Cc) and invisible format characters (Cf:
   zero-width spaces, soft hyphens, BOMs) are removed, any run of whitespace becomes one space, ends
   are stripped; empty parts are dropped, and so is a chapter left with no parts.
5. ``break_after`` is the pause a listener expects after a part: "sentence" when the paragraph continues
   in the next part, "paragraph" after the end of a paragraph, heading, list item or table row, "scene"
   before a paragraph with nothing to speak (a horizontal rule, ``* * *``, ``⁂``, a line of emoji or
   symbols: no word or number, see ``contracts.request_text.has_words``), which is dropped, and "chapter"
   after the last part of a chapter. A chapter opening with such a paragraph starts at its first words.
6. Markdown: chapters start at each heading of the highest level that occurs (``#`` if any, else ``##``, ...; setext
   ``===``/``---`` underlines are levels 1 and 2), except when that level occurs once, as the first heading, above
   lower ones: that is the book's title, and chapters start at the next level. The heading is the chapter's title
   and, being spoken, its first part; lower-level headings are ordinary paragraphs. Text before the first chapter
   heading is a chapter titled with the document title. Not spoken: fenced (```` ``` ````, ``~~~``) and indented code
   blocks, images, HTML comments and script/style elements, reference-link definitions, footnote markers, and a
   leading ``---`` YAML front matter block (whose ``title:`` names the document). Kept as text: emphasis and
   strikethrough content, inline code, link and reference-link text, autolinked URLs, the text inside HTML tags,
   block quote content, list items (one part each, without their markers or task boxes), table rows (one part each,
   cells joined by ", ", the separator row dropped); HTML entities are unescaped. A horizontal rule ends a
   paragraph and is a scene break (rule 5).
7. Plain text: one chapter, unless a line such as "Chapter 1", "CHAPTER IV" or "Chapter One: The
   Beginning" stands alone at the start of a paragraph; each starts a chapter, is its title and is its
   first part. Mid-paragraph, such a line is a hard-wrapped sentence ("see\nChapter 3. Then ...").
8. EPUB (``split_epub``, read by :mod:`producers.epub`): one chapter per spine document, see there.
9. The document title is the ``title`` argument when given, else the front matter title, else the first
   Markdown heading, else "Untitled". A chapter with no title of its own is "Chapter N" (N counts the
   chapters kept).
10. A document with no text left raises :class:`DocumentError`; one past a :class:`SplitLimits` limit (characters,
    parts, chapters) raises :class:`DocumentTooLarge` naming it, as soon as the limit is passed.

Every pattern here that sees the text does work linear in what it reads (a backtracking engine on a quadratic
pattern spent 10 s on 30,000 full stops): a run is matched from its first character only (a lookbehind refuses
the others), repeats that need not give characters back are possessive, and what a pattern could only say with
nested or adjacent repeats of the same characters (a heading's closing ``#``s, a table's separator row) is a
few lines of Python. ``tests/unit/test_linear_patterns.py`` counts every pattern's steps on adversarial runs.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Final, Literal

from contracts.request_text import has_words

BreakKind = Literal["sentence", "paragraph", "scene", "chapter"]
SCENE_BREAK: Final = "⁂"
"""What a horizontal rule (a scene break) stands as among the blocks: a paragraph with nothing to speak."""
Markup = Literal["markdown", "plain"]
_Block = tuple[int, "_Spoken"]  # (heading level, or 0 for a paragraph; its text)

DEFAULT_MAX_PART_CHARS: Final = 1500
UNTITLED: Final = "Untitled"


@dataclass(frozen=True)
class Part:
    text: str
    break_after: BreakKind


@dataclass(frozen=True)
class Chapter:
    title: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Document:
    title: str
    chapters: tuple[Chapter, ...]

    @property
    def chars(self) -> int:
        return sum(len(part.text) for chapter in self.chapters for part in chapter.parts)

    @property
    def part_count(self) -> int:
        return sum(len(chapter.parts) for chapter in self.chapters)


class DocumentError(ValueError):
    """The document cannot be read; the message says what to fix (shown to API clients as a 422)."""


class DocumentTooLarge(DocumentError):
    """The document is past one of its limits, ``budget`` ("chars", "parts", "chapters", or the EPUB's
    "unpacked_bytes"): a 413 that names it."""

    def __init__(self, message: str, budget: str) -> None:
        super().__init__(message)
        self.budget = budget

    def __reduce__(self) -> tuple[type[DocumentTooLarge], tuple[str, str]]:
        return type(self), (str(self), self.budget)  # raised in a worker process, re-raised in the API


@dataclass(frozen=True)
class SplitLimits:
    """The most a document may hold once read; ``None``: no limit."""

    chars: int | None = None
    parts: int | None = None
    chapters: int | None = None

    def check_chars(self, chars: int) -> None:
        if self.chars is not None and chars > self.chars:
            raise DocumentTooLarge(
                f"the document has more than {self.chars} characters once read, the most it may have: split it",
                "chars",
            )


NO_LIMITS: Final = SplitLimits()

# From a run's first terminator only, possessive: one try per run, not one per character of it.
_SENTENCE_END: Final = re.compile("(?<![.!?\u2026])[.!?\u2026]++[\"'\u201d\u2019)\\]]*+(?= )")
_CLAUSE_END: Final = re.compile("[,;:\u2014\u2013](?= )")  # a cut at a space: packing rejoins with one
_INITIALS: Final = re.compile(r"(?:[^\W\d_]\.)+")
_ABBREVIATION: Final = re.compile(
    r"(?:mrs?|ms|dr|prof|[sj]r|st|mt|vs|etc|cf|al|figs?|vol|ch|approx|dept|gen|col|lt|capt|sgt|rev|hon|nos?|eds?)\."
)

_NUMBER_WORD: Final = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
    "|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred"
)
_CHAPTER_MARKER: Final = re.compile(
    rf"[ \t]*chapter[ \t]+(?:\d+|[ivxlcdm]+|(?:{_NUMBER_WORD})(?:[- ](?:{_NUMBER_WORD}))*)"
    r"(?:[ \t]*[.:\u2014\u2013-][ \t]*[^\n]*)?[ \t]*",
    re.IGNORECASE,
)
_MAX_MARKER_CHARS: Final = 120  # a longer line is prose that happens to start with "Chapter one: ..."

_FENCE: Final = re.compile(r" {0,3}(`{3,}|~{3,})")
_ATX: Final = re.compile(r" {0,3}(#{1,6})(?:[ \t]++(.*+))?")  # the closing #s: _atx_text
_SETEXT: Final = re.compile(r" {0,3}(=+|-+)[ \t]*")
_RULE: Final = re.compile(r" {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*")
_LIST_ITEM: Final = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+(?:\[[ xX]\][ \t]+)?(.*))?")
_QUOTES: Final = re.compile(r"(?: {0,3}> ?)*")
_REF_DEF: Final = re.compile(r" {0,3}\[([^\]]+)\]:[ \t]*\S.*")
_SEPARATOR_CELL: Final = re.compile(r"[ \t]*+:?-++:?[ \t]*+")
_CELL_SEP: Final = re.compile(r"(?<!\\)\|")
_FRONT_TITLE: Final = re.compile(r"title:[ \t]*+(.*+)")

_BACKTICKS: Final = re.compile("`+")
_ESCAPED: Final = re.compile(r"\\([!-/:-@\[-`{-~])")
_HIDDEN_START: Final = re.compile(r"<!--|<(script|style)\b", re.IGNORECASE)
_HIDDEN_END: Final = {
    "": re.compile("-->"),
    "script": re.compile(r"</script\s*+>", re.IGNORECASE),
    "style": re.compile(r"</style\s*+>", re.IGNORECASE),
}
_AUTOLINK: Final = re.compile(r"<((?:https?|ftp)://[^<>\s]+|mailto:[^<>\s]+|[^<>\s@]+@[^<>\s@.]+(?:\.[^<>\s@.]+)+)>")
_DESTINATION: Final = r"\((?:[^()]|\([^()]*\))*\)"
_IMAGE: Final = re.compile(rf"!\[[^\[\]]*\](?:{_DESTINATION}|\[[^\[\]]*\])")
_LINK: Final = re.compile(rf"\[([^\[\]]*)\](?:{_DESTINATION}|\[[^\[\]]*\])")
_FOOTNOTE_REF: Final = re.compile(r"\[\^[^\[\]]+\]")
_SHORTCUT_LINK: Final = re.compile(r"\[([^\[\]]+)\](?!\()")
_BREAK_TAG: Final = re.compile(r"</?(?:br|p|div|li|tr|h[1-6])\b[^<>]*>", re.IGNORECASE)
_TAG: Final = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_EMPHASIS: Final = tuple(  # no delimiter inside: an unclosed one costs a scan to the next one, not to the end
    re.compile(p)
    for p in (
        r"\*\*(?=\S)((?:[^*]|\*(?!\*))+?)(?<=\S)\*\*",
        r"(?<!\w)__(?=\S)((?:[^_]|_(?!_))+?)(?<=\S)__(?!\w)",
        r"~~(?=\S)((?:[^~]|~(?!~))+?)(?<=\S)~~",
        r"\*([^\s*](?:[^*]*[^\s*])?)\*",
        r"(?<!\w)_([^\s_](?:[^_]*[^\s_])?)_(?!\w)",
    )
)
_KEPT: Final = re.compile("\x00(\\d+)\x00")


def split_text(
    text: str,
    markup: Markup,
    *,
    max_part_chars: int = DEFAULT_MAX_PART_CHARS,
    title: str | None = None,
    limits: SplitLimits = NO_LIMITS,
) -> Document:
    """``text`` as Markdown or plain text, per the module's rules."""
    text = text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")  # NUL marks kept spans in _inline
    if markup == "markdown":
        blocks, front_title = _markdown_blocks(text)
        first_heading = next((t for level, spoken in blocks if level and (t := _clean(spoken()))), None)
        title = _clean(title or "") or _clean(front_title or "") or first_heading or UNTITLED
    elif markup == "plain":
        blocks = _plain_blocks(text)
        title = _clean(title or "") or UNTITLED
    else:
        raise DocumentError(f"unknown markup {markup!r}; use markdown or plain")
    chapters = (
        (name if isinstance(name, str) else name(), (p() for p in paragraphs))
        for name, paragraphs in _chapters(blocks, title)
    )
    return _assemble(title, chapters, max_part_chars, limits)


def split_epub(
    data: bytes,
    *,
    max_part_chars: int = DEFAULT_MAX_PART_CHARS,
    title: str | None = None,
    limits: SplitLimits = NO_LIMITS,
    max_unpacked_bytes: int | None = None,
) -> Document:
    """An EPUB 2 or 3 file, one chapter per spine document (:func:`producers.epub.read_epub`, which reads at
    most ``max_unpacked_bytes`` and stops at the limits' characters and chapters)."""
    from producers.epub import read_epub  # producers.epub imports this module

    book = read_epub(data, max_unpacked_bytes=max_unpacked_bytes, limits=limits)
    name = _clean(title or "") or _clean(book.title or "") or UNTITLED
    return _assemble(name, book.chapters, max_part_chars, limits)


def _assemble(
    title: str,
    chapters: Iterable[tuple[str | None, Iterable[str]]],
    max_part_chars: int = DEFAULT_MAX_PART_CHARS,
    limits: SplitLimits = NO_LIMITS,
) -> Document:
    """The document of ``(chapter title or None, paragraphs)`` pairs: rules 1 to 5, 9 and 10, stopped as soon as
    it is past a limit."""
    if max_part_chars < 1:
        raise ValueError(f"max_part_chars must be at least 1, not {max_part_chars}")
    kept: list[Chapter] = []
    part_count = chars = 0
    for name, paragraphs in chapters:
        parts: list[Part] = []
        for paragraph in paragraphs:
            text = _clean(paragraph)
            if not has_words(text):
                if text and parts:  # a scene break, a lone symbol: a pause after the part before it (rule 5)
                    parts[-1] = replace(parts[-1], break_after="scene")
                continue
            for part in _paragraph_parts(text, max_part_chars):
                parts.append(part)
                part_count, chars = part_count + 1, chars + len(part.text)
                _check_parts(limits, part_count)
                limits.check_chars(chars)
        if parts:
            parts[-1] = replace(parts[-1], break_after="chapter")
            kept.append(Chapter(_clean(name or "") or f"Chapter {len(kept) + 1}", tuple(parts)))
            _check_chapters(limits, len(kept))
    if not kept:
        raise DocumentError(
            "the document has no text to read: it is empty or holds only markup, code, images, blank pages or"
            " scene breaks"
        )
    return Document(title, tuple(kept))


def _check_parts(limits: SplitLimits, count: int) -> None:
    if limits.parts is not None and count > limits.parts:
        raise DocumentTooLarge(
            f"the document makes more than {limits.parts} parts (paragraphs, headings, list items, table rows and"
            " pieces of longer paragraphs), the most it may have: join short paragraphs or split the document",
            "parts",
        )


def _check_chapters(limits: SplitLimits, count: int) -> None:
    if limits.chapters is not None and count > limits.chapters:
        raise DocumentTooLarge(
            f"the document has more than {limits.chapters} chapters, the most it may have: split it", "chapters"
        )


def _clean(text: str) -> str:
    visible = (c for c in text if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf"))
    return " ".join("".join(visible).split())


def _paragraph_parts(text: str, limit: int) -> list[Part]:
    if not text:
        return []
    pieces = [text] if len(text) <= limit else _pack((p for s in _sentences(text) for p in _pieces(s, limit)), limit)
    # A piece cut from a long run of punctuation says nothing: it goes (every cut is a pause already),
    # rather than becoming a part that the API refuses as a job with nothing to speak.
    pieces = [piece for piece in pieces if has_words(piece)] or pieces
    return [Part(p, "sentence") for p in pieces[:-1]] + [Part(pieces[-1], "paragraph")]


def _sentences(text: str) -> Iterator[str]:
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.end()
        if match.group() == ".":
            word = text[text.rfind(" ", 0, end) + 1 : end].lstrip("\"'([{\u201c\u2018").lower()
            if _ABBREVIATION.fullmatch(word) or _INITIALS.fullmatch(word) or text[end + 1 : end + 2].islower():
                continue
        elif text[end + 1 : end + 2].islower():
            continue
        yield text[start:end]
        start = end + 1
    yield text[start:]


def _pieces(sentence: str, limit: int) -> Iterator[str]:
    start = 0
    while len(sentence) - start > limit:
        window = sentence[start : start + limit + 1]
        cut = max((m.end() for m in _CLAUSE_END.finditer(window) if m.end() <= limit), default=0)
        cut = cut or window.rfind(" ")
        if cut <= 0:
            cut = _hard_cut(window, limit)
        yield window[:cut].rstrip()
        start += cut + (sentence[start + cut : start + cut + 1] == " ")
    if start < len(sentence):
        yield sentence[start:]


def _hard_cut(window: str, limit: int) -> int:
    """Where to cut ``window`` with no clause mark or space: at ``limit``, or before the letter whose
    combining accents straddle it, so that they stay together; at ``limit`` after all when no letter
    precedes them (a run of marks: walking back from every piece of it was quadratic)."""
    cut = limit
    while cut > 0 and unicodedata.combining(window[cut]):
        cut -= 1
    return cut if cut > 0 and not unicodedata.combining(window[cut]) else limit


def _pack(pieces: Iterable[str], limit: int) -> list[str]:
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + 1 + len(piece) <= limit:
            packed[-1] += " " + piece
        else:
            packed.append(piece)
    return packed


def _chapters(blocks: list[_Block], title: str) -> list[tuple[str | _Spoken, list[_Spoken]]]:
    levels = [level for level, _ in blocks if level]
    top = min(levels, default=0)
    if levels and levels[0] == top and levels.count(top) == 1 and any(level > top for level in levels):
        # One top heading, first, above lower ones: the book's title over its chapters (``# Book`` then
        # ``## Chapter 1``, ...), so chapters start at the next level; the title opens the first chapter.
        top = min(level for level in levels if level > top)
    chapters: list[tuple[str | _Spoken, list[_Spoken]]] = [(title, [])]
    for level, spoken in blocks:
        if top and level == top:
            chapters.append((spoken, [spoken]))
        else:
            chapters[-1][1].append(spoken)
    return chapters


def _plain_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines: list[str] = []
    for line in [*text.split("\n"), ""]:
        if not line.strip():
            blocks += [(0, _Spoken("\n".join(lines)))] if lines else []
            lines = []
        # only at a paragraph's start: "as shown in\nChapter 3. Then ..." is a hard-wrapped sentence
        elif not lines and len(line) <= _MAX_MARKER_CHARS and _CHAPTER_MARKER.fullmatch(line):
            blocks.append((1, _Spoken(line)))
        else:
            lines.append(line)
    return blocks


def _markdown_blocks(text: str) -> tuple[list[_Block], str | None]:  # noqa: C901 - listed in pyproject.toml
    lines = text.split("\n")
    front_title = None
    if lines[0].lstrip("\ufeff").rstrip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
        if end is not None:
            titles = (m.group(1).rstrip(" \t") for line in lines[1:end] if (m := _FRONT_TITLE.fullmatch(line)))
            front_title = next((t[1:-1] if t[:1] in "\"'" and t[-1:] == t[:1] else t for t in titles), None)
            lines = lines[end + 1 :]
    refs = {m.group(1).casefold() for line in lines if (m := _REF_DEF.fullmatch(line))}
    blocks: list[_Block] = []
    para: list[str] = []
    item = quoted = in_list = False
    fence = ""

    def flush() -> None:
        nonlocal para, item
        if para:
            blocks.append((0, _Spoken(partial(_inline, "\n".join(para), refs))))
        para, item = [], False

    i = 0
    while i < len(lines):
        line, i = lines[i], i + 1
        unquoted = _QUOTES.sub("", line, count=1)
        line, in_quote = unquoted, len(unquoted) < len(line)
        if fence:
            if _closes(fence, line):
                fence = ""
            continue
        if in_quote != quoted:
            flush()
            quoted = in_quote
        if not line.strip():
            flush()
        elif m := _FENCE.match(line):
            flush()
            fence = m.group(1)
        elif not para and not in_list and line.startswith(("    ", "\t")):
            pass  # indented code
        elif para and not item and (m := _SETEXT.fullmatch(line)):
            blocks.append((1 if m.group(1)[0] == "=" else 2, _Spoken(partial(_inline, "\n".join(para), refs))))
            para = []
        elif _RULE.fullmatch(line):
            flush()
            blocks.append((0, _Spoken(SCENE_BREAK)))  # a scene break: a pause after the part before it (rule 5)
            in_list = False
        elif m := _ATX.fullmatch(line):
            flush()
            blocks.append((len(m.group(1)), _Spoken(partial(_inline, _atx_text(m.group(2) or ""), refs))))
            in_list = False
        elif not para and _REF_DEF.fullmatch(line):
            pass
        elif "|" in line and i < len(lines) and "|" in lines[i] and _is_table_separator(lines[i]):
            flush()
            row, i = line, i + 1
            while True:
                blocks.append((0, _Spoken(partial(_row, row, refs))))
                if i >= len(lines) or "|" not in lines[i] or not lines[i].strip():
                    break
                row, i = lines[i], i + 1
        elif m := _LIST_ITEM.fullmatch(line):
            flush()
            para, item, in_list = [m.group(1) or ""], True, True
        else:
            in_list = in_list and bool(para or line[0].isspace())
            para.append(line)
    flush()
    return blocks, front_title


class _Spoken:
    """A block's spoken text, worked out when it is first read and kept: assembly stops at a document's
    limits, and the blocks past them are never converted (200,000 one-word paragraphs, each run through
    every inline rule, took seconds before the parts limit refused the document)."""

    __slots__ = ("_make", "_text")

    def __init__(self, text: str | Callable[[], str]) -> None:
        self._text: str | None = text if isinstance(text, str) else None
        self._make: Callable[[], str] | None = None if isinstance(text, str) else text

    def __call__(self) -> str:
        if self._text is None and self._make is not None:
            self._text, self._make = self._make(), None
        return self._text or ""


def _row(row: str, refs: set[str]) -> str:
    cells = (_clean(_inline(cell, refs)) for cell in _CELL_SEP.split(row.strip().strip("|")))
    return ", ".join(cell for cell in cells if cell)


def _closes(fence: str, line: str) -> bool:
    """Whether ``line`` closes the code block ``fence`` opened: up to three spaces, at least as many of its
    backticks or tildes, nothing else but blanks."""
    body = line.lstrip(" ")
    if len(line) - len(body) > 3:
        return False
    rest = body.lstrip(fence[0])
    return len(body) - len(rest) >= len(fence) and not rest.strip(" \t")


def _atx_text(text: str) -> str:
    """An ATX heading's text without its closing sequence: ``# Title ##`` reads "Title"; the ``#``s stay
    when no blank precedes them (``# C#``) or they are all there is (``# #``)."""
    text = text.rstrip(" \t")
    body = text.rstrip("#")
    return body.rstrip(" \t") if body != text and body[-1:] in (" ", "\t") else text


def _is_table_separator(line: str) -> bool:
    """``|---|:--:|``: cells of dashes, optionally colon-aligned, between optional outer pipes."""
    cells = line.strip(" \t")
    cells = cells[1:] if cells.startswith("|") else cells
    cells = cells[:-1] if cells.endswith("|") else cells
    return all(_SEPARATOR_CELL.fullmatch(cell) for cell in cells.split("|"))


def _inline(text: str, refs: set[str]) -> str:
    kept: list[str] = []

    def keep(kept_text: str) -> str:
        kept.append(kept_text)
        return f"\x00{len(kept) - 1}\x00"

    text = _code_spans(text, keep)
    text = _ESCAPED.sub(lambda m: keep(m.group(1)), text)
    text = _drop_hidden(text)
    text = _AUTOLINK.sub(lambda m: keep(m.group(1)), text)
    text = _IMAGE.sub("", text)
    text = _FOOTNOTE_REF.sub("", text)
    text = _LINK.sub(r"\1", text)
    text = _SHORTCUT_LINK.sub(lambda m: m.group(1) if m.group(1).casefold() in refs else m.group(), text)
    text = _TAG.sub("", _BREAK_TAG.sub(" ", text))
    for emphasis in _EMPHASIS:
        text = emphasis.sub(r"\1", text)

    def restore(match: re.Match[str]) -> str:
        return _KEPT.sub(restore, kept[int(match.group(1))])  # a kept autolink may hold a kept escape

    return _KEPT.sub(restore, html.unescape(text))


def _code_spans(text: str, keep: Callable[[str], str]) -> str:
    """Code spans kept verbatim: a run of backticks closes at the next run of the same length, if any."""
    runs = list(_BACKTICKS.finditer(text))
    closer: list[int | None] = [None] * len(runs)
    next_of_length: dict[int, int] = {}
    for j in reversed(range(len(runs))):  # paired up front: a search per unclosed run would be quadratic
        closer[j] = next_of_length.get(len(runs[j].group()))
        next_of_length[len(runs[j].group())] = j
    pieces, pos, j = [], 0, 0
    while j < len(runs):
        k = closer[j]
        if k is None:
            j += 1
            continue
        pieces += [text[pos : runs[j].start()], keep(text[runs[j].end() : runs[k].start()])]
        pos, j = runs[k].end(), k + 1
    return "".join([*pieces, text[pos:]])


def _drop_hidden(text: str) -> str:
    """Text without HTML comments, scripts and styles; an unclosed one is left as text."""
    pieces, pos, at, unclosed = [], 0, 0, set()
    while start := _HIDDEN_START.search(text, at):
        kind = (start.group(1) or "").lower()
        end = None if kind in unclosed else _HIDDEN_END[kind]
        close = end.search(text, start.end()) if end else None
        if close is None:
            unclosed.add(kind)  # none later closes either: not searched for again
            at = start.end()
            continue
        pieces.append(text[pos : start.start()])
        pos = at = close.end()
    return " ".join([*pieces, text[pos:]])
