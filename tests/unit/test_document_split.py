"""Splitting documents into chapters and parts (producers.document_split, producers.epub): one table per rule."""

from __future__ import annotations

import io
import re
import zipfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts.request_text import has_words
from producers import document_split, epub
from producers.document_split import (
    Chapter,
    Document,
    DocumentError,
    DocumentTooLarge,
    Markup,
    Part,
    SplitLimits,
    split_epub,
    split_text,
)
from tests.support.work import counted, growth, linear

pytestmark = pytest.mark.unit


def texts(document: Document) -> list[str]:
    return [part.text for chapter in document.chapters for part in chapter.parts]


def outline(document: Document) -> list[tuple[str, list[str]]]:
    return [(chapter.title, [part.text for part in chapter.parts]) for chapter in document.chapters]


def md(text: str, max_part_chars: int = 1500, title: str | None = None) -> list[str]:
    return texts(split_text(text, "markdown", max_part_chars=max_part_chars, title=title))


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("Plain *emphasis*, _emphasis_, **strong** and __strong__.", ["Plain emphasis, emphasis, strong and strong."]),
        ("***both*** and ~~struck~~ text", ["both and struck text"]),
        ("snake_case_name and 2 * 3 * 4 stay", ["snake_case_name and 2 * 3 * 4 stay"]),
        ("Run `pip install a_b` now, or ``code with ` tick``.", ["Run pip install a_b now, or code with ` tick."]),
        ("Read [the docs](https://x.org/a_(b) 'Title') today.", ["Read the docs today."]),
        (
            "A [reference link][ref] and a [shortcut].\n\n[ref]: https://x.org\n[shortcut]: /s",
            ["A reference link and a shortcut."],
        ),
        ("Not a link: [brackets] stay.", ["Not a link: [brackets] stay."]),
        ("Look ![a diagram](d.png) here ![ref image][img].", ["Look here ."]),
        ("[![badge](b.svg)](https://ci) Build", ["Build"]),
        ("Mail <me@example.com> or see <https://x.org/a_b_c>.", ["Mail me@example.com or see https://x.org/a_b_c."]),
        ("Some <b>bold</b> and <span class='x'>spanned</span> text<br/>next", ["Some bold and spanned text next"]),
        ("Fish &amp; chips &lt;3 &eacute;t&eacute; &#8212; yes", ["Fish & chips <3 été — yes"]),
        ("Hidden <!-- a comment --> and <script>alert(1)</script> gone", ["Hidden and gone"]),
        ("Escaped \\*stars\\* and \\_under\\_ stay", ["Escaped *stars* and _under_ stay"]),
        ("A footnote[^1] marker.\n\n[^1]: The note.", ["A footnote marker."]),
        ("> Quoted *text*\n> continues\n\nAfter", ["Quoted text continues", "After"]),
        ("> Quote one\n>\n> Quote two", ["Quote one", "Quote two"]),
        ("- one\n- two\n  wrapped\n* three\n+ four", ["one", "two wrapped", "three", "four"]),
        ("1. first\n2) second\n10. tenth", ["first", "second", "tenth"]),
        ("- [ ] todo\n- [x] done", ["todo", "done"]),
        ("- outer\n    - nested\n        - deeper", ["outer", "nested", "deeper"]),
        ("Text\n\n```python\nprint('no')\n```\n\nMore", ["Text", "More"]),
        ("~~~\ncode\n\nstill code\n~~~\nAfter", ["After"]),
        ("````\n```\nnot closed by a shorter fence\n```\n````\nAfter", ["After"]),
        ("Text\n\n    indented code\n    more code\n\nMore", ["Text", "More"]),
        ("\tcode after a tab\n\nMore", ["More"]),
        ("Para one\n***\nPara two\n\n- - -\n\nPara three", ["Para one", "Para two", "Para three"]),
        ("| Name | Age |\n|------|:---:|\n| Ann | 3 |\n| *Bob* | |\n\nAfter", ["Name, Age", "Ann, 3", "Bob", "After"]),
        ("a | b\n--|--\n1 | 2", ["a, b", "1, 2"]),
        ("Line one\nline two\n\n\n\nNext paragraph", ["Line one line two", "Next paragraph"]),
    ],
)
def test_markdown_is_stripped_to_spoken_text(markdown: str, expected: list[str]) -> None:
    assert md(markdown) == expected


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        (
            "# One\n\nText one.\n\n## Section\n\nMore.\n\n# Two\n\nText two.",
            [("One", ["One", "Text one.", "Section", "More."]), ("Two", ["Two", "Text two."])],
        ),
        (
            "## A\n\nx\n\n### a.1\n\ny\n\n## B\n\nz",
            [("A", ["A", "x", "a.1", "y"]), ("B", ["B", "z"])],
        ),
        (
            "Book\n====\n\nIntro.\n\nPart\n----\n\nBody.\n\nNext\n===\n\nEnd.",
            [("Book", ["Book", "Intro.", "Part", "Body."]), ("Next", ["Next", "End."])],
        ),
        (
            "First\n---\n\nx\n\nSecond\n---\n\ny",
            [("First", ["First", "x"]), ("Second", ["Second", "y"])],
        ),
        (
            "Multi line\nheading\n===\n\nx",
            [("Multi line heading", ["Multi line heading", "x"])],
        ),
        (
            "# *Styled* [title](u) #\n\nx",
            [("Styled title", ["Styled title", "x"])],
        ),
        (
            "# C# and F#\n\nx",
            [("C# and F#", ["C# and F#", "x"])],
        ),
        (
            "#hashtag is not a heading\n\n# Real",
            [("Real", ["#hashtag is not a heading"]), ("Real", ["Real"])],
        ),
    ],
)
def test_chapters_start_at_the_highest_heading_level(markdown: str, expected: list[tuple[str, list[str]]]) -> None:
    assert outline(split_text(markdown, "markdown")) == expected


def test_text_before_the_first_chapter_is_a_chapter_named_after_the_document() -> None:
    doc = split_text("Preface words.\n\n# One\n\nx\n\n# Two\n\ny", "markdown", title="The Book")
    assert doc.title == "The Book"
    assert [c.title for c in doc.chapters] == ["The Book", "One", "Two"]
    assert split_text("No headings.\n\nAt all.", "markdown").chapters == (
        Chapter("Untitled", (Part("No headings.", "paragraph"), Part("At all.", "chapter"))),
    )


def test_a_chapter_heading_with_no_text_is_numbered() -> None:
    doc = split_text("# ![logo](l.png)\n\nx\n\n# Two\n\ny", "markdown")
    assert outline(doc) == [("Chapter 1", ["x"]), ("Two", ["Two", "y"])]


@pytest.mark.parametrize(
    ("markdown", "title", "expected"),
    [
        ('---\ntitle: "Front Title"\nauthor: Me\n---\n# Heading\n\nx', None, "Front Title"),
        ("---\ntitle: 'Single'\n...\nx", None, "Single"),
        ("---\nsubtitle: Not it\ntitle: Bare words\n---\nx", None, "Bare words"),
        ("---\ntitle: Front\n---\n# Heading\n\nx", "  Given \n title ", "Given title"),
        ("Intro\n\n## First *heading*\n\nx\n\n# Top", None, "First heading"),
        ("no heading", None, "Untitled"),
        ("no heading", "  ", "Untitled"),
    ],
)
def test_the_document_title(markdown: str, title: str | None, expected: str) -> None:
    assert split_text(markdown, "markdown", title=title).title == expected


def test_front_matter_is_not_read() -> None:
    doc = split_text("---\ntitle: T\ntags: [a, b]\n---\n\nBody text.", "markdown")
    assert texts(doc) == ["Body text."]
    assert doc.chapters[0].title == "T"
    # a "---" later on is a rule, and an unclosed one at the start is text, not front matter
    assert md("Body\n\n---\n\nMore") == ["Body", "More"]
    assert md("---\ntitle: x\n\nnever closed") == ["title: x", "never closed"]


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        (
            "Mr. Smith met Dr. Jones. They read J. R. R. Tolkien, e.g. The Hobbit. Bye!",
            45,
            ["Mr. Smith met Dr. Jones.", "They read J. R. R. Tolkien, e.g. The Hobbit.", "Bye!"],
        ),
        ("We ate apples, pears etc. Then we left. Ok.", 40, ["We ate apples, pears etc. Then we left.", "Ok."]),
        ("A b. C d. E f. G h.", 9, ["A b. C d.", "E f. G h."]),
        ("One. Two. Three. Four. Five.", 10, ["One. Two.", "Three.", "Four.", "Five."]),
        ("Wait... what? Yes! No… maybe. Done.", 14, ["Wait... what?", "Yes!", "No… maybe.", "Done."]),
        ('He said "Stop." She ran (fast.) Then', 16, ['He said "Stop."', "She ran (fast.)", "Then"]),
        ("Pi is 3.14 today. At 9 a.m. on Monday.", 20, ["Pi is 3.14 today.", "At 9 a.m. on Monday."]),
    ],
)
def test_a_long_paragraph_is_split_at_sentence_ends(text: str, max_chars: int, expected: list[str]) -> None:
    assert md(text, max_part_chars=max_chars) == expected


@pytest.mark.parametrize(
    ("text", "max_chars", "expected"),
    [
        ("alpha beta, gamma delta; epsilon zeta", 25, ["alpha beta, gamma delta;", "epsilon zeta"]),
        ("alpha beta: gamma, delta epsilon zeta eta", 20, ["alpha beta: gamma,", "delta epsilon zeta", "eta"]),
        ("one—two three — four five", 16, ["one—two three —", "four five"]),
        ("1,000,000 people came here", 12, ["1,000,000", "people came", "here"]),
        ("abcdefghijklmnopqrstuvwxyz", 10, ["abcdefghij", "klmnopqrst", "uvwxyz"]),
        (
            "Short. " + "word " * 10 + "end.",
            22,
            ["Short. word word word", "word word word word", "word word word end."],
        ),
    ],
)
def test_an_overlong_sentence_is_split_at_a_clause_else_a_space_else_hard(
    text: str, max_chars: int, expected: list[str]
) -> None:
    parts = md(text, max_part_chars=max_chars)
    assert parts == expected
    assert all(1 <= len(p) <= max_chars for p in parts)


def test_a_hard_split_keeps_combining_marks_with_their_letter() -> None:
    parts = md("abcde\u0301fgh", max_part_chars=5)
    assert parts == ["abcd", "e\u0301fgh"]


_WORD_CHARS = "abcdefgijklmnoqrsuvwxyzAEIOU.,;:!?'\u2014\u00e9"


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(st.sampled_from([*_WORD_CHARS, " ", "\n", "\n\n", "\t", "Mr. ", "e.g. "]), max_size=300).map("".join),
    max_chars=st.integers(min_value=1, max_value=60),
)
def test_every_part_fits_and_no_word_is_lost(text: str, max_chars: int) -> None:
    # A paragraph with nothing to speak (no letter or digit: ". ;") is a pause, not a part (rule 5).
    spoken = "\n\n".join(p for p in re.split(r"\n[ \t]*\n", text) if has_words(p))
    try:
        doc = split_text(text, "plain", max_part_chars=max_chars)
    except DocumentError:
        assert not spoken.split()
        return
    parts = texts(doc)
    assert all(1 <= len(p) <= max_chars for p in parts)
    assert all(p == p.strip() and "  " not in p for p in parts)
    # Every word is kept; only a piece of punctuation cut off on its own may go (it says nothing).
    said, written = "".join("".join(parts).split()), "".join(spoken.split())
    assert [c for c in said if c.isalnum()] == [c for c in written if c.isalnum()]
    rest = iter(written)
    assert all(c in rest for c in said), "the parts are the text in order, less some punctuation"
    if all(len(w) <= max_chars for w in spoken.split()):
        words = [w for w in spoken.split() if has_words(w)]
        assert [w for w in " ".join(parts).split() if has_words(w)] == words
    assert doc.chars == sum(map(len, parts))
    assert doc.part_count == len(parts)
    assert split_text(text, "plain", max_part_chars=max_chars) == doc


def test_break_after_says_which_pause_follows() -> None:
    doc = split_text("# One\n\nFirst. Second.\n\nShort.\n\n# Two\n\nLast.", "markdown", max_part_chars=8)
    assert [(p.text, p.break_after) for c in doc.chapters for p in c.parts] == [
        ("One", "paragraph"),
        ("First.", "sentence"),
        ("Second.", "paragraph"),
        ("Short.", "chapter"),
        ("Two", "paragraph"),
        ("Last.", "chapter"),
    ]


def test_paragraphs_are_never_merged_so_repeats_give_identical_parts() -> None:
    chorus = "La la *la*, the chorus goes on.\nAnd on."
    doc = split_text(f"Verse one.\n\n{chorus}\n\nVerse two.\n\n{chorus}\n\nEnd.", "markdown")
    assert texts(doc) == ["Verse one.", "La la la, the chorus goes on. And on.", "Verse two.", texts(doc)[1], "End."]
    long = split_text(f"{'Sentence here. ' * 20}\n\nx\n\n{'Sentence here. ' * 20}", "plain", max_part_chars=50)
    parts = texts(long)
    assert parts[: parts.index("x")] == parts[parts.index("x") + 1 :]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Preface.\n\nChapter 1\n\nIt begins.\n\nCHAPTER II\nIt goes on.\n\nChapter Twenty-One: The End\n\nDone.",
            [
                ("My Book", ["Preface."]),
                ("Chapter 1", ["Chapter 1", "It begins."]),
                ("CHAPTER II", ["CHAPTER II", "It goes on."]),
                ("Chapter Twenty-One: The End", ["Chapter Twenty-One: The End", "Done."]),
            ],
        ),
        ("  chapter iv.  \nText", [("chapter iv.", ["chapter iv.", "Text"])]),
        (
            "In this chapter we learn.\n\nChapter 3 was better than chapter 2.\n\nChapter 1x",
            [
                (
                    "My Book",
                    ["In this chapter we learn.", "Chapter 3 was better than chapter 2.", "Chapter 1x"],
                )
            ],
        ),
        ("# Not markdown *here*\n\n- item", [("My Book", ["# Not markdown *here*", "- item"])]),
        (
            "As we saw in\nChapter 3. Then we\nmoved on.\n\nChapter 4\nChapter 5",
            [
                ("My Book", ["As we saw in Chapter 3. Then we moved on."]),
                ("Chapter 4", ["Chapter 4"]),
                ("Chapter 5", ["Chapter 5"]),
            ],
        ),
    ],
)
def test_plain_text_chapter_markers(text: str, expected: list[tuple[str, list[str]]]) -> None:
    assert outline(split_text(text, "plain", title="My Book")) == expected


def test_plain_text_without_a_title_is_untitled() -> None:
    assert split_text("Chapter 1\n\nx", "plain").title == "Untitled"


def test_whitespace_is_folded_and_invisible_characters_removed() -> None:
    text = "Zero\u200bwidth, soft\u00adhyphen,\u00a0no-break\tspace,\x07bell \ufeffBOM\u2028line  end."
    assert texts(split_text(text, "plain")) == ["Zerowidth, softhyphen, no-break space,bell BOM line end."]


@pytest.mark.parametrize(
    ("text", "markup"),
    [
        ("", "plain"),
        (" \n\t\n ", "plain"),
        ("\u200b\u200d\x00", "plain"),
        ("```\nprint('code only')\n```", "markdown"),
        ("![only an image](x.png)\n\n---\n\n<!-- comment -->", "markdown"),
        ("---\ntitle: Only front matter\n---\n", "markdown"),
    ],
)
def test_a_document_with_no_text_is_refused(text: str, markup: Markup) -> None:
    with pytest.raises(DocumentError, match="the document has no text to read"):
        split_text(text, markup)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(DocumentError, match="unknown markup 'html'"):
        split_text("x", "html")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_part_chars must be at least 1"):
        split_text("x", "plain", max_part_chars=0)


def test_the_same_input_gives_the_same_document() -> None:
    text = "# A\n\n" + "Some sentence, with clauses; and more. " * 100 + "\n\n# B\n\nx"
    first = split_text(text, "markdown", max_part_chars=120)
    assert split_text(text, "markdown", max_part_chars=120) == first
    assert all(len(p) <= 120 for p in texts(first))


# Work linear in the text, and limits ---------------------------------------------------------------------
# Work is counted, not timed (tests.support.work: the steps of every pattern of the module, in the engine's
# step model, and the lines of Python it runs): the same count on any machine under any load, so these
# cannot flake on a loaded two-core machine. Each fails with the pattern or loop it pins put back.


def assert_linear(run, n: int) -> None:
    counts = growth(run, (document_split,), n)
    assert linear(counts, n), f"work at n, 2n, 3n: {counts}"


def test_regression_30000_full_stops_took_10_s_to_split() -> None:
    """The sentence-end pattern was tried from every full stop of a run and scanned the rest of it each time.
    Counted, not timed: the same count on any machine under any load, so it cannot flake."""
    assert_linear(lambda n: split_text("Stop" + "." * n, "markdown"), 3000)  # runs longer than a part: they are cut


def test_regression_an_atx_heading_with_a_long_run_of_spaces_was_quadratic() -> None:
    """The closing-sequence pattern tried every split of the blanks. Counted, not timed: cannot flake."""
    assert_linear(lambda n: split_text("# a" + " " * n + "b", "markdown"), 1000)


def test_regression_a_table_separator_row_of_blanks_was_quadratic() -> None:
    """Nested repeats of blanks in the separator pattern. Counted, not timed: cannot flake."""
    assert_linear(lambda n: split_text("a | b\n|" + " " * n, "markdown"), 300)
    assert_linear(lambda n: split_text("a | b\n" + " " * n + "|", "markdown"), 300)


def test_regression_front_matter_with_a_long_blank_title_was_quadratic() -> None:
    """A lazy title then trailing blanks. Counted, not timed: cannot flake."""
    assert_linear(lambda n: split_text("---\ntitle: a" + " " * n + "b\n---\nText.", "markdown"), 1000)


def test_regression_a_run_of_combining_marks_walked_back_the_whole_part_for_every_mark() -> None:
    """A run of marks was cut one mark at a time, each cut walking back a whole part's length: work per
    mark grew with the part size (1,500 lines of Python per mark at the default). A bound on counted work,
    not a time: it cannot flake on a loaded machine."""
    text = "a" + "\u0301" * 6000
    for part_chars in (100, 1500):
        with counted(document_split) as work:
            document = split_text(text, "plain", max_part_chars=part_chars)
        assert work.total < 40 * len(text), (part_chars, work.total)
        assert texts(document)[0] == "a" + "\u0301" * (part_chars - 1)  # the marks cut off alone say nothing


def test_a_run_of_combining_marks_is_cut_hard_at_the_limit() -> None:
    mark = "\u0301"
    assert md("a" + mark * 9, max_part_chars=4) == ["a" + mark * 3]  # the marks cut off alone say nothing
    assert md("a" + mark * 9 + " b", max_part_chars=4)[-1].endswith(" b")  # a word after them is kept


def test_regression_200000_one_word_paragraphs_made_as_many_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 1.7 MB Markdown of one-word paragraphs became 200,000 jobs: the parts limit refuses it, and the
    paragraphs past the limit are never run through the inline rules."""
    converted = []
    inline = document_split._inline
    monkeypatch.setattr(document_split, "_inline", lambda text, refs: converted.append(text) or inline(text, refs))
    text = "\n\n".join(f"word{i}" for i in range(200_000))
    with pytest.raises(DocumentTooLarge) as refused:
        split_text(text, "markdown", limits=SplitLimits(parts=20_000))
    assert refused.value.budget == "parts"
    assert "more than 20000 parts" in str(refused.value)
    assert len(converted) == 20_001


@pytest.mark.parametrize(
    ("text", "limits", "budget"),
    [
        ("# A\n\nx\n\n# B\n\ny\n\n# C\n\nz", SplitLimits(chapters=2), "chapters"),
        ("one\n\ntwo\n\nthree", SplitLimits(parts=2), "parts"),
        ("a" * 50 + "\n\n" + "b" * 50, SplitLimits(chars=80), "chars"),
    ],
)
def test_a_document_past_a_limit_is_refused_naming_it(text: str, limits: SplitLimits, budget: str) -> None:
    with pytest.raises(DocumentTooLarge) as refused:
        split_text(text, "markdown", limits=limits)
    assert refused.value.budget == budget
    split_text(text, "markdown")  # no limit: read


def test_a_limit_refusal_survives_pickling() -> None:
    import pickle

    refused = pickle.loads(pickle.dumps(DocumentTooLarge("too many", "parts")))
    assert (str(refused), refused.budget) == ("too many", "parts")


@pytest.mark.parametrize(
    "line",
    ["# Title ##", "# C#", "# #", "#   #", "## a ## b ##  ", "#\ttab\t#", "####### seven", "#5 bolt", "#"],
)
def test_an_atx_heading_reads_as_the_pattern_it_replaced_read_it(line: str) -> None:
    """The closing sequence's rule, once a quadratic pattern, now a few lines: the same headings either way."""
    old = re.fullmatch(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*", line)
    new = document_split._ATX.fullmatch(line)
    assert bool(new) == bool(old)
    if old and new:
        assert document_split._atx_text(new.group(2) or "") == (old.group(2) or "")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([" ", "\t", "|", "-", ":", "a"]), max_size=12).map("".join))
def test_a_table_separator_is_what_the_pattern_it_replaced_matched(line: str) -> None:
    old = re.compile(r"[ \t]*\|?(?:[ \t]*:?-+:?[ \t]*\|)*[ \t]*:?-+:?[ \t]*\|?[ \t]*")
    assert document_split._is_table_separator(line) == bool(old.fullmatch(line))


# EPUB ------------------------------------------------------------------------------------------------


CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="{opf}" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""


def xhtml(body: str, title: str = "") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">'
        f"<head><title>{title}</title><style>p {{ color: red }}</style></head><body>{body}</body></html>"
    )


def opf(items: str, spine: str, title: str = "The EPUB Title", toc: str = "") -> str:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:x</dc:identifier><dc:title>{title}</dc:title><dc:language>en</dc:language>
  </metadata>
  <manifest>{items}</manifest>
  <spine{toc}>{spine}</spine>
</package>"""


def zipped(files: dict[str, str | bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        for name, content in files.items():
            z.writestr(name, content)
    return buffer.getvalue()


NAV = xhtml(
    '<nav epub:type="landmarks"><ol><li><a href="text/ch1.xhtml">Landmark label</a></li></ol></nav>'
    '<nav epub:type="toc"><h1>Contents</h1><ol>'
    '<li><a href="text/ch1.xhtml">The <em>First</em> Chapter</a>'
    '<ol><li><a href="text/ch1.xhtml#s2">A section</a></li></ol></li>'
    '<li><a href="text/ch%202.xhtml#top">Second</a></li>'
    "</ol></nav>",
    title="Nav",
)


def epub3() -> bytes:
    items = (
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="cover" href="text/cover.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="img" href="images/cover.jpg" media-type="image/jpeg"/>'
        '<item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c2" href="text/ch%202.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="notes" href="text/notes.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c3" href="text/ch3.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="c4" href="text/ch4.xhtml" media-type="application/xhtml+xml"/>'
    )
    spine = (
        '<itemref idref="cover"/><itemref idref="nav"/><itemref idref="c1"/><itemref idref="c2"/>'
        '<itemref idref="notes" linear="no"/><itemref idref="img"/><itemref idref="c3"/><itemref idref="c4"/>'
    )
    return zipped(
        {
            "META-INF/container.xml": CONTAINER.format(opf="OEBPS/content.opf"),
            "OEBPS/content.opf": opf(items, spine),
            "OEBPS/nav.xhtml": NAV,
            "OEBPS/text/cover.xhtml": xhtml('<div><img src="../images/cover.jpg" alt="Cover"/></div>', "Cover"),
            "OEBPS/images/cover.jpg": b"\xff\xd8\xff not really a jpeg",
            "OEBPS/text/ch1.xhtml": xhtml(
                "<h1>1. Beginnings</h1><p>It was a <i>dark</i> night&#8230; and&nbsp;stormy.</p>"
                "<p>Line one<br/>line two</p><script>var x = 1;</script>"
                "<ul><li>Item A</li><li>Item B</li></ul>"
                "<table><tr><th>Name</th><th>Age</th></tr><tr><td>Ann</td><td>3</td></tr></table>"
            ),
            "OEBPS/text/ch 2.xhtml": xhtml("<section><h2>Heading two</h2><div>Second text.</div></section>"),
            "OEBPS/text/notes.xhtml": xhtml("<p>Answer key, not in the reading order.</p>"),
            "OEBPS/text/ch3.xhtml": xhtml("<p>Third, titled by its heading.</p><h3>Later heading</h3>"),
            "OEBPS/text/ch4.xhtml": xhtml("<p>Fourth, titled by its head.</p>", title="Head Title"),
        }
    )


def test_an_epub3_reads_its_spine_with_nav_titles() -> None:
    doc = split_epub(epub3())
    assert doc.title == "The EPUB Title"
    assert outline(doc) == [
        (
            "The First Chapter",
            [
                *("1. Beginnings", "It was a dark night… and stormy.", "Line one", "line two"),
                *("Item A", "Item B", "Name, Age", "Ann, 3"),
            ],
        ),
        ("Second", ["Heading two", "Second text."]),
        ("Later heading", ["Third, titled by its heading.", "Later heading"]),
        ("Head Title", ["Fourth, titled by its head."]),
    ]
    assert doc.chapters[0].parts[-1].break_after == "chapter"
    assert split_epub(epub3(), title="Given", max_part_chars=10).title == "Given"
    assert split_epub(epub3()) == doc


NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head/><docTitle><text>Ignored</text></docTitle>
  <navMap>
    <navPoint id="p1" playOrder="1"><navLabel><text>Opening</text></navLabel><content src="ch1.html"/>
      <navPoint id="p1a" playOrder="2"><navLabel><text>Sub</text></navLabel><content src="ch1.html#a"/></navPoint>
    </navPoint>
    <navPoint id="p2" playOrder="3"><navLabel><text>Closing</text></navLabel><content src="ch2.html"/></navPoint>
  </navMap>
</ncx>"""


def epub2(ncx: str = NCX) -> bytes:
    items = (
        '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>'
        '<item id="t" href="titlepage.html" media-type="application/xhtml+xml"/>'
        '<item id="a" href="ch1.html" media-type="application/xhtml+xml"/>'
        '<item id="b" href="ch2.html" media-type="application/xhtml+xml"/>'
        '<item id="c" href="ch3.html" media-type="application/xhtml+xml"/>'
    )
    spine = '<itemref idref="t"/><itemref idref="a"/><itemref idref="b"/><itemref idref="c"/>'
    svg_cover = '<svg xmlns="http://www.w3.org/2000/svg"><title>svg title</title><image href="c.jpg"/></svg>'
    return zipped(
        {
            "META-INF/container.xml": CONTAINER.format(opf="content.opf"),
            "content.opf": opf(items, spine, title="Old Book", toc=' toc="ncx"').replace(
                'version="3.0"', 'version="2.0"'
            ),
            "toc.ncx": ncx,
            "titlepage.html": xhtml(svg_cover),
            "ch1.html": xhtml("<p>First words.</p>"),
            "ch2.html": xhtml("<p>Second words.</p><p>First words.</p>"),
            "ch3.html": xhtml("<div><img src='x.png'/></div><p>Untitled words.</p>"),
        }
    )


def test_an_epub2_takes_its_chapter_titles_from_the_ncx() -> None:
    doc = split_epub(epub2())
    assert doc.title == "Old Book"
    assert outline(doc) == [
        ("Opening", ["First words."]),
        ("Closing", ["Second words.", "First words."]),
        ("Chapter 3", ["Untitled words."]),
    ]


def test_a_broken_table_of_contents_costs_only_the_titles() -> None:
    data = epub2(NCX.replace("<navMap>", "<navMap><broken"))
    assert [c.title for c in split_epub(data).chapters] == ["Chapter 1", "Chapter 2", "Chapter 3"]


def minimal_epub(**overrides: str | bytes) -> bytes:
    files: dict[str, str | bytes] = {
        "META-INF/container.xml": CONTAINER.format(opf="book.opf"),
        "book.opf": opf('<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>', '<itemref idref="a"/>'),
        "a.xhtml": xhtml("<p>Words.</p>"),
    }
    files.update(overrides)
    return zipped({name: content for name, content in files.items() if content != "DROP"})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"%PDF-1.7 not a zip", "not an EPUB: the data is not a zip archive"),
        (b"", "not an EPUB: the data is not a zip archive"),
        (zipped({"a.txt": "hello"}), "not an EPUB: META-INF/container.xml, META-INF/container.xml, is missing"),
        (minimal_epub(**{"book.opf": "DROP"}), "the package document named by META-INF/container.xml, book.opf"),
        (minimal_epub(**{"META-INF/container.xml": "<container/>"}), "names no rootfile"),
        (minimal_epub(**{"book.opf": "<package><unclosed></package>"}), "book.opf is not well-formed XML"),
        (minimal_epub(**{"book.opf": "<package><manifest/></package>"}), "has no spine"),
        (minimal_epub(**{"a.xhtml": "DROP"}), "a document in the spine, a.xhtml, is missing"),
        (
            minimal_epub(**{"book.opf": '<!DOCTYPE p [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]><package>&b;</package>'}),
            "book.opf declares XML entities",
        ),
        (minimal_epub(**{"a.xhtml": xhtml('<img src="cover.jpg"/>')}), "the document has no text to read"),
    ],
)
def test_a_file_that_is_not_a_readable_epub_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=re.escape(message)):
        split_epub(data)


def test_a_zip_bomb_is_refused_before_unpacking(monkeypatch: pytest.MonkeyPatch) -> None:
    data = minimal_epub(**{"padding.bin": b"\0" * 5000})
    assert texts(split_epub(data)) == ["Words."]
    monkeypatch.setattr(epub, "MAX_UNCOMPRESSED_BYTES", 5000)
    with pytest.raises(DocumentError, match=r"unpacks to \d+ bytes, more than the 5000 allowed"):
        split_epub(data)


def test_the_epub_limit_is_200_mb() -> None:
    assert epub.MAX_UNCOMPRESSED_BYTES == 200_000_000


def test_an_epub_document_in_another_encoding_is_decoded() -> None:
    latin = '<?xml version="1.0" encoding="ISO-8859-1"?><html><body><p>Caf\xe9</p></body></html>'.encode("latin-1")
    utf16 = xhtml("<p>Na\u00efve</p>").replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    assert texts(split_epub(minimal_epub(**{"a.xhtml": latin}))) == ["Café"]
    assert texts(split_epub(minimal_epub(**{"a.xhtml": utf16}))) == ["Naïve"]


@pytest.mark.parametrize(
    ("text", "chapters"),
    [
        # One top heading, first, over lower ones: the book's title; chapters are the next level.
        (
            "# Book\n\nIntro.\n\n## One\n\nA.\n\n## Two\n\nB.",
            [("Book", ["Book", "Intro."]), ("One", ["One", "A."]), ("Two", ["Two", "B."])],
        ),
        # Two top headings: they are the chapters, lower ones stay paragraphs.
        ("# A\n\n## x\n\nA.\n\n# B\n\nB.", [("A", ["A", "x", "A."]), ("B", ["B", "B."])]),
        # The top heading is not the first heading: chapters at the top level as usual.
        ("## Pre\n\nP.\n\n# Main\n\nM.", [("Pre", ["Pre", "P."]), ("Main", ["Main", "M."])]),
    ],
)
def test_a_single_title_heading_over_lower_headings_names_the_book_not_its_only_chapter(text, chapters):
    document = split_text(text, "markdown")
    assert [(c.title, [p.text for p in c.parts]) for c in document.chapters] == chapters


def test_regression_a_long_run_of_full_stops_became_parts_with_nothing_to_speak():
    """A run longer than a part was cut into parts of only full stops, each a job the API refuses (422 for the
    whole document). The cut pieces without a word go; the words keep their part."""
    document = split_text("Stop" + "." * 5000 + " Go on.", "markdown", max_part_chars=1500)
    assert texts(document)
    assert all(has_words(text) for text in texts(document))
    assert "Stop" in texts(document)[0]
    assert "Go on." in texts(document)[-1]
