"""POST /v1/documents on fakes: what is recorded, in which order, and the 4xx a bad document gets."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from contracts import DocumentSubmitted, JobQueued, document_part_job_id
from producers.app import create_app
from tests.support.api_fakes import Documents, Log, Reader, deps
from tests.support.epub import epub

pytestmark = pytest.mark.unit


def client() -> tuple[TestClient, Log]:
    log = Log()
    return TestClient(create_app(deps(Reader(), log, documents=Documents()))), log


def test_a_markdown_document_records_its_parts_then_the_document_that_names_them():
    test, log = client()
    text = "# Book\n\nIntro.\n\n# One\n\nFirst paragraph.\n\nRepeated.\n\n# Two\n\nRepeated.\n\n```\ncode()\n```\n"
    with test:
        answer = test.post("/v1/documents", json={"text": text, "voice": "af_heart"})
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert [c["title"] for c in body["chapters"]] == ["Book", "One", "Two"]
    *parts, document = log.published
    assert isinstance(document, DocumentSubmitted)
    assert all(isinstance(p, JobQueued) for p in parts)
    assert [p.job_id for p in parts] == [document_part_job_id(document.payload.document_id, i) for i in range(7)]
    texts = [p.payload.request.text for p in parts]
    assert "code()" not in " ".join(texts)
    assert texts.count("Repeated.") == 2
    assert (
        parts[texts.index("Repeated.")].fingerprint
        == parts[len(texts) - 1 - texts[::-1].index("Repeated.")].fingerprint
    )
    assert {p.payload.priority for p in parts} == {"batch"}
    assert document.payload.breaks.endswith("c")
    assert len(document.payload.breaks) == len(parts)


@pytest.mark.parametrize(
    ("kwargs", "status", "says"),
    [
        ({"json": {"text": "Hello.", "voice": "af_heart", "format": "flac"}}, 422, "stitched as a stream"),
        ({"json": {"text": "Hello.", "voice": "nobody"}}, 422, "known voices: af_heart"),
        ({"json": {"text": "Hello.", "voice": "af_heart", "markup": "rtf"}}, 422, "markdown or plain"),
        ({"json": {"text": "```\nonly code\n```", "voice": "af_heart"}}, 422, "no text"),
        ({"json": {"text": "word " * 9000, "voice": "af_heart"}}, 413, "the limit is 20000"),
        ({"files": {"file": ("book.epub", b"not a zip")}, "data": {"voice": "af_heart"}}, 422, "not an EPUB"),
        ({"files": {"file": ("notes.txt", b"\xff\xfe bad")}, "data": {"voice": "af_heart"}}, 422, "UTF-8"),
        ({"files": {"other": ("a.txt", b"text")}, "data": {"voice": "af_heart"}}, 422, "named 'file'"),
    ],
)
def test_a_bad_document_gets_a_4xx_that_says_what_to_fix_and_nothing_is_recorded(kwargs, status, says):
    test, log = client()
    with test:
        answer = test.post("/v1/documents", **kwargs)
    assert answer.status_code == status, answer.text
    assert says in answer.json()["detail"]
    assert log.published == []


def test_an_epub_upload_is_read_chapter_by_chapter():
    book = epub(
        {
            "content.opf": '<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/">'
            "<metadata><dc:title>Tiny</dc:title></metadata><manifest>"
            '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>'
            '<item id="b" href="b.xhtml" media-type="application/xhtml+xml"/></manifest>'
            '<spine><itemref idref="a"/><itemref idref="b"/></spine></package>',
            "a.xhtml": "<html><body><h1>Start</h1><p>Once.</p></body></html>",
            "b.xhtml": "<html><body><h1>End</h1><p>Twice.</p></body></html>",
        }
    )
    test, log = client()
    with test:
        answer = test.post("/v1/documents", files={"file": ("tiny.epub", book)}, data={"voice": "af_heart"})
    assert answer.status_code == 202, answer.text
    assert answer.json()["title"] == "Tiny"
    assert [c["title"] for c in answer.json()["chapters"]] == ["Start", "End"]
    assert isinstance(log.published[-1], DocumentSubmitted)
    assert log.published[-1].payload.markup == "epub"
