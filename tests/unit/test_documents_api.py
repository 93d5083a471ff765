"""POST /v1/documents on fakes: what is recorded, in which order, and the 4xx a bad document gets."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from litestar.testing import TestClient

from contracts import DocumentSubmitted, JobQueued, document_part_job_id
from foundation.offload import OverBudget
from producers.app import create_app
from tests.support import api_fakes
from tests.support.api_fakes import DOCUMENTS, LIMITS, Documents, Log, Reader, deps
from tests.support.document_gate import Gate
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


@pytest.mark.parametrize(
    "kwargs",
    [
        {"files": {"file": ("", b"\xf7I<\x02'%\xa6")}, "data": {"voice": "af_heart"}},  # no file name: a field
        {"files": {"file": ("a.md", b"Hello there.")}, "data": {"voice": "af_heart", "title": b"\xff\xfe"}},
    ],
)
def test_regression_a_multipart_field_that_is_not_utf8_was_a_500(kwargs):
    """Found by the fuzz campaign's document bodies: Litestar decodes each part of a form that has no file name
    (the document sent without one, or a field) as UTF-8, and its UnicodeDecodeError reached the client as a 500."""
    test, log = client()
    with test:
        answer = test.post("/v1/documents", **kwargs)
    assert answer.status_code == 400, answer.text
    assert answer.json()["detail"].startswith("a field of the multipart form is not UTF-8 text (invalid")
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
    title = "A chapter whose title runs on " * 5
    text = "\n\n".join(f"# {title}{i}\n\nWords." for i in range(80))  # 80 long chapter titles: a large record
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


# Off the event loop, under budgets ------------------------------------------------------------------------


async def test_regression_a_post_of_30000_full_stops_held_healthz_for_10_s(tmp_path):
    """The split ran on the event loop: every other request waited for it. It runs in an offload process
    now; here it is held there (at a socket the test releases), and /healthz answers meanwhile. A split
    on the loop would hold the loop at the gate and this test would never see the health answer. No
    clock: the order of events is all it asserts."""
    async with Gate(str(tmp_path / "gate")) as gate:
        budget = replace(DOCUMENTS, max_chars=2_000_000, gate=gate.path)
        async with api_fakes.client(deps(Reader(), Log(), document_budget=budget)) as api:
            posted = asyncio.create_task(
                api.post("/v1/documents", json={"text": "Stop" + "." * 30_000, "voice": "af_heart"})
            )
            await gate.held.wait()  # the parsing is running, in another process, and waits
            health = await api.get("/healthz")
            assert health.status_code == 200
            assert not posted.done()
            await gate.release()
            answer = await posted
    assert answer.status_code == 202, answer.text


@pytest.mark.parametrize(
    ("budget", "kwargs", "named"),
    [
        ({"max_parts": 2}, {"json": {"text": "One.\n\nTwo.\n\nThree.", "voice": "af_heart"}}, "more than 2 parts"),
        ({"max_chapters": 1}, {"json": {"text": "# A\n\nx\n\n# B\n\ny", "voice": "af_heart"}}, "more than 1 chapters"),
        (
            {"max_chars": 10},
            {"json": {"text": "Eleven chars\n\nand more", "voice": "af_heart"}},
            "(VOXLOG_MAX_DOCUMENT_CHARS)",
        ),
        ({"max_chars": 10}, {"json": {"text": "Twelve chars", "voice": "af_heart"}}, "(VOXLOG_MAX_DOCUMENT_CHARS)"),
        ({"max_bytes": 100}, {"json": {"text": "x" * 200, "voice": "af_heart"}}, "(VOXLOG_MAX_DOCUMENT_BYTES)"),
        (
            {"max_unpacked_bytes": 10_000},
            {"files": {"file": ("big.epub", b"")}, "data": {"voice": "af_heart"}},
            "unpacks more than 10000 bytes",
        ),
    ],
)
def test_a_document_past_a_budget_is_a_413_that_names_it(budget, kwargs, named):
    """The limit is said; a limit that is a setting (issue 38, item 3: the bytes and the characters) is named,
    a fixed bound (parts, chapters, what an EPUB unpacks) is said by its value."""
    if "files" in kwargs:
        chapter = "<html><body><p>" + "Words. " * 1000 + "</p></body></html>"
        kwargs["files"] = {"file": ("big.epub", spine_repeating(chapter, 10))}
    log = Log()
    with TestClient(create_app(deps(Reader(), log, document_budget=replace(DOCUMENTS, **budget)))) as test:
        answer = test.post("/v1/documents", **kwargs)
    assert answer.status_code == 413, answer.text
    assert named in answer.json()["detail"], answer.json()["detail"]
    assert log.published == []


def spine_repeating(chapter: str, times: int) -> bytes:
    return epub(
        {
            "content.opf": '<package xmlns="http://www.idpf.org/2007/opf"><manifest>'
            '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/></manifest>'
            "<spine>" + '<itemref idref="a"/>' * times + "</spine></package>",
            "a.xhtml": chapter,
        }
    )


class OverBudgetOffload:
    def __init__(self, budget: str, limit: str) -> None:
        self.error = OverBudget(budget, limit)  # type: ignore[arg-type]

    async def run(self, work, *args, cpu_s=None):
        raise self.error


@pytest.mark.parametrize(
    ("budget", "limit", "setting"),
    [("cpu", "30 CPU seconds", "VOXLOG_OFFLOAD_CPU_S"), ("memory", "2048 MiB of memory", "VOXLOG_OFFLOAD_MEMORY_MB")],
)
def test_parsing_past_the_offload_budget_is_a_413_that_names_it(budget, limit, setting):
    offload = OverBudgetOffload(budget, limit)
    with TestClient(create_app(deps(Reader(), Log(), offload=offload))) as test:  # type: ignore[arg-type]
        answer = test.post("/v1/documents", json={"text": "Hello.", "voice": "af_heart"})
    assert answer.status_code == 413, answer.text
    assert answer.json()["detail"] == f"reading the document took more than {limit} ({setting}): split it"


def test_an_epub_that_cannot_be_unpacked_is_a_422_that_says_so():
    book = bytearray(spine_repeating("<html><body><p>" + "Hello world. " * 2000 + "</p></body></html>", 1))
    start = book.index(b"a.xhtml", book.index(b"a.xhtml") + 1) + len("a.xhtml")  # the member's own header
    for i in range(start, start + 40):
        book[i] ^= 0xFF
    with TestClient(create_app(deps(Reader(), Log()))) as test:
        answer = test.post("/v1/documents", files={"file": ("bad.epub", bytes(book))}, data={"voice": "af_heart"})
    assert answer.status_code == 422, answer.text
    assert "not a readable EPUB" in answer.json()["detail"]
