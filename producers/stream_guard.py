"""Streamed answers whose client stops reading are closed, and what they held is released.

A streamed answer (``POST /v1/audio/speech`` as audio or server-sent events, a document's or a chapter's audio)
sends a chunk when the client has taken the one before: the server's send waits while the connection's buffers
are full. A client that never reads held its stream open forever, with its job's change watch, its encoder and
its place in the job's audience. :class:`SendTimeout` bounds each send of a streamed body (30 s:
``voxlog.composition.api.STREAM_SEND_TIMEOUT_S``): past it the answer ends (the server closes the connection,
the client sees an incomplete body), it is logged and counted (``voxlog_streams_stalled_total``).

The body's iterators are closed as the request ends, whatever ended it (a stall, the client leaving, an
error): the route names them (:func:`closed_at_end`). Left to the garbage collector, an iterator suspended at
a send is closed whenever its last reference goes, which an exception's traceback may keep for a while.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextvars import ContextVar
from typing import Any, TypeVar

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from foundation.metrics import STREAMS_STALLED
from producers.errors import ProducerError

T = TypeVar("T")
log = structlog.get_logger("voxlog.api")
_OPEN: ContextVar[list[AsyncIterator[Any]] | None] = ContextVar("voxlog_open_streams", default=None)


class StreamStalled(ProducerError):
    """The client took no chunk of a streamed answer within the send timeout."""


def closed_at_end(iterator: AsyncIterator[T]) -> AsyncIterator[T]:
    """``iterator``, closed when the request that made it ends (:class:`SendTimeout`): the route calls this on
    each iterator of a streamed body that holds something (a watch, an encoder), innermost first."""
    streams = _OPEN.get()
    if streams is not None:
        streams.append(iterator)
    return iterator


def _streamed(message: Message) -> bool:
    """A chunk of a streamed body, or its end (a whole body in one message is not timed: it may be long)."""
    return message["type"] == "http.response.body" and (bool(message.get("more_body")) or not message.get("body"))


class SendTimeout:
    """ASGI middleware: each send of a streamed body within ``timeout_s``; the request's streams closed at its end."""

    def __init__(self, app: ASGIApp, timeout_s: float = 30.0) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        streams: list[AsyncIterator[Any]] = []
        token = _OPEN.set(streams)
        stalled = False

        async def bounded_send(message: Message) -> None:
            nonlocal stalled
            if not _streamed(message):
                await send(message)
                return
            try:
                async with asyncio.timeout(self.timeout_s):
                    await send(message)
            except TimeoutError:
                stalled = True
                raise StreamStalled(f"the client took no chunk within {self.timeout_s:g} s") from None

        try:
            await self.app(scope, receive, bounded_send)
        except Exception:
            if not stalled:
                raise
            # Litestar wraps it ("after response started"): the stall is the cause, and is said here.
            route = str(scope.get("path_template") or scope.get("path", ""))
            STREAMS_STALLED.labels(route).inc()
            log.warning(
                "a streamed answer's client took no chunk in time: the stream is closed",
                path=str(scope.get("path", "")),
                timeout_s=self.timeout_s,
            )
        finally:
            _OPEN.reset(token)
            await _close(reversed(streams))


async def _close(streams: Any) -> None:
    for stream in streams:
        aclose = getattr(stream, "aclose", None)
        if aclose is None:
            continue
        try:
            await aclose()
        except Exception as exc:  # one stream's cleanup failing leaves the others' to run
            log.warning("closing a streamed answer failed", error=repr(exc))
