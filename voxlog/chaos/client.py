"""The load's HTTP client: requests spread over every API instance, each answer that was not a success counted.

A production client reaches the API through a load balancer; this one stands in for a plain one (no health
checks): each request goes to the next instance in turn, so a request can land on an instance that is
restarting and get no answer. The client's own rule, the one docs/api.md documents, absorbs that: no answer,
a 503 or a 429 is sent again, with the same Idempotency-Key. What a user would see without that rule is
counted here (``errors``), and what the rule did not absorb is counted by the caller.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

import httpx

RETRIED: Final = frozenset({429, 503})
"""The answers the documented retry sends again (with the same Idempotency-Key), as it does no answer."""


class SpreadClient:
    """``post`` and ``get`` as httpx's, each to the next of ``bases``; every failure counted by what it was."""

    def __init__(self, bases: Sequence[str], timeout: float = 30.0) -> None:
        if not bases:
            raise ValueError("a client needs at least one API instance")
        self._clients = [httpx.AsyncClient(base_url=base, timeout=timeout) for base in bases]
        self._next = itertools.cycle(self._clients)
        self.errors: Counter[str] = Counter()  # "POST 503", "GET no answer", ...

    async def __aenter__(self) -> SpreadClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for client in self._clients:
            await client.aclose()

    @property
    def failures(self) -> int:
        return sum(self.errors.values())

    async def post(self, url: str, **options: Any) -> httpx.Response:
        return await self._send("POST", url, **options)

    async def get(self, url: str, **options: Any) -> httpx.Response:
        return await self._send("GET", url, **options)

    async def _send(self, method: str, url: str, **options: Any) -> httpx.Response:
        try:
            response = await next(self._next).request(method, url, **options)
        except httpx.TransportError:
            self.errors[f"{method} no answer"] += 1
            raise
        if response.status_code >= 500 or response.status_code in RETRIED:
            self.errors[f"{method} {response.status_code}"] += 1
        return response
