"""Reading an EPUB (2 or 3) into chapters of paragraphs, for :func:`producers.document_split.split_epub`.

Stdlib only. An upload is untrusted input; the rules:

1. The file is a zip whose members declare at most ``MAX_UNCOMPRESSED_BYTES`` (200 MB) in all: a larger total
   is refused before anything is unpacked. What is *read* counts against ``max_unpacked_bytes`` (the API's 64 MiB,
   ``voxlog.composition.configs.MAX_EPUB_UNPACKED_BYTES``): every member read, and a spine document named twice
   twice; reading stops with :class:`~producers.document_split.DocumentTooLarge` at that limit, whatever the members
   declare (zipfile never yields more of a member than it declares). Counting declared sizes once let a 2.4 KB
   file whose spine names one 1 MB chapter 60 times expand to 63 million characters.
2. ``META-INF/container.xml`` names the OPF package document; its manifest and spine give the reading
   order. Spine items marked ``linear="no"`` (pop-ups, answer keys), the navigation document
   (``properties="nav"``) and items that are not XHTML/HTML are skipped.
3. The book title is the OPF's first ``dc:title``.
4. Each remaining spine document is one chapter; one with no text (a cover image page) is dropped by
   the caller. Its paragraphs are the text of its block elements (``p``, ``div``, ``h1``-``h6``, ``li``,
   ``blockquote``, ``tr`` with its cells joined by ", ", ...), ``br`` also ending one; ``head``,
   ``script``, ``style``, ``template`` and ``svg`` are not read. Reading stops as soon as the text read is past
   the limits' characters or its chapters past their number.
5. A chapter's title is the EPUB 3 navigation document's (``nav`` with ``epub:type="toc"``) label for
   that document, else the EPUB 2 NCX's (``toc.ncx`` navPoint) label, else the document's first ``h1``,
   ``h2`` or ``h3`` text, else its ``<title>``, else none (the caller numbers it).
6. Refused with :class:`~producers.document_split.DocumentError` saying why: a file that is not a zip; a member
   that cannot be unpacked (a bad CRC, corrupt deflate, LZMA or bzip2 data, an unknown method, encryption); a
   missing container or package document; XML that is not well-formed; a file (XHTML or XML) that declares an
   encoding no book is written in (``idna``, ``utf-7``, ``unicode_escape``, ...; an encoding Python does not
   know is read as UTF-8, which EPUB requires anyway); HTML that the parser cannot take.
7. No DTD, entity or external reference is ever resolved. The XML files (container, package, NCX) are parsed
   by expat (given text decoded by rule 6 when the file declares an encoding), as every untrusted XML is
   (:mod:`contracts.safe_xml`), with an internal DTD subset
   (where entities are declared: "billion laughs", XXE), any entity declaration, and any reference to an
   entity the document does not define all refused, in any encoding (UTF-16 too); a DOCTYPE naming an
   external DTD (as NCX files do) is allowed and never read: expat reads no file or URL itself, and parameter
   entities (the external subset) are never parsed. The XHTML documents are read by :mod:`html.parser`, which
   knows only HTML's own character references; one declaring entities is refused as well.
"""

from __future__ import annotations

import codecs
import io
import lzma
import posixpath
import re
import zipfile
import zlib
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Final, NoReturn
from urllib.parse import unquote, urldefrag
from xml.etree import ElementTree
from xml.parsers import expat

from contracts.safe_xml import safe_parser
from producers.document_split import NO_LIMITS, DocumentError, DocumentTooLarge, SplitLimits

MAX_UNCOMPRESSED_BYTES: Final = 200_000_000
_CONTAINER: Final = "META-INF/container.xml"
_HTML_TYPES: Final = frozenset({"application/xhtml+xml", "text/html"})
_NCX_TYPE: Final = "application/x-dtbncx+xml"
_DECLARATION_BYTES: Final = 1024  # where an XML declaration may be: the encoding is looked for there only
_XML_ENCODING: Final = re.compile(rb"(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding=[\"']([A-Za-z0-9._-]+)[\"']")
_UNPACK_ERRORS: Final = (
    zipfile.BadZipFile,  # a bad CRC, a bad header
    zlib.error,  # corrupt deflate data
    lzma.LZMAError,
    EOFError,  # a compressed stream cut short
    OSError,  # corrupt bzip2 data
    NotImplementedError,  # a compression method zipfile lacks
    RuntimeError,  # an encrypted member
    ValueError,
)
# What a book's documents are written in: EPUB requires UTF-8 or UTF-16; older files use 8-bit and CJK ones.
_BOOK_ENCODINGS: Final = frozenset(
    codecs.lookup(name).name
    for name in (
        *("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii", "latin-1"),
        *(f"iso8859-{n}" for n in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16)),
        *(f"cp{n}" for n in (874, 1250, 1251, 1252, 1253, 1254, 1255, 1256, 1257, 1258)),
        *("koi8-r", "koi8-u", "mac-roman", "shift_jis", "cp932", "euc_jp", "iso2022_jp", "gb2312", "gbk"),
        *("gb18030", "big5", "big5hkscs", "euc_kr", "cp949"),
    )
)

_TITLE_HEADINGS: Final = frozenset({"h1", "h2", "h3"})
_BLOCKS: Final = (
    _TITLE_HEADINGS
    | {"h4", "h5", "h6", "p", "div", "br", "hr", "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "body"}
    | {"address", "article", "aside", "caption", "figcaption", "figure", "footer", "header", "main", "nav"}
    | {"section", "table", "thead", "tbody", "tfoot", "tr"}
)
_CELLS: Final = frozenset({"td", "th"})
_UNREAD: Final = frozenset({"script", "style", "template", "svg"})


@dataclass(frozen=True)
class Book:
    title: str | None
    chapters: tuple[tuple[str | None, tuple[str, ...]], ...]  # (title or None, paragraphs), in spine order


@dataclass(frozen=True)
class _Item:
    path: str
    media_type: str
    properties: frozenset[str]


def read_epub(
    data: bytes,
    *,
    max_unpacked_bytes: int | None = None,
    limits: SplitLimits = NO_LIMITS,
) -> Book:
    """The title and spine documents of an EPUB, or :class:`DocumentError` saying why it is not one."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as e:
        raise DocumentError(f"not an EPUB: the data is not a zip archive ({e})") from None
    except NotImplementedError as e:  # a zip format version zipfile cannot read, said by its directory
        raise DocumentError(f"not an EPUB this service can read: {e}") from None
    with archive:
        total = sum(info.file_size for info in archive.infolist())
        if total > MAX_UNCOMPRESSED_BYTES:
            raise DocumentError(
                f"the EPUB unpacks to {total} bytes, more than the {MAX_UNCOMPRESSED_BYTES} allowed; split the book"
            )
        reader = _Reader(archive, max_unpacked_bytes)
        container = reader.xml(_CONTAINER, "META-INF/container.xml")
        opf_path = next((el.get("full-path", "") for el in container.iter() if _local(el.tag) == "rootfile"), "")
        if not opf_path:
            raise DocumentError(f"not an EPUB: {_CONTAINER} names no rootfile (the OPF package document)")
        opf = reader.xml(opf_path, "the package document named by META-INF/container.xml")
        return _book(reader, opf, posixpath.dirname(opf_path), limits)


class _Reader:
    """The archive's members, every read counted against the unpacked-bytes budget."""

    def __init__(self, archive: zipfile.ZipFile, budget: int | None) -> None:
        self._archive = archive
        self._budget = budget
        self._left = budget

    def read(self, name: str, what: str) -> bytes:
        try:
            info = self._archive.getinfo(name)
        except KeyError:
            raise DocumentError(f"not an EPUB: {what}, {name}, is missing from the archive") from None
        try:
            with self._archive.open(info) as member:
                data = member.read() if self._left is None else member.read(self._left + 1)
        except _UNPACK_ERRORS as e:
            raise DocumentError(f"not a readable EPUB: {name} cannot be unpacked ({e})") from None
        if self._left is not None:
            if len(data) > self._left:
                raise DocumentTooLarge(
                    f"reading the EPUB unpacks more than {self._budget} bytes (every document the spine names"
                    " counts each time it is named), the most one may: split the book",
                    "unpacked_bytes",
                )
            self._left -= len(data)
        return data

    def xml(self, name: str, what: str) -> ElementTree.Element:
        return parse_xml(self.read(name, what), name)


def parse_xml(raw: bytes, name: str) -> ElementTree.Element:
    """``raw`` as an element tree, with no DTD, entity or external reference resolved (rule 7)."""

    def refuse(what: str) -> NoReturn:
        raise DocumentError(f"not a readable EPUB: {name} {what}")

    builder = ElementTree.TreeBuilder()
    parser = safe_parser(refuse, namespace_separator="}")
    parser.buffer_text = True
    parser.StartElementHandler = builder.start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(_declared_as_text(raw, name), True)
        return builder.close()
    except expat.ExpatError as e:
        raise DocumentError(f"not a readable EPUB: {name} is not well-formed XML ({e})") from None


def _declared_as_text(raw: bytes, name: str) -> bytes | str:
    """What expat is given: ``raw`` decoded by the documents' own rule (:func:`_decode`) when it declares an
    encoding, else as it is (UTF-8, or UTF-16 told by its first bytes). Expat takes a declared encoding only if
    it is single-byte: ``shift_jis`` or ``utf-7`` raised ValueError, an unknown name LookupError (500s)."""
    return _decode(raw, name) if _XML_ENCODING.match(raw[:_DECLARATION_BYTES]) else raw


def _book(reader: _Reader, opf: ElementTree.Element, base: str, limits: SplitLimits) -> Book:
    manifest = {
        el.get("id", ""): _Item(
            _resolve(base, el.get("href", "")), el.get("media-type", ""), frozenset(el.get("properties", "").split())
        )
        for el in opf.iter()
        if _local(el.tag) == "item"
    }
    title = next((el.text or "" for el in opf.iter() if _local(el.tag) == "title"), None)
    spine = next((el for el in opf.iter() if _local(el.tag) == "spine"), None)
    if spine is None:
        raise DocumentError("not an EPUB: the package document has no spine (reading order)")
    ncx = manifest.get(spine.get("toc", "")) or next((i for i in manifest.values() if i.media_type == _NCX_TYPE), None)
    nav = next((i for i in manifest.values() if "nav" in i.properties), None)
    labels = {**(_ncx_labels(reader, ncx.path) if ncx else {}), **(_nav_labels(reader, nav.path) if nav else {})}
    chapters: list[tuple[str | None, tuple[str, ...]]] = []
    chars = 0
    for ref in spine:
        item = manifest.get(ref.get("idref", ""))
        if _local(ref.tag) != "itemref" or item is None or ref.get("linear", "yes").strip() == "no":
            continue
        if item is nav or item.media_type not in _HTML_TYPES:
            continue
        page = _Page(item.path)
        _feed(page, reader.read(item.path, "a document in the spine"), item.path)
        chapters.append((labels.get(item.path) or page.heading or page.title, tuple(page.paragraphs)))
        chars += sum(len(" ".join(paragraph.split())) for paragraph in page.paragraphs)
        limits.check_chars(chars)  # a spine naming one large chapter many times stops here, not after it all
        if limits.chapters is not None and sum(1 for _, text in chapters if text) > limits.chapters:
            raise DocumentTooLarge(
                f"the EPUB has more than {limits.chapters} chapters, the most a document may have: split it",
                "chapters",
            )
    return Book(title, tuple(chapters))


def _feed(parser: HTMLParser, raw: bytes, name: str) -> None:
    try:
        parser.feed(_decode(raw, name))
        parser.close()
    except AssertionError as e:  # html.parser's way of refusing some malformed markup ("<![x")
        raise DocumentError(f"not a readable EPUB: {name} cannot be read as HTML ({e})") from None


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _resolve(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(urldefrag(href).url)))


def _decode(raw: bytes, name: str) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    declared = _XML_ENCODING.match(raw[:_DECLARATION_BYTES])
    encoding = declared.group(1).decode("ascii") if declared else "utf-8"
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:  # an encoding Python does not know: UTF-8 is what EPUB requires anyway
        codec = "utf-8"
    if codec not in _BOOK_ENCODINGS:
        raise DocumentError(
            f"not a readable EPUB: {name} declares the encoding {encoding!r}, which is not one a book is written"
            " in: save it as UTF-8"
        )
    return raw.decode("utf-8-sig" if codec == "utf-8" else codec, errors="replace")


def _ncx_labels(reader: _Reader, path: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    try:
        ncx = reader.xml(path, "the NCX table of contents")
    except DocumentTooLarge:
        raise
    except DocumentError:
        return labels  # a broken table of contents costs the titles, not the book
    base = posixpath.dirname(path)
    for point in (el for el in ncx.iter() if _local(el.tag) == "navPoint"):
        label = next((t.text or "" for c in point if _local(c.tag) == "navLabel" for t in c.iter() if t is not c), "")
        src = next((c.get("src", "") for c in point if _local(c.tag) == "content"), "")
        if label.strip() and src:
            labels.setdefault(_resolve(base, src), label)
    return labels


def _nav_labels(reader: _Reader, path: str) -> dict[str, str]:
    nav = _Nav(path)
    try:
        _feed(nav, reader.read(path, "the navigation document"), path)
    except DocumentTooLarge:
        raise
    except DocumentError:
        return {}
    base = posixpath.dirname(path)
    labels: dict[str, str] = {}
    for href, label in nav.links:
        if label.strip():
            labels.setdefault(_resolve(base, href), label)
    return labels


class _Markup(HTMLParser):
    """An XHTML document of the book: HTML's own character references only, and no DTD of its own."""

    def __init__(self, name: str) -> None:
        super().__init__(convert_charrefs=True)
        self._name = name

    def handle_decl(self, decl: str) -> None:
        if decl[:7].lower() == "doctype" and "[" in decl:  # an internal subset: where entities are declared
            raise DocumentError(
                f"not a readable EPUB: {self._name} declares XML entities or a DTD of its own, which are refused:"
                " none is ever resolved"
            )


class _Page(_Markup):
    """Paragraphs, first h1-h3 text and head title of one XHTML document."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.paragraphs: list[str] = []
        self.heading: str | None = None
        self.title: str | None = None
        self._text: list[str] = []
        self._has_text = False  # a flag, not a join per table cell
        self._heading: list[str] | None = None
        self._title: list[str] | None = None
        self._unread = 0
        self._head = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _UNREAD:
            self._unread += 1
        elif tag == "head":
            self._head += 1
        elif tag == "title" and self._head:
            self._title = []
        elif tag in _BLOCKS:
            self._flush()
        if tag in _CELLS and self._has_text:
            self._text.append(", ")
        if tag in _TITLE_HEADINGS and self.heading is None:
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag in _UNREAD:
            self._unread = max(0, self._unread - 1)
        elif tag == "head":
            self._head = max(0, self._head - 1)
        elif tag == "title" and self._title is not None:
            self.title = self.title or " ".join("".join(self._title).split()) or None
            self._title = None
        elif tag in _BLOCKS:
            self._flush()
        if tag in _TITLE_HEADINGS and self._heading is not None:
            self.heading = " ".join("".join(self._heading).split()) or None  # an image-only heading: the next
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._unread:
            return
        if self._head:
            if self._title is not None:
                self._title.append(data)
            return
        self._text.append(data)
        self._has_text = self._has_text or not data.isspace()
        if self._heading is not None:
            self._heading.append(data)

    def close(self) -> None:
        super().close()
        self._flush()

    def _flush(self) -> None:
        if self._text:
            self.paragraphs.append("".join(self._text))
            self._text, self._has_text = [], False


class _Nav(_Markup):
    """(href, label) of each link inside the ``nav epub:type="toc"`` of an EPUB 3 navigation document."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.links: list[tuple[str, str]] = []
        self._depth = 0  # nav elements open, counting from the toc one
        self._href: str | None = None
        self._label: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "nav" and (self._depth or "toc" in (dict(attrs).get("epub:type") or "").split()):
            self._depth += 1
        elif tag == "a" and self._depth:
            self._href, self._label = dict(attrs).get("href") or "", []

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav" and self._depth:
            self._depth -= 1
        elif tag == "a" and self._href is not None:
            if self._href:
                self.links.append((self._href, " ".join("".join(self._label).split())))
            self._href = None

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._label.append(data)
