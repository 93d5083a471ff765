"""One trace per request: the API continues the client's W3C ``traceparent``, or starts a trace.

The request's span is made here, outermost, so that everything the request
does happens within it (:func:`foundation.tracing.within`): the submission
pipeline records it in each new job's ``JobQueued`` (``payload.traceparent``),
the Kafka adapter gives the records it sends their spans in it, and every log
line carries its ``trace_id``. The answer names the span in a ``traceresponse``
header (W3C Trace Context level 2), so that a client that sent none (``voxlog
check``, say) still learns its trace.
"""

from __future__ import annotations

from typing import Final

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from contracts import TraceContext, new_trace, parse_traceparent
from foundation import tracing

TRACERESPONSE: Final = "traceresponse"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def request_trace(scope: Scope) -> tuple[TraceContext, str | None]:
    """The request's span (a child of the client's, else the first of a new trace) and its parent's id."""
    parent = parse_traceparent(_header(scope, b"traceparent"))
    if parent is None:
        return new_trace(), None
    return parent.child(), parent.span_id


class RequestTrace:
    """ASGI middleware: the request runs within its span, recorded as a ``server`` span once answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        trace, parent = request_trace(scope)
        route = scope.get("path_template") or scope.get("path", "")
        span = tracing.OpenSpan(f"{scope.get('method', 'GET')} {route}", trace, parent, "server")
        status = 500

        async def traced_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [*message.get("headers", ()), (TRACERESPONSE.encode(), trace.traceparent.encode())]
                message = {**message, "headers": headers}
            await send(message)

        try:
            with tracing.within(trace):
                await self.app(scope, receive, traced_send)
        finally:
            error = f"answered {status}" if status >= 500 else None
            span.end(
                error=error,
                attributes={"http.request.method": str(scope.get("method", "")), "http.response.status_code": status},
            )
