"""An EPUB upload is untrusted input (producers.epub): what it reads is budgeted, what it cannot read is a
DocumentError saying why (the API's 422), and no DTD, entity or external reference is ever resolved."""

from __future__ import annotations

import io
import re
import struct
import zipfile

import pytest

from producers.document_split import DocumentError, DocumentTooLarge, SplitLimits, split_epub
from producers.epub import parse_xml, read_epub

pytestmark = pytest.mark.unit

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="book.opf" media-type="application/oebps-package+xml"/></rootfiles></container>'
)


def opf(spine: str = '<itemref idref="a"/>', title: str = "Book", head: str = "") -> str:
    return (
        f'{head}<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/">'
        f"<metadata><dc:title>{title}</dc:title></metadata>"
        '<manifest><item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest>'
        f"<spine>{spine}</spine></package>"
    )


def book(chapter: str | bytes = "<html><body><p>Words.</p></body></html>", method: int = zipfile.ZIP_DEFLATED, **files):
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", method) as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", files.pop("container", CONTAINER))
        z.writestr("book.opf", files.pop("opf", opf()))
        z.writestr("a.xhtml", chapter)
        for name, content in files.items():
            z.writestr(name, content)
    return data.getvalue()


# What is read is budgeted -------------------------------------------------------------------------------


def test_regression_a_2_kb_epub_whose_spine_names_one_1_mb_chapter_60_times_expanded_to_63_million_characters():
    """The unpacked-size cap counted each member's declared size once: the spine's 60 reads of the same
    chapter were free. Every read counts now, and reading stops at the budget."""
    chapter = "<html><body>" + "<p>" + "All work and no play. " * 47_000 + "</p></body></html>"
    data = book(chapter, opf=opf('<itemref idref="a"/>' * 60))
    assert len(data) < 4_000
    assert len(chapter) > 1_000_000
    with pytest.raises(DocumentTooLarge) as refused:
        split_epub(data, max_unpacked_bytes=8 * 2**20)
    assert refused.value.budget == "unpacked_bytes"
    assert "unpacks more than 8388608 bytes" in str(refused.value)
    with pytest.raises(DocumentTooLarge) as by_chars:  # the characters limit stops it too, after two reads
        split_epub(data, max_unpacked_bytes=None, limits=SplitLimits(chars=2_000_000))
    assert by_chars.value.budget == "chars"


def test_regression_a_291_kb_epub_took_30_s_and_3_gb_before_its_413():
    """One chapter that unpacks to tens of megabytes: read no further than the budget, refused there."""
    chapter = b"<html><body><p>" + b"a" * 40_000_000 + b"</p></body></html>"
    data = book(chapter)
    assert len(data) < 100_000
    with pytest.raises(DocumentTooLarge) as refused:
        read_epub(data, max_unpacked_bytes=4 * 2**20)
    assert refused.value.budget == "unpacked_bytes"


def test_what_is_read_within_the_budget_is_read():
    assert [c[1] for c in read_epub(book(opf=opf('<itemref idref="a"/>' * 3)), max_unpacked_bytes=10_000).chapters] == [
        ("Words.",)
    ] * 3


def test_an_epub_with_more_chapters_than_a_document_may_have_is_refused():
    with pytest.raises(DocumentTooLarge) as refused:
        read_epub(book(opf=opf('<itemref idref="a"/>' * 5)), limits=SplitLimits(chapters=4))
    assert refused.value.budget == "chapters"


# What cannot be read is a DocumentError saying why --------------------------------------------------------


def corrupted(method: int, at: int) -> bytes:
    """A book whose chapter's compressed data is damaged ``at`` bytes into it."""
    data = bytearray(book("<html><body><p>" + "Hello world. " * 2000 + "</p></body></html>", method))
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("a.xhtml")
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26 : info.header_offset + 30])
    start = info.header_offset + 30 + name_length + extra_length + at
    for i in range(start, start + 8):
        data[i] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize(
    ("method", "at", "says"),
    [
        (zipfile.ZIP_DEFLATED, 0, "Error -3 while decompressing"),  # zlib.error
        (zipfile.ZIP_STORED, 100, "Bad CRC-32"),
        (zipfile.ZIP_LZMA, 50, "Corrupt input data"),  # lzma.LZMAError
        (zipfile.ZIP_BZIP2, 2, "Invalid data stream"),  # OSError
    ],
)
def test_regression_corrupt_deflate_or_lzma_data_was_a_500(method: int, at: int, says: str):
    with pytest.raises(DocumentError, match=re.escape("a.xhtml cannot be unpacked (") + ".*" + re.escape(says)):
        split_epub(corrupted(method, at))


def test_an_encrypted_member_is_refused_as_unreadable():
    data = bytearray(book())
    entry = data.index(b"PK\x01\x02")  # the central directory's first entry
    while data[entry + 46 : entry + 53] != b"a.xhtml":
        entry = data.index(b"PK\x01\x02", entry + 4)
    data[entry + 8] |= 0x1  # the "encrypted" flag, as the central directory says it
    with pytest.raises(DocumentError, match=r"a\.xhtml cannot be unpacked \(File .* is encrypted"):
        split_epub(bytes(data))


@pytest.mark.parametrize("encoding", ["idna", "undefined", "utf-7", "unicode_escape", "raw_unicode_escape", "punycode"])
def test_regression_a_chapter_declaring_an_unusual_encoding_was_a_500(encoding: str):
    chapter = f'<?xml version="1.0" encoding="{encoding}"?><html><body><p>Caf\xe9</p></body></html>'.encode("latin-1")
    with pytest.raises(DocumentError, match=f"a.xhtml declares the encoding '{encoding}'"):
        split_epub(book(chapter))


@pytest.mark.parametrize(
    ("encoding", "text"), [("windows-1252", "Caf\xe9 \u20ac"), ("shift_jis", "\u65e5\u672c"), ("UTF-16", "Na\xefve")]
)
def test_a_chapter_in_an_encoding_books_are_written_in_is_decoded(encoding: str, text: str):
    chapter = f'<?xml version="1.0" encoding="{encoding}"?><html><body><p>{text}</p></body></html>'
    assert read_epub(book(chapter.encode(encoding))).chapters[0][1] == (text,)


@pytest.mark.parametrize("encoding", ["utf-7", "idna", "rot13"])
def test_regression_an_xml_file_declaring_an_encoding_expat_cannot_take_was_a_500(encoding: str):
    """Found by the fuzz campaign: expat takes a declared encoding only if it is single-byte, and raised
    ValueError (utf-7), UnicodeError (idna) or LookupError (rot13) past its own ExpatError. The XML files follow
    the chapters' rule now: an encoding no book is written in is refused, saying so."""
    declaration = f'<?xml version="1.0" encoding="{encoding}"?>'
    with pytest.raises(DocumentError, match=f"META-INF/container.xml declares the encoding '{encoding}'"):
        read_epub(book(container=declaration + CONTAINER.removeprefix('<?xml version="1.0"?>')))
    with pytest.raises(DocumentError, match=f"book.opf declares the encoding '{encoding}'"):
        read_epub(book(opf=opf(head=declaration)))


def test_regression_a_package_document_in_shift_jis_was_a_500_and_is_read():
    """A book's encoding that expat cannot take as bytes (multi-byte) is decoded first, as a chapter would be."""
    document = opf(title="\u65e5\u672c", head='<?xml version="1.0" encoding="shift_jis"?>').encode("shift_jis")
    assert read_epub(book(opf=document)).title == "\u65e5\u672c"


def test_regression_an_xml_file_declaring_an_encoding_python_does_not_know_was_a_500_and_is_read_as_utf8():
    document = opf(title="Caf\u00e9", head='<?xml version="1.0" encoding="x-unknown"?>')
    assert read_epub(book(opf=document)).title == "Caf\u00e9"


def test_an_encoding_python_does_not_know_is_read_as_utf8():
    chapter = '<?xml version="1.0" encoding="x-unknown"?><html><body><p>Caf\u00e9</p></body></html>'.encode()
    assert read_epub(book(chapter)).chapters[0][1] == ("Caf\u00e9",)


def test_regression_markup_html_parser_cannot_take_was_a_500():
    with pytest.raises(DocumentError, match=re.escape("a.xhtml cannot be read as HTML")):
        split_epub(book("<html><body><p>Text</p><![foo[ x ]]><p>More</p></body></html>"))


# No DTD, entity or external reference is ever resolved -----------------------------------------------------

LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";" if i > 1 else "&lol;") * 10}">' for i in range(1, 10))
    + "]>"
)


def secret_file(tmp_path) -> str:
    path = tmp_path / "secret.txt"
    path.write_text("SECRET-CONTENT")
    return path.as_uri()


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-be"])
@pytest.mark.parametrize(
    "doctype",
    [
        LAUGHS,  # billion laughs
        '<!DOCTYPE package [<!ENTITY xxe SYSTEM "{secret}">]>',  # XXE
        '<!DOCTYPE package [<!ENTITY % p SYSTEM "{secret}"> %p;]>',  # a parameter entity
        "<!DOCTYPE package [<!ELEMENT package ANY>]>",  # an internal subset, even without entities
    ],
)
def test_an_xml_file_declaring_entities_is_refused_in_any_encoding(tmp_path, doctype: str, encoding: str):
    title = "&lol9;" if doctype is LAUGHS else "&xxe;" if "xxe" in doctype else "Title"
    document = (doctype.format(secret=secret_file(tmp_path)) + opf(title=title)).encode(encoding)
    with pytest.raises(DocumentError, match=re.escape("book.opf declares XML entities or a DTD of its own")):
        split_epub(book(opf=document))


def test_an_external_dtd_is_never_read_and_its_entities_never_resolved(tmp_path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY t "SECRET-CONTENT">')
    document = f'<!DOCTYPE package SYSTEM "{dtd.as_uri()}">' + opf(title="&t;")
    with pytest.raises(DocumentError, match=re.escape("book.opf refers to the entity &t; which is never resolved")):
        split_epub(book(opf=document))


def test_a_doctype_naming_an_external_dtd_is_allowed_as_ncx_files_have_one():
    ncx_doctype = (
        '<!DOCTYPE package PUBLIC "-//NISO//DTD ncx 2005-1//EN" "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">'
    )
    assert split_epub(book(opf=ncx_doctype + opf(title="Fine &amp; well"))).title == "Fine & well"


def test_an_undefined_entity_is_malformed_xml():
    with pytest.raises(DocumentError, match=re.escape("book.opf is not well-formed XML")):
        split_epub(book(opf=opf(title="&undefined;")))


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_a_chapter_declaring_entities_is_refused_and_never_expanded(tmp_path, encoding: str):
    chapter = LAUGHS.replace("lolz", "html") + "<html><body><p>&lol9;</p></body></html>"
    with pytest.raises(DocumentError, match=re.escape("a.xhtml declares XML entities or a DTD of its own")):
        split_epub(book(chapter.encode(encoding)))


def test_parse_xml_reads_namespaced_elements_and_attributes():
    root = parse_xml(b'<a xmlns="urn:x" k="v"><b>text</b></a>', "x.xml")
    assert root.tag.endswith("a")
    assert root.get("k") == "v"
    assert [child.text for child in root] == ["text"]


def test_regression_a_zip_version_zipfile_cannot_read_is_a_document_error_not_a_500() -> None:
    """Found by the fuzzed bodies: a central directory asking for zip version 19.2 made zipfile raise
    NotImplementedError from its constructor, which escaped as a server error."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
    data = bytearray(buffer.getvalue())
    central = data.index(b"PK\x01\x02")
    data[central + 6 : central + 8] = (192).to_bytes(2, "little")  # version needed to extract: 19.2
    with pytest.raises(DocumentError, match=r"zip file version 19\.2"):
        read_epub(bytes(data))
