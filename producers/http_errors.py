"""Domain errors as HTTP answers: one handler per error, and the OpenAPI entries of each status.

A handler raises what went wrong in the domain's terms (``Rejected`` with its
status, ``ProjectionUnavailable``, ``BrokerUnavailable``, Litestar's own
``NotFoundException``); the app turns each into an :class:`ErrorBody` here,
with ``Retry-After`` where coming back later will do. Routes declare which
statuses they answer with :func:`responses`, so that /schema lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec

from foundation.errors import BrokerUnavailable, PublishUnconfirmed
from producers.errors import RETRY_AFTER_S, LogUnreadable, Rejected
from producers.submission import InvalidItems
from producers.unreachable import unreachable
from producers.views import ErrorBody
from projections.errors import ProjectionUnavailable

log = structlog.get_logger("voxlog.api")
RETRY: Final = {"Retry-After": str(RETRY_AFTER_S)}

_MEANINGS: Final = {
    400: "The body is not what the route takes (Litestar names the field).",
    401: "No API key, or not a good one (malformed, unknown, revoked, expired): the message says which.",
    403: "The API key lacks the scope this route needs: the message names it.",
    404: "Unknown (or not yet projected: a job just submitted appears within a moment); another tenant's too.",
    409: "The state of the resource does not allow it (not finished yet, finished already, key reused).",
    410: "The audio expired (VOXLOG_JOB_RETENTION_S).",
    413: "Over a size limit (the message names it).",
    422: "Invalid: the message says what to fix.",
    429: "Over a limit (the message names it: the backlog, VOXLOG_MAX_BACKLOG_S; the key's rate or its tenant's"
    " quotas, VOXLOG_LIMIT_*; failed authentications of the key id, or of malformed keys, from the address): retry"
    " after Retry-After.",
    503: "A service voxlog needs is unreachable (PostgreSQL or Kafka), or cache-only mode: retry after Retry-After.",
}


def responses(*statuses: int, **overrides: ResponseSpec) -> dict[int, ResponseSpec]:
    """The OpenAPI entries of ``statuses`` (an :class:`ErrorBody` each) and of ``overrides`` (by status,
    written ``_200=ResponseSpec(...)``): what a route's ``responses=`` takes. A route that takes a key (it lists
    401) is answered 429 too, by the door (:mod:`producers.auth`: the key's rate, the address's failures)."""
    keyed = (429,) if 401 in statuses else ()
    specs = {
        status: ResponseSpec(data_container=ErrorBody, description=_MEANINGS[status])
        for status in dict.fromkeys((*statuses, *keyed))
    }
    specs.update({int(name.lstrip("_")): spec for name, spec in overrides.items()})
    return specs


def error_response(status: int, detail: str, headers: Mapping[str, str] | None = None, **extra: Any) -> Response[Any]:
    body = ErrorBody(status_code=status, detail=detail, **extra)
    return Response(body, status_code=status, headers=dict(headers or {}))


def _rejected(_: Request[Any, Any, Any], exc: Rejected) -> Response[Any]:
    headers = exc.headers()
    errors = [vars(item) for item in exc.invalid[:100]] if isinstance(exc, InvalidItems) else None
    return error_response(exc.status, str(exc), headers, errors=errors)


def projection_message(request: Request[Any, Any, Any], exc: ProjectionUnavailable) -> str:
    """A 503's words for PostgreSQL down: the driver's error (its hosts) goes to the log, not to the client."""
    said = unreachable("postgres", exc, method=request.method, path=request.url.path)
    return f"{said}: the projections (job status, keys, usage) cannot be read now; retry after Retry-After"


def _projection_unavailable(request: Request[Any, Any, Any], exc: ProjectionUnavailable) -> Response[Any]:
    return error_response(503, projection_message(request, exc), RETRY)


def _log_unreadable(request: Request[Any, Any, Any], exc: LogUnreadable) -> Response[Any]:
    said = unreachable("kafka", exc, method=request.method, path=request.url.path)
    return error_response(503, f"the log cannot be read ({said}): retry after Retry-After", RETRY)


def broker_message(request: Request[Any, Any, Any], exc: BrokerUnavailable) -> str:
    """A 503's words for Kafka down or slow: the driver's error goes to the log, not to the client."""
    said = unreachable("kafka", exc, method=request.method, path=request.url.path)
    if isinstance(exc, PublishUnconfirmed):
        return "the job log (Kafka) did not confirm it in time; it may still be recorded: retry"
    return f"{said}: nothing was recorded by this request; retry after Retry-After"


def _broker_unavailable(request: Request[Any, Any, Any], exc: BrokerUnavailable) -> Response[Any]:
    return error_response(503, broker_message(request, exc), RETRY)


def _http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.status_code >= 500:
        return _unexpected(request, exc)
    extra = exc.extra if isinstance(exc.extra, (list, dict)) else None
    return error_response(exc.status_code, exc.detail, exc.headers, extra=extra)


def _unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """A bug: logged with its traceback (and its cause's), answered 500 without details."""
    log.error("unexpected error", method=request.method, path=request.url.path, exc_info=exc)
    return error_response(500, "internal error: the API's log has the details")


EXCEPTION_HANDLERS: Final = {
    Rejected: _rejected,
    ProjectionUnavailable: _projection_unavailable,
    BrokerUnavailable: _broker_unavailable,
    LogUnreadable: _log_unreadable,
    HTTPException: _http,
    Exception: _unexpected,
}
