"""What both clients are built from: where the API is, the key, timeouts and the retry policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from voxlog.client.protocol import RetryPolicy


@dataclass(frozen=True)
class ClientOptions:
    base_url: str
    api_key: str | None
    timeout_s: float
    retry: RetryPolicy
    headers: Mapping[str, str]

    def httpx_kwargs(self) -> dict[str, Any]:
        """``httpx.Client``'s and ``httpx.AsyncClient``'s keywords: the key as a bearer token, a connect timeout
        of its own (an API that is away is found out in 10 s, a long answer still has ``timeout_s``)."""
        headers = {"User-Agent": "voxlog-client", **self.headers}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return {
            "base_url": self.base_url.rstrip("/"),
            "headers": headers,
            "timeout": httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s)),
        }
