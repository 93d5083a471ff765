"""Errors in OpenAI's shape, for the routes clients written for OpenAI (or Kokoro-FastAPI) call.

OpenAI answers ``{"error": {"message", "type", "param", "code"}}`` (its ``ErrorResponse``; the four keys
always there, ``param`` and ``code`` null when they say nothing), with these statuses and codes, which
voxlog follows:

* 400 ``invalid_request_error`` for every invalid request, whatever our own API would say (422, 413),
  ``param`` naming OpenAI's field at fault (``input``, ``voice``, ``speed``, ``response_format``, ...) and
  ``code``: ``missing_required_parameter``, ``unknown_parameter``, ``string_above_max_length`` (an input over
  ``VOXLOG_MAX_TEXT_CHARS``), else ``invalid_value``;
* 404 ``model_not_found`` for a model that is neither OpenAI's nor an engine's;
* 401 ``invalid_api_key``; 403 (the key lacks a scope; OpenAI's code for it is not documented: null);
* 429 ``rate_limit_exceeded`` (type ``requests``, as OpenAI's), with Retry-After;
* 5xx ``server_error``: the job failed (its own code: ``engine_error``, ``job_failed``), did not finish in
  time (504), or Kafka or PostgreSQL is unreachable (503, Retry-After).
"""

from __future__ import annotations

from typing import Any, Final

from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.types import ExceptionHandlersMap
from pydantic import BaseModel

from foundation.errors import BrokerUnavailable
from producers.errors import ProducerError, Rejected
from producers.http_errors import RETRY, broker_message, projection_message
from projections.errors import ProjectionUnavailable

# Our request's fields, as OpenAI's speech request names them.
OPENAI_PARAMS: Final = {
    "text": "input",
    "format": "response_format",
    "sample_rate": "response_format",
    "engine": "model",
}


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    error: OpenAIError


class SpeechFailed(ProducerError):
    """What the route answers in OpenAI's error shape: the job failed, timed out, or its audio is gone."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


def openai_error(
    status: int,
    message: str,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response[OpenAIErrorBody]:
    kind = "invalid_request_error" if status < 500 else "server_error"
    if status == 429:
        kind = "requests"
    body = OpenAIErrorBody(error=OpenAIError(message=message, type=kind, param=param, code=code))
    return Response(body, status_code=status, headers=headers)


def _failed(_: Request[Any, Any, Any], exc: SpeechFailed) -> Response[OpenAIErrorBody]:
    return openai_error(exc.status, str(exc), param=exc.param, code=exc.code)


def _rejected(_: Request[Any, Any, Any], exc: Rejected) -> Response[OpenAIErrorBody]:
    headers = exc.headers()
    if exc.status == 429:  # OpenAI's own status for "slow down", with its code
        return openai_error(429, str(exc), code="rate_limit_exceeded", headers=headers)
    if exc.status >= 500:
        return openai_error(exc.status, str(exc), headers=headers)
    param = OPENAI_PARAMS.get(exc.param, exc.param) if exc.param else None
    code = "string_above_max_length" if exc.status == 413 else "invalid_value" if param else None
    # OpenAI answers every invalid request with 400, whatever our own API would say.
    return openai_error(400, str(exc), param=param, code=code, headers=headers)


_DOOR_CODES: Final = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


def _bad_body(_: Request[Any, Any, Any], exc: HTTPException) -> Response[OpenAIErrorBody]:
    """Litestar's refusal of the body: fields that do not validate (named), or a body that is not JSON. The
    door's answers come here too (401, 403, 429: :mod:`producers.auth`), and a body over the route's size (413):
    those keep their own message and headers (WWW-Authenticate, Retry-After)."""
    if exc.status_code != 400:
        return openai_error(exc.status_code, exc.detail, code=_DOOR_CODES.get(exc.status_code), headers=exc.headers)
    extra = exc.extra if isinstance(exc.extra, list) and exc.extra else None
    if extra is None:
        return openai_error(exc.status_code, f"the request body is not valid JSON: {exc.detail}")
    first = extra[0] if isinstance(extra[0], dict) else {}
    param = str(first["key"]) if first.get("key") else None
    message = str(first.get("message", exc.detail))
    code = (
        "missing_required_parameter"
        if "required" in message.lower()
        else "unknown_parameter"
        if "extra inputs" in message.lower()
        else "invalid_value"
    )
    return openai_error(400, f"invalid request: {message}", param=param, code=code)


def _no_projection(request: Request[Any, Any, Any], exc: ProjectionUnavailable) -> Response[OpenAIErrorBody]:
    return openai_error(503, projection_message(request, exc), headers=RETRY)


def _no_log(request: Request[Any, Any, Any], exc: BrokerUnavailable) -> Response[OpenAIErrorBody]:
    return openai_error(503, broker_message(request, exc), headers=RETRY)


OPENAI_HANDLERS: Final[ExceptionHandlersMap] = {
    SpeechFailed: _failed,
    Rejected: _rejected,
    HTTPException: _bad_body,
    ProjectionUnavailable: _no_projection,
    BrokerUnavailable: _no_log,
}
"""The OpenAI-shaped answers of what goes wrong, for this route and those that follow its shape."""

OPENAI_ERRORS: Final = {
    status: ResponseSpec(OpenAIErrorBody, description=description)
    for status, description in {
        400: "Invalid request (OpenAI's status for every invalid request), or the job could not be spoken.",
        401: "No API key, or not a valid one: code invalid_api_key.",
        403: "The key lacks the submit scope.",
        404: "The model is unknown: code model_not_found.",
        429: "Over a rate limit or the backlog limit: code rate_limit_exceeded; retry after Retry-After.",
        500: "The job failed, or its audio is gone.",
        503: "Kafka or PostgreSQL is unreachable, or cache-only mode.",
        504: "The job did not finish within VOXLOG_SPEECH_TIMEOUT_S.",
    }.items()
}
