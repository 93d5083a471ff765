"""Captions over HTTP (producers.caption_routes): built off the event loop, once, then answered from the cache."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from contracts import JobQueued, JobState, document_part_job_id
from producers import caption_routes
from producers.caption_cache import CaptionCache
from projections.reads.rows import ChapterRow, DocumentRow, PartRow, SegmentRow
from tests.support import api_fakes
from tests.support.api_fakes import T0, Reader, deps, request_of, segment
from tests.support.events import one_of_each

pytestmark = pytest.mark.unit


class HeldBuild:
    """``rendered`` as the routes call it, counted, each call's thread noted, and held until released."""

    def __init__(self, real: Callable[..., bytes]) -> None:
        self.real = real
        self.threads: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, *args: Any) -> bytes:
        self.threads.append(threading.get_ident())
        self.entered.set()
        assert self.release.wait(60), "the test never released the build"
        return self.real(*args)


def queued_event(text: str) -> JobQueued:
    event = one_of_each(text)[0]
    assert isinstance(event, JobQueued)
    return event


def worded(index: int) -> SegmentRow:
    return segment(index, duration_ms=100)


async def test_regression_a_long_documents_captions_took_2_s_of_event_loop_per_request(monkeypatch):
    """Captions were built on the event loop for every request (about 2 s each for a 2 M-character document).
    Here the build is held, in whatever thread runs it, until the test releases it: /healthz answers meanwhile
    (a build on the loop would hold the loop at the gate), the build's thread is not the loop's, and a second
    request is answered from the cache without a build."""
    held = HeldBuild(caption_routes.rendered)
    monkeypatch.setattr(caption_routes, "rendered", held)
    reader, event = Reader(), queued_event("Hello there.")
    reader.project(event, JobState.COMPLETED, segments=[worded(0), worded(1)])
    captions = CaptionCache()
    async with api_fakes.client(deps(reader, captions=captions)) as api:
        asked = asyncio.create_task(api.get(f"/v1/jobs/{event.job_id}/captions?format=vtt"))
        assert await asyncio.to_thread(held.entered.wait, 60)
        assert (await api.get("/healthz")).status_code == 200
        assert not asked.done()
        held.release.set()
        first = await asked
        second = await api.get(f"/v1/jobs/{event.job_id}/captions?format=vtt")
    assert first.status_code == 200, first.text
    assert second.content == first.content
    assert first.content.startswith(b"WEBVTT")
    assert held.threads
    assert threading.get_ident() not in held.threads
    assert len(held.threads) == 1
    assert captions.builds == 1


class OneDocument:
    """A completed document of two parts, one chapter each; ``segment_reads`` counts its segments' reads."""

    def __init__(self) -> None:
        self.id = uuid.UUID(int=41)
        self.segment_reads = 0
        self.row = DocumentRow(
            document_id=self.id, title="Book", markup="markdown", chapters=(ChapterRow("One", 1), ChapterRow("Two", 1)),
            breaks="cc", part_count=2, total_chars=20, request=request_of("Book"), priority="batch",
            idempotency_key=None, submitted_at=T0, tenant="default",
        )  # fmt: skip

    async def document(self, document_id: uuid.UUID, tenant: str) -> DocumentRow | None:
        return self.row if document_id == self.id and tenant == self.row.tenant else None

    async def parts(self, document_id: uuid.UUID, count: int) -> list[PartRow | None]:
        return [
            PartRow(job_id=document_part_job_id(document_id, i), fingerprint=f"f{i}", state=JobState.COMPLETED,
                    total_duration_ms=200, error_code=None, chars=10)
            for i in range(count)
        ]  # fmt: skip

    async def segments(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[SegmentRow]]:
        self.segment_reads += 1
        return {job_id: [worded(0), worded(1)] for job_id in job_ids}


async def test_regression_a_documents_captions_asked_again_are_answered_without_reading_its_segments_again():
    """Each request read every segment of the document and built its captions again; a completed document's
    captions never change, so the second request (the whole document, and a chapter alike) is the cache's,
    and its segments are not read again. Another tenant still gets 404: the checks run before the cache."""
    book, captions = OneDocument(), CaptionCache()
    async with api_fakes.client(deps(Reader(), documents=book, captions=captions)) as api:
        answers = [await api.get(f"/v1/documents/{book.id}/captions") for _ in range(2)]
        chapters = [await api.get(f"/v1/documents/{book.id}/chapters/1/captions?format=json") for _ in range(2)]
        book.row = DocumentRow(**{**{f: getattr(book.row, f) for f in book.row.__struct_fields__}, "tenant": "x"})
        gone = await api.get(f"/v1/documents/{book.id}/captions")
    assert [a.status_code for a in answers + chapters] == [200] * 4, answers[0].text
    assert answers[0].content == answers[1].content
    assert chapters[0].content == chapters[1].content
    assert book.segment_reads == 2
    assert captions.builds == 2
    assert gone.status_code == 404


async def test_the_cache_keeps_captions_within_its_bytes_the_least_recently_asked_for_out_first():
    cache = CaptionCache(max_bytes=10)
    for key in ("a", "b"):
        await cache.get(key, lambda: b"12345")
    assert cache.cached("a") == b"12345"  # "a" now the most recently asked for
    await cache.get("c", lambda: b"12345")
    assert cache.cached("b") is None
    assert cache.cached("a") is not None
    assert cache.size_bytes == 10
    await cache.get("big", lambda: b"x" * 11)  # larger than the whole cache: answered, not kept
    assert cache.cached("big") is None
    assert cache.builds == 4


async def test_requests_for_captions_being_built_wait_for_that_build():
    cache, release = CaptionCache(), threading.Event()

    def build() -> bytes:
        assert release.wait(60)
        return b"built"

    waiting = [asyncio.create_task(cache.get("k", build)) for _ in range(3)]
    release.set()
    assert await asyncio.gather(*waiting) == [b"built"] * 3
    assert cache.builds == 1
