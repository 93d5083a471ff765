"""The node's HTTP app, in-process over ASGI, with the real Kokoro model.

httpx's ASGITransport runs each request as a task on the test's own loop, so
eight requests really are in flight at once. (Litestar's AsyncTestClient sends
every request through a blocking portal on another thread: the calling loop
waits for the whole response, so requests could never overlap.) Hang-ups are
driven at the ASGI level with the ``http.disconnect`` message uvicorn sends.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from types import SimpleNamespace

import httpx
import pytest
import soundfile as sf

from tests.unit.test_tts_fifo import DEADLINE, VOICE, WORDS, CountingEngine, until
from tts_node.fifo import SynthesisQueue
from tts_node.server import create_node_app


@pytest.fixture(scope="module")
def kokoro(kokoro_onnx):
    """The session's real model (tests/unit/conftest.py)."""
    return kokoro_onnx


@pytest.fixture
async def node(kokoro):
    engine = CountingEngine(kokoro)
    queue = SynthesisQueue(engine)
    app = create_node_app(queue, kokoro.info)
    started, stop = asyncio.Event(), asyncio.Event()

    # The lifespan holds an anyio task group, which must be left in the task that
    # entered it; fixture setup and teardown may run in different tasks.
    async def lifespan() -> None:
        async with app.lifespan():
            started.set()
            await stop.wait()
            engine.release_all()

    running = asyncio.create_task(lifespan())
    await asyncio.wait_for(started.wait(), DEADLINE)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node", timeout=DEADLINE) as client:
        yield SimpleNamespace(app=app, queue=queue, engine=engine, client=client)
    stop.set()
    await asyncio.wait_for(running, DEADLINE)


def sse_events(body: str) -> list[tuple[str, dict]]:
    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line)
        if fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def audio_info(data: bytes):
    return sf.info(io.BytesIO(data))


class Connection:
    """One POST driven like an ASGI server would, so the test can hang up mid-response."""

    def __init__(self, app, path: str, payload: dict) -> None:
        self.body = json.dumps(payload).encode()
        self.received = b""
        self.status: int | None = None
        self.got_segment = asyncio.Event()
        self._request_sent = False
        self._gone = asyncio.Event()
        headers = [(b"host", b"node"), (b"content-type", b"application/json")]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [*headers, (b"content-length", str(len(self.body)).encode())],
            "client": ("test", 50000),
            "server": ("node", 80),
        }
        self.task = asyncio.create_task(app(scope, self._receive, self._send))

    def hang_up(self) -> None:
        self._gone.set()

    async def _receive(self) -> dict:
        if not self._request_sent:
            self._request_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.received += message.get("body", b"")
            if b"event: segment" in self.received:
                self.got_segment.set()


async def test_concurrent_streams_are_all_served_in_submission_order(node):
    queue, engine = node.queue, node.engine
    gate = engine.hold(WORDS[0])
    tasks = []
    for n, word in enumerate(WORDS, start=1):
        body = {"text": word, "voice": VOICE}
        tasks.append(asyncio.create_task(node.client.post("/tts/stream", json=body)))
        await until(queue, lambda q, n=n: q.submitted == n)

    # The event loop stays free while the engine thread works.
    health = (await node.client.get("/health")).json()
    assert health["queue"] == {"depth": 7, "busy": True, "completed": 0, "cancelled": 0, "failed": 0}
    gate.set()
    responses = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)

    assert engine.segmented == list(WORDS)
    waits = []
    for word, response in zip(WORDS, responses, strict=True):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        (name, segment), (last, done) = sse_events(response.text)
        assert (name, last) == ("segment", "done")
        assert (segment["index"], segment["text"], segment["start"], segment["end"]) == (0, word, 0, len(word))
        assert segment["sample_rate"] == 24000
        info = audio_info(base64.b64decode(segment["audio"]))
        assert (info.format, info.subtype, info.samplerate, info.channels) == ("WAV", "PCM_16", 24000, 1)
        assert abs(info.frames * 1000 / 24000 - segment["duration_ms"]) <= 1
        assert done["segments"] == 1
        assert (done["duration_ms"], done["synth_ms"]) == (segment["duration_ms"], segment["synth_ms"])
        waits.append(done["queue_wait_ms"])
    assert waits[-1] > waits[0]
    assert (queue.completed, queue.cancelled) == (len(WORDS), 0)


async def test_health_describes_model_device_and_queue(node, kokoro):
    response = await node.client.get("/health")
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == {"engine": "kokoro-onnx", "model_version": kokoro.info.model_version}
    assert (body["device"], body["sample_rate"], body["voices"]) == ("cpu", 24000, len(kokoro.info.voices))
    assert body["queue"] == {"depth": 0, "busy": False, "completed": 0, "cancelled": 0, "failed": 0}


async def test_post_tts_returns_the_whole_file_in_the_asked_format(node):
    response = await node.client.post("/tts", json={"text": "Hi. Bye.", "voice": VOICE})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/wav"
    info = audio_info(response.content)
    assert (info.format, info.samplerate, info.channels) == ("WAV", 24000, 1)
    assert info.frames > 24000 // 2
    assert node.engine.synthesized == ["Hi.", "Bye."]

    flac = {"text": "Hi.", "voice": VOICE, "format": "flac", "sample_rate": 16000}
    response = await node.client.post("/tts", json=flac)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "audio/flac"
    info = audio_info(response.content)
    assert (info.format, info.samplerate) == ("FLAC", 16000)

    for bad in ({"format": "xyz"}, {"sample_rate": 12345}):
        response = await node.client.post("/tts", json={"text": "Hi.", "voice": VOICE, **bad})
        assert response.status_code == 422
        assert "supported" in response.json()["detail"]
        assert "wav" in response.json()["detail"]
    assert node.queue.submitted == 2


@pytest.mark.parametrize("path", ["/tts/stream", "/tts"])
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"text": "  \n "}, "text is empty"),
        ({"voice": "af_heart"}, "known voices: jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo"),
        ({"speed": 0}, "speed 0.0 is out of range; use 0.25 to 4.0"),
        ({"speed": 9.5}, "speed 9.5 is out of range"),
        ({"lang": "fr-fr"}, "supported: en-us, en-gb"),
    ],
)
async def test_bad_input_is_refused_before_it_is_queued(node, path, change, expected):
    response = await node.client.post(path, json={"text": "Hi.", "voice": VOICE} | change)
    assert response.status_code == 422
    assert expected in response.json()["detail"]
    assert node.queue.submitted == 0


async def test_text_with_nothing_to_say_is_an_error_event_or_a_422(node):
    body = {"text": "\U0001f389\U0001f680", "voice": VOICE}
    response = await node.client.post("/tts/stream", json=body)
    assert response.status_code == 200
    [(name, data)] = sse_events(response.text)
    assert (name, data["kind"]) == ("error", "input")
    assert "nothing to speak" in data["message"]

    response = await node.client.post("/tts", json=body)
    assert response.status_code == 422
    assert "nothing to speak" in response.json()["detail"]
    assert node.engine.synthesized == []


async def test_a_client_that_hangs_up_cancels_its_request(node):
    queue, engine = node.queue, node.engine
    text = "One. Two. Three."
    planning = engine.hold(text)  # the running request stays running while the others queue up
    in_two, two = engine.hold_synthesis("Two.")
    running = Connection(node.app, "/tts/stream", {"text": text, "voice": VOICE})
    await until(queue, lambda q: q.busy)
    queued_stream = Connection(node.app, "/tts/stream", {"text": "Bravo", "voice": VOICE})
    queued_file = Connection(node.app, "/tts", {"text": "Charlie", "voice": VOICE})
    await until(queue, lambda q: q.depth == 2)

    queued_stream.hang_up()
    queued_file.hang_up()
    await until(queue, lambda q: q.depth == 0)
    assert queue.cancelled == 2

    planning.set()
    await asyncio.wait_for(running.got_segment.wait(), DEADLINE)
    assert await asyncio.to_thread(in_two.wait, DEADLINE), "the engine thread is on the second segment"
    running.hang_up()
    await asyncio.wait_for(running.task, DEADLINE)  # the response is over: the request is abandoned
    two.set()  # the second segment finishes; the abandoned request stops at that boundary
    await asyncio.wait_for(asyncio.gather(queued_stream.task, queued_file.task), DEADLINE)
    await until(queue, lambda q: not q.busy)

    assert engine.segmented == [text]
    assert engine.synthesized == ["One.", "Two."], "nothing after the boundary that followed the hang-up"
    assert (queue.completed, queue.cancelled) == (0, 3)
    assert b"event: done" not in running.received
