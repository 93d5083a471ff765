"""POST /v1/documents on fakes: what is recorded, in which order, and the 4xx a bad document gets."""

from __future__ import annotations

from dataclasses import replace

import pytest
from litestar.testing import TestClient

from contracts import DocumentSubmitted, JobQueued, document_part_job_id
from producers.app import create_app
from tests.support.api_fakes import LIMITS, Documents, Log, Reader, deps
from tests.support.epub import epub

pytestmark = pytest.mark.unit


def client() -> tuple[TestClient, Log]:
    log = Log()
    return TestClient(create_app(deps(Reader(), log, documents=Documents()))), log


def test_a_markdown_document_records_the_document_then_the_parts_it_names():
    test, log = client()
    text = "# Book\n\nIntro.\n\n# One\n\nFirst paragraph.\n\nRepeated.\n\n# Two\n\nRepeated.\n\n```\ncode()\n```\n"
    with test:
        answer = test.post("/v1/documents", json={"text": text, "voice": "af_heart"})
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert [c["title"] for c in body["chapters"]] == ["Book", "One", "Two"]
    document, *parts = log.published
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
    assert isinstance(log.published[0], DocumentSubmitted)
    assert log.published[0].payload.markup == "epub"


def test_regression_a_document_whose_record_was_over_the_brokers_limit_had_its_parts_published_first():
    """Its parts went to the log, then the DocumentSubmitted (over 1 MiB) was refused: 503 "retry with the same
    key" forever while the parts were synthesized. Now every record is checked before the first is sent."""
    log = Log()
    small = replace(LIMITS, max_record_bytes=8_000)
    text = "\n\n".join(f"# Chapter {i}\n\nWords." for i in range(300))  # 300 chapter titles: a large record
    with TestClient(create_app(deps(Reader(), log, limits=small, documents=Documents()))) as api:
        answer = api.post("/v1/documents", json={"text": text, "voice": "af_heart"})
    assert answer.status_code == 413, answer.text
    assert "VOXLOG_MAX_RECORD_BYTES" in answer.json()["detail"]
    assert log.published == [], "nothing is recorded"


class KnownDocuments:
    """The projection knows the document its key names (its first try recorded it, and some of its parts)."""

    def __init__(self) -> None:
        self.document_id: object = None

    async def document_by_key(self, key: str) -> object:
        return self.document_id


def test_a_retry_of_a_document_the_log_took_in_part_sends_only_the_parts_the_projection_lacks():
    text = "# Book\n\nOne.\n\nTwo.\n\nThree."
    first_log = Log(takes=2)  # the document and one part, then the log fails
    documents, reader = KnownDocuments(), Reader()
    with TestClient(create_app(deps(reader, first_log, documents=documents))) as api:
        refused = api.post("/v1/documents", json={"text": text, "voice": "af_heart"}, headers={"Idempotency-Key": "b1"})
    assert refused.status_code == 503, refused.text
    assert "Idempotency-Key: b1" in refused.json()["detail"]
    document, recorded = first_log.published
    assert isinstance(document, DocumentSubmitted)
    assert isinstance(recorded, JobQueued)
    documents.document_id, _ = document.payload.document_id, reader.project(recorded)

    retry_log = Log()
    with TestClient(create_app(deps(reader, retry_log, documents=documents))) as api:
        again = api.post("/v1/documents", json={"text": text, "voice": "af_heart"}, headers={"Idempotency-Key": "b1"})
    assert again.status_code == 200, again.text
    assert again.json()["document_id"] == str(document.payload.document_id)
    assert not any(isinstance(e, DocumentSubmitted) for e in retry_log.published), "no second document"
    sent = [e.job_id for e in retry_log.published]
    assert recorded.job_id not in sent, "a part the projection shows is not sent again"
    assert sorted(sent) == sorted(document_part_job_id(document.payload.document_id, i) for i in (1, 2, 3))
