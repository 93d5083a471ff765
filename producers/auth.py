"""Authentication and scopes: every route but health, readiness, the schema and the dashboard's page needs a key.

A client sends ``Authorization: Bearer <key>`` (what the official ``openai``
client sends) or ``X-API-Key: <key>``. No key, a malformed one, an unknown one,
a wrong secret, a revoked or an expired key: 401, with a message that says
which (an unknown id and a wrong secret answer alike). A good key without the
scope a route needs: 403, naming the scope. Failed attempts are counted per
client address and key id (per API instance; malformed keys per address):
past ``failures_per_minute`` that key id from that address (or a malformed key
from it) is answered 429 until its minute is over. A key that verifies is never
refused by that count (see :class:`KeyBook`). The client address is the peer's,
or the one a trusted proxy's ``X-Forwarded-For`` names (``VOXLOG_TRUSTED_PROXIES``,
which uvicorn applies before the app sees the request: voxlog.composition.api).

With ``VOXLOG_AUTH=off`` every request speaks for the tenant ``default`` with
every scope (a laptop's setting: the API logs a warning at every start).
"""

from __future__ import annotations

import time
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
from producers.api_keys import ALL_SCOPES, Principal, StoredKey, Unauthenticated, judge, parse, proves
from producers.auth_failures import FailureLimit, Subject
from producers.rate_limit import RateLimiter
from projections.errors import ProjectionUnavailable

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
    """Judges presented keys by the projection's ``api_keys``, each row kept for ``cache_s``; counts the keys
    that fail (:class:`producers.auth_failures.FailureLimit`).

    A presented key is checked first, and a key that verifies is let in whatever was counted against its
    address: behind a proxy every client may share one address, and another client's failures must not lock
    a good key out. Failures are counted per (address, key id), and per address for what does not parse, so
    one client's bad keys do not refuse another's either. What then stops brute force:

    - a secret is 32 random bytes; no number of guesses a limit could allow finds one, so checking every
      presented key first costs nothing there (the limit never was what protected a secret);
    - a wrong secret for a key id (a real one or not) is refused (429) past the limit for that (address, key
      id), and then checked only against the row already read for that id: no database read;
    - a credential that does not parse is refused per address, and never costs a database read;
    - the map of counts is bounded (``failure_entries``), so a flood of addresses or ids costs memory no
      more than that; flooding it forgets the oldest counts, which the first point makes harmless.

    What it does not stop: a client sending many different well-formed key ids, each a subject of its own,
    costs one indexed read per id per ``cache_s`` (as before, every unknown id was one read).
    """

    def __init__(
        self, rows: KeyRows, cache_s: float, failures_per_minute: int = 20, failure_entries: int = 10_000
    ) -> None:
        self._rows = rows
        self._cache_s = cache_s
        self._read: dict[str, tuple[StoredKey | None, float]] = {}
        self._failures = FailureLimit(failures_per_minute, window_s=60.0, max_entries=failure_entries)

    async def principal(self, token: str, client: str) -> Principal:
        try:
            key_id, secret = parse(token)
        except Unauthenticated:
            self._count((client, None))
            raise
        subject = (client, key_id)
        if self._failures.over(subject) and not self._may_prove(key_id, secret):
            self._count(subject)  # refused: a wrong secret, judged by what was read, without reading again
        try:
            return judge(await self._stored(key_id), key_id, secret)
        except Unauthenticated:
            self._count(subject)
            raise

    def _may_prove(self, key_id: str, secret: str) -> bool:
        """Whether ``secret`` may be the key's, as far as what was read of it tells without reading it again:
        a key never read (or forgotten), or read as unknown longer than ``cache_s`` ago (it may have been
        issued since), is read."""
        read = self._read.get(key_id)
        if read is None or (read[0] is None and time.monotonic() - read[1] >= self._cache_s):
            return True
        return proves(read[0], secret)

    def _count(self, subject: Subject) -> None:
        retry_after = self._failures.failed(subject)
        if retry_after is None:
            return
        client, key_id = subject
        what = f"of API key {key_id}" if key_id is not None else "with malformed keys"
        raise TooManyRequestsException(
            detail=f"too many failed authentications {what} from {client}: retry in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )

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
