"""Authentication and scopes: every route but health, readiness, the schema and the dashboard's page needs a key.

A client sends ``Authorization: Bearer <key>`` (what the official ``openai``
client sends) or ``X-API-Key: <key>``. No key, a malformed one, an unknown one,
a wrong secret, a revoked or an expired key: 401, with a message that says
which (an unknown id and a wrong secret answer alike). A good key without the
scope a route needs: 403, naming the scope. Failed attempts are counted per
client address (per API instance): past ``failures_per_minute`` the address is
answered 429 until its minute is over, whatever it sends.

With ``VOXLOG_AUTH=off`` every request speaks for the tenant ``default`` with
every scope (a laptop's setting: the API logs a warning at every start).
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

import structlog
from litestar.connection import ASGIConnection
from litestar.datastructures import MutableScopeHeaders
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException, TooManyRequestsException
from litestar.handlers.base import BaseRouteHandler
from litestar.middleware import AbstractAuthenticationMiddleware, AuthenticationResult
from litestar.types import Message, Scope

from contracts import DEFAULT_TENANT
from producers.api_keys import ALL_SCOPES, Principal, StoredKey, Unauthenticated, judge, parse
from producers.queries import ProjectionUnavailable
from producers.rate_limit import RateLimiter

log = structlog.get_logger("voxlog.api")
PUBLIC_PATHS: Final = ("^/healthz$", "^/readyz$", "^/schema(/|$)", "^/dashboard$")
"""Paths that need no key (regular expressions, as Litestar's ``exclude`` takes them: searched anywhere in the
path, so anchored at both ends)."""
ANONYMOUS: Final = Principal(DEFAULT_TENANT, None, frozenset(ALL_SCOPES))
"""Whom every request speaks for while auth is off."""
_CHALLENGE: Final = {"WWW-Authenticate": 'Bearer realm="voxlog"'}
_LIMIT_HEADERS: Final = "voxlog.limit_headers"


class KeyRows(Protocol):
    async def api_key(self, key_id: str) -> StoredKey | None:
        """The key's row (``ProjectionUnavailable`` while PostgreSQL cannot be read)."""
        ...


class KeyBook:
    """Judges presented keys by the projection's ``api_keys``, each row kept for ``cache_s``."""

    def __init__(self, rows: KeyRows, cache_s: float, failures_per_minute: int = 20) -> None:
        self._rows = rows
        self._cache_s = cache_s
        self._read: dict[str, tuple[StoredKey | None, float]] = {}
        self._failures: defaultdict[str, deque[float]] = defaultdict(deque)
        self._failures_per_minute = failures_per_minute

    async def principal(self, token: str, client: str) -> Principal:
        self._refuse_if_failing(client)
        try:
            key_id, secret = parse(token)
            return judge(await self._stored(key_id), key_id, secret)
        except Unauthenticated:
            self._failures[client].append(time.monotonic())
            raise

    async def _stored(self, key_id: str) -> StoredKey | None:
        read = self._read.get(key_id)
        if read is not None and time.monotonic() - read[1] < self._cache_s:
            return read[0]
        try:
            stored = await self._rows.api_key(key_id)
        except ProjectionUnavailable:
            if read is None:
                raise
            return read[0]  # what was read last, rather than refusing every client while PostgreSQL is down
        if len(self._read) > 100_000:
            self._read.clear()
        self._read[key_id] = (stored, time.monotonic())
        return stored

    def _refuse_if_failing(self, client: str) -> None:
        failures = self._failures[client]
        now = time.monotonic()
        while failures and now - failures[0] > 60:
            failures.popleft()
        if len(failures) >= self._failures_per_minute:
            retry_after = max(1, round(60 - (now - failures[0])))
            raise TooManyRequestsException(
                detail=f"too many failed authentications from {client}: retry in {retry_after} s",
                headers={"Retry-After": str(retry_after)},
            )


def presented_key(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    authorization = connection.headers.get("authorization")
    if authorization:
        scheme, _, token = authorization.partition(" ")
        return token if scheme.lower() == "bearer" else None
    return connection.headers.get("x-api-key")


class KeyAuthentication(AbstractAuthenticationMiddleware):
    """Sets the request's user to its :class:`Principal` (``request.user``), or answers 401 / 429; takes the
    request from its key's rate (:mod:`producers.rate_limit`), whose headers :func:`add_limit_headers` adds."""

    def __init__(self, app: Any, book: KeyBook | None, limiter: RateLimiter | None = None, exclude: Any = None) -> None:
        super().__init__(app, exclude=exclude)
        self._book = book
        self._limiter = limiter

    async def authenticate_request(self, connection: ASGIConnection[Any, Any, Any, Any]) -> AuthenticationResult:
        if self._book is None:
            return AuthenticationResult(user=ANONYMOUS, auth=None)
        token = presented_key(connection)
        client = connection.client.host if connection.client else "unknown"
        if not token:
            raise NotAuthorizedException(
                detail="this route needs an API key: send Authorization: Bearer <key> or X-API-Key: <key>",
                headers=_CHALLENGE,
            )
        try:
            principal = await self._book.principal(token, client)
        except Unauthenticated as exc:
            raise NotAuthorizedException(detail=str(exc), headers=_CHALLENGE) from exc
        if self._limiter is not None:
            connection.scope.setdefault("state", {})[_LIMIT_HEADERS] = await self._limiter.take(principal)
        return AuthenticationResult(user=principal, auth=principal.key_id)


async def add_limit_headers(message: Message, scope: Scope) -> None:
    """Litestar's ``before_send``: every answer to a key says where its rate stands (``RateLimit``)."""
    if message["type"] == "http.response.start":
        headers = scope.get("state", {}).get(_LIMIT_HEADERS)
        if headers:
            response_headers = MutableScopeHeaders.from_message(message)
            for name, value in headers.items():
                response_headers.add(name, value)


Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]


def requires(scope: str) -> Guard:
    """A route guard: 403 unless the request's key has ``scope``.

    A coroutine function: Litestar runs a plain function guard in its thread pool, and that hop, on every
    request, was a fifth of the API's CPU under load (bench/profile_cpu.py)."""

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        principal: Principal = connection.user
        if scope not in principal.scopes:
            raise PermissionDeniedException(
                detail=f"API key {principal.key_id} lacks the {scope!r} scope this route needs"
                f" (it has: {', '.join(sorted(principal.scopes)) or 'none'})"
            )

    return guard


SUBMIT: Final = [requires("submit")]
READ: Final = [requires("read")]
ADMIN: Final = [requires("admin")]
OPERATOR: Final = [requires("operator")]
