"""A streamed answer whose client never takes the next chunk (producers.stream_guard): closed after its send
timeout (30 s: voxlog.composition.api.STREAM_SEND_TIMEOUT_S), what it held released, logged and counted. The app is
called as the server calls it, with an ASGI send that never completes for the stream's second chunk (a gate nobody
opens)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from contracts import JobCancelled, JobState
from foundation.audio import encode_wav
from foundation.metrics import STREAMS_STALLED
from producers.app import create_app
from producers.stream_guard import SendTimeout
from tests.support.api_fakes import Log, Reader, deps, progress, segment

pytestmark = pytest.mark.unit

ROUTE = "/v1/audio/speech"


class Blobs:
    def get(self, ref: Any) -> bytes:
        return encode_wav(np.zeros(2400, dtype=np.float32), 24000)

    def touch(self, refs: list[Any]) -> bool:
        return True


class Changes:
    """The job change feed: how many watches are open (a stream's watch is what it holds while it lives)."""

    def __init__(self) -> None:
        self.open = 0
        self.opened = 0

    @contextlib.contextmanager
    def watch(self, job_id: Any) -> Iterator[Changes]:
        self.open += 1
        self.opened += 1
        try:
            yield self
        finally:
            self.open -= 1

    async def wait(self) -> None:
        """The scripted job changes on every read: read again at once."""


class StalledClient:
    """The server's side of a client that reads the answer's head and first chunk, then nothing more: the send of
    the next chunk never completes, and the client never says it left."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = json.dumps(body).encode()
        self.sent: list[dict[str, Any]] = []
        self.stalled = asyncio.Event()
        self._never = asyncio.Event()
        self._asked = False

    async def receive(self) -> dict[str, Any]:
        if not self._asked:
            self._asked = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._never.wait()
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        chunks = [m for m in self.sent if m["type"] == "http.response.body"]
        if message["type"] == "http.response.body" and chunks:
            self.stalled.set()
            await self._never.wait()  # the client's buffers are full: this send waits for ever
        self.sent.append(message)


def scope() -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": ROUTE, "raw_path": ROUTE.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"content-type", b"application/json"), (b"host", b"api")],
        "client": ("127.0.0.1", 5000), "server": ("api", 80),
    }  # fmt: skip


def stalled_total() -> float:
    return STREAMS_STALLED.labels(ROUTE)._value.get()


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
async def test_regression_a_stream_whose_client_never_reads_stayed_open_forever(stream_format: str):
    """The send of the next chunk waited for ever, and the stream held its job's change watch and its place in
    the job's audience as long. Now the send gives up after the timeout: the app returns, the stream's iterators
    are closed (the watch is released), an audio stream's job nobody else wants is cancelled as for a client that
    left, and the stall is counted."""
    reader, log, changes = Reader(), Log(), Changes()
    reader.script = [progress(JobState.CLAIMED, segment(0)), progress(JobState.CLAIMED, segment(0), segment(1))]
    api_deps = deps(
        reader, log, blobs=Blobs(), changes=changes, speech_timeout_s=60.0, stream_send_timeout_s=0.05,
        openai_default_voice="af_heart",
    )  # fmt: skip
    client = StalledClient(
        {"model": "tts-1", "voice": "alloy", "input": "One. Two.", "response_format": "pcm",
         "stream_format": stream_format}
    )  # fmt: skip
    before = stalled_total()
    async with asyncio.timeout(60):  # a guard against hanging, not a measure: the stall ends it far sooner
        await create_app(api_deps)(scope(), client.receive, client.send)  # type: ignore[arg-type]
        await api_deps.tasks.close(grace_s=30)  # the cancellation of the abandoned job, on its way
    assert client.stalled.is_set()
    assert client.sent[0]["status"] == 200
    assert not any(m["type"] == "http.response.body" and not m.get("more_body") for m in client.sent), (
        "the stream was cut off, not ended as if whole"
    )
    assert changes.opened >= 1
    assert changes.open == 0, "the stream's watch of its job was released"
    if stream_format == "audio":  # an audio stream's client that leaves cancels its job (events' does not)
        assert [type(e) for e in log.published[1:]] == [JobCancelled]
        assert log.published[1].payload.reason == "disconnected"
    assert stalled_total() == before + 1


async def test_a_body_sent_whole_is_not_timed_and_a_stream_read_in_time_is_not_cut():
    sent: list[dict[str, Any]] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    before = stalled_total()
    await SendTimeout(app, timeout_s=30)(scope(), None, send)  # type: ignore[arg-type]
    assert [m.get("more_body") for m in sent[1:]] == [True, False]
    assert stalled_total() == before
