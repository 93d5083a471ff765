"""The client's rules, written once for the sync and the async client: what to retry, how long to wait, when to
give up, and what an answer means.

The API's retry protocol (docs/api.md): a request that got no answer, a 503 (the log or the database is away for now), a
502/504 (a proxy's) or a 429 (a limit, with ``Retry-After``) is sent again, the same request with the same
``Idempotency-Key``, so that a retry names what the first attempt named whether or not it was recorded. Waits
grow exponentially with full jitter, at least what ``Retry-After`` says, and stop at a bound on attempts and
on the total time spent waiting. Everything else (4xx) is the caller's to fix and raises at once.

:func:`exchange` is a generator: it yields what to do (send a request, sleep) and receives what happened, so
the two clients only carry out its steps, with ``httpx.Client``/``time.sleep`` or ``httpx.AsyncClient``/
``asyncio.sleep``.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Final

import httpx

from voxlog.errors import VoxlogError

RETRIED_STATUSES: Final = frozenset({429, 502, 503, 504})


class ApiError(VoxlogError):
    """The API answered with an error a retry does not fix (or the retries were spent): its status and detail."""

    def __init__(self, what: str, status: int | None, detail: str, body: object = None) -> None:
        said = f"{what} ({status}): {detail}" if status is not None else f"{what}: {detail}"
        super().__init__(said)
        self.status = status
        self.detail = detail
        self.body = body


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a request is retried. The defaults ride out a broker or database restart (tens of seconds)."""

    attempts: int = 10
    """Sends of one request at most, the first included."""
    budget_s: float = 120.0
    """Seconds spent waiting between attempts at most; a ``Retry-After`` past it ends the retries at once."""
    base_s: float = 0.25
    """The first wait's bound (full jitter: a wait is drawn between 0 and the bound, which doubles per attempt)."""
    max_s: float = 15.0
    """The bound a wait's bound stops growing at."""
    random: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before attempt ``attempt + 1`` (``attempt`` counts from 1): jittered, at least ``retry_after``."""
        bound = min(self.max_s, self.base_s * 2 ** (attempt - 1))
        drawn = bound * self.random()
        return max(drawn, retry_after) if retry_after is not None else drawn


def retry_after(response: httpx.Response, now: float | None = None) -> float | None:
    """``Retry-After`` in seconds (delta-seconds or an HTTP date), None when absent or unreadable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def detail_of(response: httpx.Response) -> str:
    """What the API said was wrong: ``detail`` (voxlog's errors), ``error.message`` (OpenAI's shape), or the text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            return str(body["detail"])
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
    return response.text.strip()[:500] or response.reason_phrase


@dataclass(frozen=True)
class Send:
    """Send this request (the same object on every attempt: same body, same ``Idempotency-Key``)."""

    request: httpx.Request
    stream: bool = False


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Send | Sleep
Outcome = httpx.Response | httpx.TransportError


def exchange(
    request: httpx.Request,
    policy: RetryPolicy,
    what: str,
    *,
    ok: frozenset[int] = frozenset({200}),
    stream: bool = False,
) -> Generator[Step, Outcome | None, httpx.Response]:
    """Send ``request`` until it is answered with a status in ``ok`` (returned), or raise :class:`ApiError`.

    A status neither in ``ok`` nor retried raises at once; a streamed answer that is retried is closed first
    by the caller (it receives only ``ok`` answers back open)."""
    waited = 0.0
    for attempt in range(1, policy.attempts + 1):
        outcome = yield Send(request, stream)
        if isinstance(outcome, httpx.Response):
            if outcome.status_code in ok:
                return outcome
            if outcome.status_code not in RETRIED_STATUSES:
                raise ApiError(what, outcome.status_code, detail_of(outcome), _body(outcome))
            reason, after = detail_of(outcome), retry_after(outcome)
            last: tuple[int | None, object] = (outcome.status_code, _body(outcome))
        else:
            assert outcome is not None
            reason, after = f"no answer ({type(outcome).__name__}: {outcome})", None
            last = (None, None)
        if attempt == policy.attempts:
            raise ApiError(what, last[0], f"{reason} (gave up after {attempt} attempts)", last[1])
        delay = policy.delay(attempt, after)
        if waited + delay > policy.budget_s:
            raise ApiError(what, last[0], f"{reason} (gave up: waiting {delay:.1f} s more would pass the retry"
                           f" budget, {policy.budget_s:g} s, after {waited:.1f} s)", last[1])  # fmt: skip
        waited += delay
        yield Sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None
