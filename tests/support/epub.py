"""Tiny EPUB files for tests: the zip, its mimetype and container around the files a test names."""

from __future__ import annotations

import io
import zipfile

CONTAINER = (
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
    '<rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/>'
    "</rootfiles></container>"
)


def epub(files: dict[str, str]) -> bytes:
    """An EPUB whose package document is ``files["content.opf"]``, with every other file beside it."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", CONTAINER)
        for name, text in files.items():
            book.writestr(name, text)
    return data.getvalue()
