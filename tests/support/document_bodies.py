"""Hypothesis strategies of what a client may POST to /v1/documents: JSON bodies, text uploads, EPUBs, noise.

Each draw is a :class:`DocumentBody`, sent as the route takes it (``request``: httpx's arguments) or handed
to the parser as the route would (``received``). The strategies lean on the inputs that broke parsers
before and on the shapes the parser's rules name: Markdown's blocks and inlines at their edges, odd
encodings and control characters, JSON that is not the route's, zips that lie about their sizes, are cut
short, corrupt, encrypted or bombs, OPF and container files that point nowhere, XHTML nested deep or not
well-formed, XML entities and DTDs, and plain random bytes.
"""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from producers.document_parsing import Received

# Lines at the edges of the Markdown rules (producers.document_split, rule 6) and of the plain-text ones (rule 7).
MARKDOWN_LINES = (
    "# Title",
    "#",
    "####### seven",
    "## Closed ##",
    "# C#",
    "Setext\n===",
    "Setext two\n---",
    "---",
    "***",
    "* * *",
    "___",
    "\u2042",
    "```",
    "```python",
    "~~~~",
    "    indented code",
    "\tcode with a tab",
    "> a quote",
    "> > a quote in a quote",
    ">",
    "- item",
    "- [ ] task",
    "* [x] done",
    "+",
    "123456789) nine digits",
    "1234567890. ten digits",
    "| a | b |",
    "|---|:-:|",
    "|",
    "||",
    "[ref]: http://example.com",
    "[^1]: a footnote",
    "![an image](http://example.com/x.png)",
    "[a link](http://example.com (and a title))",
    "[unclosed link(",
    "<!-- a comment",
    "-->",
    "<script>alert(1)",
    "</script>",
    "<style>",
    "<b>bold <i>italic</b></i>",
    "<br/><p><div>",
    "&amp; &#0; &#x110000; &#xD800; &bogus; &#99999999999;",
    "**bold",
    "__under__score__",
    "~~struck~~",
    "*a*b*c*",
    "`code` ``more`` ```",
    "\\*escaped\\*",
    "<http://example.com/auto>",
    "<a@b.c>",
    "title: From the front matter",
    "...",
    "Chapter 1",
    "CHAPTER IV",
    "Chapter One: The Beginning",
    "chapter twenty-one",
    "Mr. Smith met Dr. Jones, e.g. at 5 a.m. in the U.S. and... then?",
    "A sentence. Another! A third? Yes\u2026",
    "\u201cQuoted.\u201d (Bracketed.) [Closed.]",
    "\U0001f600\U0001f389\U0001f600",
    "\u200b\u00ad\ufeff\u2060",
    "e\u0301\u0301\u0301",
    "\u202eright to left\u202c",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea",
    "\u65e5\u672c\u8a9e\u306e\u6587\u3002\u3053\u308c\u306f\u3002",
    "\x00\x01\x07\x1b[31m",
    "\r\n",
    "\r",
    "",
    " ",
)
RUNS = (
    ".",
    "!",
    "?",
    "\u2026",
    ",",
    "-",
    "#",
    "*",
    "_",
    "`",
    "~",
    "|",
    ">",
    "[",
    "(",
    "<",
    "&",
    " ",
    "a",
    "a ",
    "\u0301",
)
ODD_CHARS = "".join(dict.fromkeys("".join(MARKDOWN_LINES) + "".join(RUNS) + "\t\n\u2028\u2029\x85\x0b\x0c"))
ENCODINGS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "shift_jis", "koi8-r")
DECLARED_ENCODINGS = (
    "utf-8",
    "utf-16",
    "shift_jis",
    "utf-7",
    "idna",
    "unicode_escape",
    "x-unknown",
    "rot13",
    "utf-8-sig",
)
VOICES = ("af_heart", "af_heart:2,bf_emma:1", "alloy", "", "x" * 300, "af_heart:" + "9" * 12)  # odd ones: unknown here
FORMATS = ("wav", "mp3", "pcm", "WAV ", "opus", "flac", "", "wav\x00")
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@dataclass(frozen=True)
class DocumentBody:
    """One submission: a JSON body (``filename`` None), or an upload of ``content`` named ``filename``."""

    kind: str
    content: bytes
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def request(self) -> dict[str, Any]:
        """httpx's keyword arguments to POST it."""
        if self.filename is None:
            return {"content": self.content, "headers": {"content-type": self.content_type}}
        return {"files": {"file": (self.filename, self.content, self.content_type)}, "data": self.fields}

    def received(self) -> Received:
        """What the route hands the parser (producers.documents._received)."""
        return (
            Received(self.content, self.filename, self.fields) if self.filename is not None else Received(self.content)
        )


def _weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """One of the strategies, each as often as its weight says (``st.one_of`` draws each distinct strategy
    equally often, whatever it is given twice)."""
    return st.sampled_from([strategy for weight, strategy in choices for _ in range(weight)]).flatmap(lambda s: s)


def _run() -> st.SearchStrategy[str]:
    """A long run of one character or pair (the shapes that made backtracking patterns quadratic)."""
    return st.builds(lambda piece, n: piece * n, st.sampled_from(RUNS), st.integers(1, 5000))


def markdown_texts() -> st.SearchStrategy[str]:
    line = st.one_of(
        st.sampled_from(MARKDOWN_LINES),
        st.text(alphabet=ODD_CHARS, max_size=60),
        st.text(max_size=40),
        _run(),
        st.builds(lambda depth: "> " * depth + "deep", st.integers(1, 500)),
        st.builds(lambda depth: "  " * depth + "- nested", st.integers(1, 200)),
    )
    body = st.lists(line, max_size=25).map("\n".join)
    front = st.sampled_from(("", "---\ntitle: 'Front'\n---\n", "---\ntitle:\n", "\ufeff---\n...\n"))
    return st.builds(str.__add__, front, body)


def _options(voice: str) -> st.SearchStrategy[dict[str, Any]]:
    """The request's options: most often valid, so that the document itself is read; else one or more odd."""
    good = st.fixed_dictionaries(
        {"voice": st.just(voice)},
        optional={
            "speed": st.sampled_from((0.5, 1.0, 2.0)),
            "lang": st.sampled_from(("en-us", "en-gb")),
            "format": st.sampled_from(("wav", "mp3", "pcm")),
            "sample_rate": st.sampled_from((16000, 24000, 48000)),
            "normalize": st.booleans(),
            "priority": st.sampled_from(("batch", "interactive")),
            "title": st.one_of(st.none(), st.text(max_size=20)),
        },
    )
    odd = st.fixed_dictionaries(
        {},
        optional={
            "voice": st.sampled_from(VOICES),
            "speed": st.one_of(st.sampled_from((0.49, 2.01, 0, -1, 1e308)), st.text(max_size=5)),
            "lang": st.sampled_from(("ja", "xx", "", "EN-US")),
            "format": st.sampled_from(FORMATS),
            "sample_rate": st.sampled_from((8000, 0, -1, 2**63, 44100)),
            "normalize": st.sampled_from(("yes", 1, None)),
            "priority": st.sampled_from(("urgent", "")),
            "title": st.just("t" * 501),
            "engine": st.sampled_from(("bench-sleep", "kokoro-onnx", "nope")),
            "unknown_field": _JSON_VALUES,
        },
    )
    return _weighted((5, good), (1, st.builds(lambda g, o: {**g, **o}, good, odd)))


def json_bodies(voice: str) -> st.SearchStrategy[DocumentBody]:
    valid = st.builds(
        lambda text, markup, options: {"text": text, **({"markup": markup} if markup is not None else {}), **options},
        markdown_texts(),
        _mostly(None, ("markdown", "plain", "epub", "Markdown", "", "html")),
        _options(voice),
    )
    documents = _weighted((8, valid), (1, valid.map(lambda d: {**d, "text": 7})), (1, _JSON_VALUES))

    def encode(document: Any, encoding: str, cut: int | None) -> DocumentBody:
        raw = _encoded(json.dumps(document, ensure_ascii=False), encoding)
        return DocumentBody(f"json ({encoding}{', cut short' if cut is not None else ''})", raw[:cut])

    encoded = st.builds(
        encode,
        documents,
        st.sampled_from(("utf-8", "utf-8", "utf-8", "utf-16", "latin-1")),
        _weighted((4, st.none()), (1, st.integers(0, 200))),
    )
    nested = st.builds(
        lambda depth, bracket: DocumentBody("json (nested)", (bracket * depth).encode()),
        st.integers(100, 200_000),
        st.sampled_from(("[", '{"text":', '{"a":[')),
    )
    noise = st.builds(
        lambda data, kind: DocumentBody("json (random bytes)", data, content_type=kind),
        st.binary(max_size=2048),
        st.sampled_from(("application/json", "text/plain", "")),
    )
    return _weighted((6, encoded), (1, nested), (1, noise))


def _fields(voice: str) -> st.SearchStrategy[dict[str, str]]:
    return _options(voice).map(
        lambda options: {k: v if isinstance(v, str) else json.dumps(v) for k, v in options.items()}
    )


def text_uploads(voice: str) -> st.SearchStrategy[DocumentBody]:
    names = st.sampled_from(
        (
            "book.md",
            "book.markdown",
            "notes.txt",
            "README",
            "X.MD",
            "a.epub.md",
            "\u00e9t\u00e9.md",
            "n" * 300 + ".md",
            "",
        )
    )

    def upload(text: str, encoding: str, name: str, fields: dict[str, str]) -> DocumentBody:
        return DocumentBody(f"upload ({encoding})", text.encode(encoding, errors="replace"), name, fields, "text/plain")

    noise = st.builds(
        lambda data, name, fields: DocumentBody("upload (random bytes)", data, name, fields, "text/plain"),
        st.binary(max_size=2048),
        names,
        _fields(voice),
    )
    return _weighted(
        (4, st.builds(upload, markdown_texts(), st.sampled_from(ENCODINGS), names, _fields(voice))), (1, noise)
    )


# EPUBs: every piece drawn from good and bad versions, assembled into a zip, and the zip itself mangled.

_CONTAINERS = (
    '{declaration}<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="{opf}" media-type="application/oebps-package+xml"/></rootfiles></container>',
    "<container><rootfiles><rootfile/></rootfiles></container>",
    "<container><rootfiles><rootfile full-path='{opf}'>",
    '<!DOCTYPE c [<!ENTITY e "boom">]><container>&e;</container>',
    '<?xml version="1.0" encoding="utf-7"?><container/>',
    "not xml at all",
)
_OPF_PATHS = ("content.opf", "OEBPS/content.opf", "../content.opf", "/content.opf", "a b%20c.opf", "")
_BLOCK_TAGS = (
    "p",
    "div",
    "h1",
    "h2",
    "h3",
    "li",
    "ul",
    "blockquote",
    "table",
    "tr",
    "td",
    "th",
    "br",
    "section",
    "pre",
)
_OTHER_TAGS = ("b", "i", "span", "a", "script", "style", "svg", "template", "head", "title", "body", "html", "x:odd")
_ODD_MARKUP = (
    "<![CDATA[ cdata ]]>",
    "<![x",
    "<!-- unclosed comment",
    "<!DOCTYPE html>",
    '<!DOCTYPE html [<!ENTITY e "x">]>',
    "&amp;&lt;&#0;&#x110000;&unknown;&#xD800;",
    "<?php echo 1 ?>",
    "</p></p></div>",
    "<p <p <p",
    "<a href='chapter2.xhtml#x'>a link</a>",
    "\x00\x0b",
)


_DECLARATIONS = tuple(f'<?xml version="1.0" encoding="{e}"?>' for e in DECLARED_ENCODINGS)
_NAVS = (
    b'<nav epub:type="toc"><ol><li><a href="c0.xhtml">Opening</a></li><li><a href="">x</a></li></ol></nav>',
    b"<nav><nav><a href='c1.xhtml'>",
    b'<nav epub:type="toc"><a href="c0.xhtml#frag">' + b"<b>" * 500 + b"Title</a>",
)


def _mostly(good: Any, odd: Sequence[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else one of ``odd``: a book with every piece odd at once is refused at its
    first, and the pieces after it are never read."""
    return st.sampled_from((good,) * 9 * len(odd) + tuple(odd))


def _xhtml() -> st.SearchStrategy[str]:
    words = st.lists(st.sampled_from(MARKDOWN_LINES[-30:-6]), min_size=1, max_size=3).map(" ".join)
    text = _weighted(
        (3, words), (1, st.text(max_size=30)), (1, st.sampled_from(MARKDOWN_LINES)), (1, st.sampled_from(_ODD_MARKUP))
    )

    def element(children: list[str], tag: str, close: bool) -> str:
        return f"<{tag}>{''.join(children)}" + (f"</{tag}>" if close else "")

    tree = st.recursive(
        text,
        lambda inner: st.builds(
            element, st.lists(inner, max_size=4), st.sampled_from(_BLOCK_TAGS + _OTHER_TAGS), st.booleans()
        ),
        max_leaves=30,
    )
    deep = st.builds(
        lambda tag, depth: f"<{tag}>" * depth + "deep text" + f"</{tag}>" * depth,
        st.sampled_from(("div", "p", "b", "li", "svg")),
        st.integers(100, 20_000),
    )
    return st.builds(
        lambda head, body: head + "<html><body>" + body + "</body></html>",
        _weighted((3, st.just("")), (1, st.sampled_from(_DECLARATIONS))),
        _weighted((5, tree), (1, deep)),
    )


def _encoded(text: str, encoding: str) -> bytes:
    """``text`` in ``encoding``, what it cannot say replaced (lone surrogates kept in UTF-8)."""
    return text.encode("utf-8", errors="surrogatepass") if encoding == "utf-8" else text.encode(encoding, "replace")


def _package(draw: st.DrawFn, pages: int, nav: bool, bomb: bool) -> str:
    """The OPF: a manifest of the pages (with odd media types now and then), a spine naming them (and ids that
    are missing, and now and then one chapter 200 times), a title, an XML declaration or an internal subset."""
    media = _mostly("application/xhtml+xml", ("text/html", "image/png", ""))
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="{draw(media)}"/>' for i in range(pages))
    if nav:
        items += '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
    if bomb:
        items += '<item id="bomb" href="bomb.xhtml" media-type="application/xhtml+xml"/>'
    ids = [f"c{i}" for i in range(pages)] + ["bomb"] * bomb
    refs = draw(_weighted((3, st.just(ids)), (1, st.lists(st.sampled_from([*ids, "missing", "nav"]), max_size=8))))
    linear = _mostly("", (' linear="no"', ' linear=" yes "'))
    spine = "".join(f'<itemref idref="{ref}"{draw(linear)}/>' for ref in refs) * draw(_mostly(1, (200,)))
    title = draw(_mostly("<dc:title>A Book</dc:title>", ("<dc:title/>", "", "<dc:title>&amp;</dc:title>")))
    head = draw(_mostly("", (*_DECLARATIONS, '<!DOCTYPE p [<!ENTITY x "y">]>')))
    package = (
        f'{head}<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<metadata>{title}</metadata><manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    return str(
        draw(
            _mostly(
                package,
                (
                    f"<package><manifest>{items}</manifest></package>",  # no spine
                    f"<package><manifest>{items}</manifest><spine>{spine}",  # cut short
                ),
            )
        )
    )


@st.composite
def _epub_files(draw: st.DrawFn) -> dict[str, bytes]:
    opf_path = draw(_mostly("content.opf", _OPF_PATHS))
    pages = draw(st.lists(st.tuples(_xhtml(), _mostly("utf-8", ("utf-16", "latin-1"))), min_size=0, max_size=4))
    nav, bomb = draw(st.booleans()), draw(_mostly(False, (True,)))
    files = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": str(draw(_mostly(_CONTAINERS[0], _CONTAINERS[1:])))
        .format(opf=opf_path, declaration=draw(_mostly('<?xml version="1.0"?>', _DECLARATIONS)))
        .encode(),
    }
    if opf_path.lstrip("/") and draw(_mostly(True, (False,))):  # now and then the package document is missing
        files[opf_path.lstrip("/")] = _package(draw, len(pages), nav, bomb).encode()
    for i, (page, encoding) in enumerate(pages):
        files[f"c{i}.xhtml"] = _encoded(page, encoding)
    if nav:
        files["nav.xhtml"] = draw(st.sampled_from(_NAVS))
    if bomb:  # a chapter that unpacks to far more than it weighs (deflated: 1,000 to 1)
        files["bomb.xhtml"] = b"<p>" + b"a " * draw(st.sampled_from((2**19, 3 * 2**20))) + b"</p>"
    return files


def _zip(files: dict[str, bytes], method: int, duplicate: bool) -> bytes:
    data = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(data, "w", compression=method) as book:
        warnings.simplefilter("ignore")  # a member named twice is meant
        for name, content in files.items():
            book.writestr(name, content)
        if duplicate and files:
            name = next(iter(files))
            with_dupe = zipfile.ZipInfo(name)
            book.writestr(with_dupe, b"<p>a second member of the same name</p>")
    return data.getvalue()


def _central_entries(raw: bytes) -> list[int]:
    """Where the central directory's file headers start."""
    at, found = 0, []
    while (at := raw.find(b"PK\x01\x02", at)) != -1:
        found.append(at)
        at += 4
    return found


def _mangle(raw: bytes, how: str, at: int, value: int) -> bytes:
    """The zip ``raw`` with one lie or one corruption in it."""
    entries = _central_entries(raw)
    if how == "as made" or not raw:
        return raw
    if how == "cut short":
        return raw[: at % len(raw)]
    if how == "byte flipped":
        i = at % len(raw)
        return raw[:i] + bytes([raw[i] ^ (value & 0xFF or 1)]) + raw[i + 1 :]
    if not entries:
        return raw
    entry = entries[at % len(entries)]
    if how == "declared size":  # the uncompressed size in the central directory: huge, or zero
        return raw[: entry + 24] + struct.pack("<I", value & 0xFFFFFFFF) + raw[entry + 28 :]
    if how == "encrypted flag":
        flags = struct.unpack_from("<H", raw, entry + 8)[0] | 1
        return raw[: entry + 8] + struct.pack("<H", flags) + raw[entry + 10 :]
    if how == "unknown method":
        return raw[: entry + 10] + struct.pack("<H", 99) + raw[entry + 12 :]
    return raw


def epubs(voice: str) -> st.SearchStrategy[DocumentBody]:
    methods = st.sampled_from(
        (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)
    )
    mangling = st.sampled_from(
        (
            "as made",
            "as made",
            "as made",
            "cut short",
            "byte flipped",
            "declared size",
            "encrypted flag",
            "unknown method",
        )
    )
    sizes = st.sampled_from((0, 1, 2**31, 0xFFFFFFFF, 199_999_999))

    def book(
        files: dict[str, bytes],
        method: int,
        duplicate: bool,
        how: str,
        at: int,
        value: int,
        fields: dict[str, str],
        name: str,
    ) -> DocumentBody:
        raw = _mangle(_zip(files, method, duplicate), how, at, value)
        return DocumentBody(f"epub ({how})", raw, name, fields, "application/epub+zip")

    names = st.sampled_from(("book.epub", "BOOK.EPUB", "x.epub"))
    made = st.builds(
        book, _epub_files(), methods, st.booleans(), mangling, st.integers(0, 2**20), sizes, _fields(voice), names
    )
    noise = st.builds(
        lambda data, fields: DocumentBody("epub (random bytes)", data, "book.epub", fields, "application/epub+zip"),
        st.one_of(st.binary(max_size=4096), st.binary(max_size=64).map(lambda b: b"PK\x03\x04" + b)),
        _fields(voice),
    )
    return _weighted((4, made), (1, noise))


def document_bodies(voice: str) -> st.SearchStrategy[DocumentBody]:
    """Every kind, EPUBs and JSON most often (they have the most rules to break)."""
    return _weighted((2, json_bodies(voice)), (2, epubs(voice)), (1, text_uploads(voice)))
