"""Reading an EPUB (2 or 3) into chapters of paragraphs, for :func:`producers.document_split.split_epub`.

Stdlib only. The rules:

1. The file is a zip whose uncompressed members add up to at most ``MAX_UNCOMPRESSED_BYTES`` (200 MB):
   a larger total is refused before anything is unpacked, so a zip bomb costs nothing.
2. ``META-INF/container.xml`` names the OPF package document; its manifest and spine give the reading
   order. Spine items marked ``linear="no"`` (pop-ups, answer keys), the navigation document
   (``properties="nav"``) and items that are not XHTML/HTML are skipped.
3. The book title is the OPF's first ``dc:title``.
4. Each remaining spine document is one chapter; one with no text (a cover image page) is dropped by
   the caller. Its paragraphs are the text of its block elements (``p``, ``div``, ``h1``-``h6``, ``li``,
   ``blockquote``, ``tr`` with its cells joined by ", ", ...), ``br`` also ending one; ``head``,
   ``script``, ``style``, ``template`` and ``svg`` are not read.
5. A chapter's title is the EPUB 3 navigation document's (``nav`` with ``epub:type="toc"``) label for
   that document, else the EPUB 2 NCX's (``toc.ncx`` navPoint) label, else the document's first ``h1``,
   ``h2`` or ``h3`` text, else its ``<title>``, else none (the caller numbers it).
6. A file that is not a zip, lacks the container or the package document, or holds malformed XML,
   raises :class:`~producers.document_split.DocumentError` saying so. XML with entity declarations is
   refused (the "billion laughs" expansion).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Final
from urllib.parse import unquote, urldefrag
from xml.etree import ElementTree

from producers.document_split import DocumentError

MAX_UNCOMPRESSED_BYTES: Final = 200_000_000
_CONTAINER: Final = "META-INF/container.xml"
_HTML_TYPES: Final = frozenset({"application/xhtml+xml", "text/html"})
_NCX_TYPE: Final = "application/x-dtbncx+xml"
_DECLARATION_BYTES: Final = 1024  # where an XML declaration may be: the encoding is looked for there only
_XML_ENCODING: Final = re.compile(rb"(?:\xef\xbb\xbf)?<\?xml[^>]*?encoding=[\"']([A-Za-z0-9._-]+)[\"']")

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


def read_epub(data: bytes) -> Book:
    """The title and spine documents of an EPUB, or :class:`DocumentError` saying why it is not one."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as e:
        raise DocumentError(f"not an EPUB: the data is not a zip archive ({e})") from None
    with archive:
        total = sum(info.file_size for info in archive.infolist())
        if total > MAX_UNCOMPRESSED_BYTES:
            raise DocumentError(
                f"the EPUB unpacks to {total} bytes, more than the {MAX_UNCOMPRESSED_BYTES} allowed; split the book"
            )
        container = _xml(archive, _CONTAINER, "META-INF/container.xml")
        opf_path = next((el.get("full-path", "") for el in container.iter() if _local(el.tag) == "rootfile"), "")
        if not opf_path:
            raise DocumentError(f"not an EPUB: {_CONTAINER} names no rootfile (the OPF package document)")
        opf = _xml(archive, opf_path, "the package document named by META-INF/container.xml")
        return _book(archive, opf, posixpath.dirname(opf_path))


def _book(archive: zipfile.ZipFile, opf: ElementTree.Element, base: str) -> Book:
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
    labels = {**(_ncx_labels(archive, ncx.path) if ncx else {}), **(_nav_labels(archive, nav.path) if nav else {})}
    chapters: list[tuple[str | None, tuple[str, ...]]] = []
    for ref in spine:
        item = manifest.get(ref.get("idref", ""))
        if _local(ref.tag) != "itemref" or item is None or ref.get("linear", "yes").strip() == "no":
            continue
        if item is nav or item.media_type not in _HTML_TYPES:
            continue
        page = _Page()
        page.feed(_decode(_member(archive, item.path, "a document in the spine")))
        page.close()
        chapters.append((labels.get(item.path) or page.heading or page.title, tuple(page.paragraphs)))
    return Book(title, tuple(chapters))


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _resolve(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(urldefrag(href).url)))


def _member(archive: zipfile.ZipFile, name: str, what: str) -> bytes:
    try:
        return archive.read(name)
    except KeyError:
        raise DocumentError(f"not an EPUB: {what}, {name}, is missing from the archive") from None
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError) as e:
        raise DocumentError(f"not a readable EPUB: {name} cannot be unpacked ({e})") from None


def _xml(archive: zipfile.ZipFile, name: str, what: str) -> ElementTree.Element:
    raw = _member(archive, name, what)
    if b"<!ENTITY" in raw:
        raise DocumentError(f"not a readable EPUB: {name} declares XML entities, which are refused")
    try:
        return ElementTree.fromstring(raw)  # noqa: S314 - entity declarations refused above; expat fetches nothing
    except ElementTree.ParseError as e:
        raise DocumentError(f"not a readable EPUB: {name} is not well-formed XML ({e})") from None


def _decode(raw: bytes) -> str:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    declared = _XML_ENCODING.match(raw[:_DECLARATION_BYTES])
    try:
        return raw.decode(declared.group(1).decode() if declared else "utf-8-sig", errors="replace")
    except LookupError:  # an encoding Python does not know: UTF-8 is what EPUB requires anyway
        return raw.decode("utf-8-sig", errors="replace")


def _ncx_labels(archive: zipfile.ZipFile, path: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    try:
        ncx = _xml(archive, path, "the NCX table of contents")
    except DocumentError:
        return labels  # a broken table of contents costs the titles, not the book
    base = posixpath.dirname(path)
    for point in (el for el in ncx.iter() if _local(el.tag) == "navPoint"):
        label = next((t.text or "" for c in point if _local(c.tag) == "navLabel" for t in c.iter() if t is not c), "")
        src = next((c.get("src", "") for c in point if _local(c.tag) == "content"), "")
        if label.strip() and src:
            labels.setdefault(_resolve(base, src), label)
    return labels


def _nav_labels(archive: zipfile.ZipFile, path: str) -> dict[str, str]:
    try:
        raw = _member(archive, path, "the navigation document")
    except DocumentError:
        return {}
    nav = _Nav()
    nav.feed(_decode(raw))
    nav.close()
    base = posixpath.dirname(path)
    labels: dict[str, str] = {}
    for href, label in nav.links:
        if label.strip():
            labels.setdefault(_resolve(base, href), label)
    return labels


class _Page(HTMLParser):
    """Paragraphs, first h1-h3 text and head title of one XHTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
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


class _Nav(HTMLParser):
    """(href, label) of each link inside the ``nav epub:type="toc"`` of an EPUB 3 navigation document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
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
