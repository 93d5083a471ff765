"""The node's own HTTP face: synthesize directly, streamed per segment or as one file.

Every request goes through the node's ``SynthesisQueue``, so HTTP callers and the
job worker share the model fairly, in arrival order.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import structlog
import uvicorn
from litestar import Litestar, Request, Response, get, post
from litestar.exceptions import HTTPException
from litestar.params import JSONBody
from litestar.response import ServerSentEvent, ServerSentEventMessage
from pydantic import BaseModel, ConfigDict, Field

from contracts.speed import SPEED_RANGE
from foundation.audio import encode_wav
from foundation.audio_formats import UnsupportedAudio, check, encode, media_type
from foundation.shutdown import BoundedServer, Shutdown
from tts_node.engine import Audio, Engine, EngineInfo
from tts_node.engine_thread import EngineThread
from tts_node.errors import EngineInputError, TtsNodeError
from tts_node.fifo import QueueClosed, SegmentAudio, SynthesisQueue

log = structlog.get_logger("voxlog.tts_node")


class SpeakRequest(BaseModel):
    """POST /tts/stream body."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(description="What to say.")
    voice: str = Field(description="A voice of this node's model (GET /health counts them).")
    speed: float = Field(1.0, description="Speed factor.")
    lang: str = Field("en-us", description="Language of the text.")


class FileRequest(SpeakRequest):
    """POST /tts body: a SpeakRequest plus the output encoding."""

    format: str = Field("wav", description="Audio format: see foundation.audio_formats.supported_formats().")
    sample_rate: int = Field(24000, description="Sample rate of the file: 16000, 22050, 24000, 44100 or 48000.")


@dataclass(frozen=True)
class NodeDeps:
    queue: SynthesisQueue
    info: EngineInfo
    speed_range: tuple[float, float]
    max_text_chars: int


def _deps(request: Request[Any, Any, Any]) -> NodeDeps:
    deps: NodeDeps = request.app.state.node
    return deps


def _reject(message: str) -> HTTPException:
    return HTTPException(detail=message, status_code=422)


def _validate(body: SpeakRequest, deps: NodeDeps) -> None:
    """Checks the engine would make later, made before the request takes a place in the queue."""
    info = deps.info
    if not body.text.strip():
        raise _reject("text is empty: send at least one word")
    if len(body.text) > deps.max_text_chars:
        raise _reject(f"text has {len(body.text)} characters; the limit is {deps.max_text_chars}: split it")
    if body.voice not in info.voices:
        raise _reject(f"unknown voice {body.voice!r}; known voices: {', '.join(info.voices)}")
    low, high = deps.speed_range
    if not (math.isfinite(body.speed) and low <= body.speed <= high):
        raise _reject(f"speed {body.speed} is out of range; use {low} to {high}")
    if body.lang.strip().lower() not in info.languages:
        raise _reject(f"unsupported lang {body.lang!r}; supported: {', '.join(info.languages)}")


def _segment_event(seg: SegmentAudio) -> ServerSentEventMessage:
    data = {
        "index": seg.index,
        "text": seg.text,
        "start": seg.start,
        "end": seg.end,
        "duration_ms": round(len(seg.samples) * 1000 / seg.sample_rate),
        "synth_ms": round(seg.synth_ms),
        "sample_rate": seg.sample_rate,
        "audio": base64.b64encode(encode_wav(seg.samples, seg.sample_rate)).decode("ascii"),
    }
    return ServerSentEventMessage(event="segment", data=json.dumps(data))


def _error_event(exc: Exception) -> ServerSentEventMessage:
    kind = "input" if isinstance(exc, EngineInputError) else "unavailable" if isinstance(exc, QueueClosed) else "engine"
    return ServerSentEventMessage(event="error", data=json.dumps({"kind": kind, "message": str(exc)}))


async def _sse(queue: SynthesisQueue, body: SpeakRequest) -> AsyncIterator[ServerSentEventMessage]:
    # Litestar cancels this generator when the client disconnects; closing the
    # queue's stream then withdraws or stops the request (SynthesisQueue.stream).
    segments, duration_ms, synth_ms, wait_ms = 0, 0.0, 0.0, 0.0
    try:
        async with aclosing(queue.stream(body.text, body.lang, body.voice, body.speed)) as stream:
            async for seg in stream:
                segments += 1
                duration_ms += len(seg.samples) * 1000 / seg.sample_rate
                synth_ms += seg.synth_ms
                wait_ms = seg.queue_wait_ms
                yield _segment_event(seg)
    except TtsNodeError as exc:
        yield _error_event(exc)
        return
    except Exception as exc:
        log.exception("streaming synthesis failed")
        yield _error_event(RuntimeError(f"internal error: {type(exc).__name__}"))
        return
    totals = {"segments": segments, "duration_ms": round(duration_ms), "synth_ms": round(synth_ms)}
    yield ServerSentEventMessage(event="done", data=json.dumps({**totals, "queue_wait_ms": round(wait_ms)}))


@post("/tts/stream", status_code=200, summary="Synthesize, one server-sent event per segment as it is ready")
async def tts_stream(request: Request[Any, Any, Any], data: JSONBody[SpeakRequest]) -> ServerSentEvent:
    deps = _deps(request)
    _validate(data, deps)
    return ServerSentEvent(_sse(deps.queue, data))


async def _collect(queue: SynthesisQueue, body: SpeakRequest) -> tuple[Audio, int]:
    async with aclosing(queue.stream(body.text, body.lang, body.voice, body.speed)) as stream:
        parts = [seg async for seg in stream]
    return np.concatenate([p.samples for p in parts]), parts[0].sample_rate


async def _until_disconnect(request: Request[Any, Any, Any]) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request[Any, Any, Any], body: SpeakRequest) -> tuple[Audio, int] | None:
    """The request's audio, or None once the client has gone (its request is then withdrawn)."""
    # Nothing else notices a client that gave up on a plain response; without
    # this its text would keep the model busy to the end.
    work = asyncio.ensure_future(_collect(_deps(request).queue, body))
    watch = asyncio.ensure_future(_until_disconnect(request))
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
        await asyncio.wait({work, watch})
    return None if work.cancelled() else work.result()


@post("/tts", status_code=200, summary="Synthesize the whole text and return one audio file")
async def tts_file(request: Request[Any, Any, Any], data: JSONBody[FileRequest]) -> Response[bytes]:
    deps = _deps(request)
    _validate(data, deps)
    try:
        fmt, rate = check(data.format, data.sample_rate)
        result = await _unless_disconnected(request, data)
        if result is None:
            return Response(b"", status_code=499)  # nginx's "client closed request": nobody reads it
        audio = await asyncio.to_thread(encode, *result, fmt, rate)
    except (UnsupportedAudio, EngineInputError) as exc:
        raise _reject(str(exc)) from exc
    except QueueClosed as exc:
        raise HTTPException(detail=str(exc), status_code=503, headers={"Retry-After": "5"}) from exc
    return Response(audio, media_type=media_type(fmt))


@get("/health", summary="Model, device and queue state of this node")
async def health(request: Request[Any, Any, Any]) -> dict[str, Any]:
    deps = _deps(request)
    info, queue = deps.info, deps.queue
    return {
        "status": "ok",
        "model": {"engine": info.name, "model_version": info.model_version},
        "device": info.device,
        "sample_rate": info.sample_rate,
        "voices": len(info.voices),
        "languages": list(info.languages),
        "queue": {
            "depth": queue.depth,
            "busy": queue.busy,
            "completed": queue.completed,
            "cancelled": queue.cancelled,
            "failed": queue.failed,
        },
    }


def create_node_app(
    queue: SynthesisQueue,
    engine_info: EngineInfo,
    *,
    speed_range: tuple[float, float] = SPEED_RANGE,
    max_text_chars: int = 5000,
    stop_grace_s: float = 30.0,
) -> Litestar:
    """The node app; its lifespan starts ``queue`` and stops it with ``stop_grace_s`` for the running request."""

    @asynccontextmanager
    async def run_queue(_: Litestar) -> AsyncIterator[None]:
        await queue.start()
        try:
            yield
        finally:
            await queue.stop(stop_grace_s)

    app = Litestar(route_handlers=[tts_stream, tts_file, health], lifespan=[run_queue])
    app.state.node = NodeDeps(queue, engine_info, speed_range, max_text_chars)
    return app


class _NodeServer(BoundedServer):
    def __init__(self, config: uvicorn.Config, queue: SynthesisQueue, shutdown: Shutdown) -> None:
        super().__init__(config, shutdown)
        self._queue = queue

    async def shutdown(self, sockets: Any = None) -> None:
        # uvicorn waits for open responses before the lifespan shutdown, and queued
        # streams would hold it for as long as the queue is deep: drop them now.
        self._queue.close()
        await super().shutdown(sockets)


async def serve_node(
    engine: Engine, host: str, port: int, shutdown: Shutdown, thread: EngineThread | None = None
) -> None:
    """Serve ``engine`` over HTTP until SIGTERM/SIGINT, stopping within ``shutdown``'s time: open responses
    get half of it, the running request the other half to finish. Its requests run on ``thread``, the one
    the engine was loaded on (:mod:`tts_node.engine_thread`), or on a thread of their own."""
    queue = SynthesisQueue(engine, thread)
    app = create_node_app(queue, engine.info, stop_grace_s=shutdown.timeout_s / 2)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False)
    await shutdown.run(_NodeServer(config, queue, shutdown).serve())
