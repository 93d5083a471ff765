"""One attempt of a webhook delivery: an HTTP POST, signed, to an address judged public, and what came of it.

The URL's host is resolved and judged again before each attempt (:func:`foundation.outbound.resolve_public`),
and the request connects to the first judged address with the URL's host in ``Host`` and in TLS's server name:
a name that resolves elsewhere between the judgement and the connection (DNS rebinding) is never reached.
Redirects are not followed (a redirect could name any address); an endpoint answers within
:data:`ATTEMPT_TIMEOUT_S` or the attempt failed; at most :data:`KEPT_ANSWER_BYTES` of its answer are kept.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from contracts.webhook_signatures import signature
from foundation.outbound import Network, Target, UnsafeTarget, checked_url, resolve_public

ATTEMPT_TIMEOUT_S: Final = 15.0
CONNECT_TIMEOUT_S: Final = 5.0
KEPT_ANSWER_BYTES: Final = 512


@dataclass(frozen=True)
class Attempted:
    """An attempt's outcome: delivered (a 2xx), or why not, and how long the endpoint asked to be left alone."""

    delivered: bool
    status: int | None  # the endpoint's answer; None: none (unsafe, unreachable, timed out)
    error: str
    duration_ms: int
    retry_after_s: float | None = None


def signed_headers(
    secrets: Sequence[str], webhook_id: str, timestamp: int, body: bytes, traceparent: str | None
) -> dict[str, str]:
    """Standard Webhooks' headers (one signature per secret in force, by spaces) and the job's trace."""
    headers = {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(s, webhook_id, timestamp, body) for s in secrets),
        "user-agent": "voxlog-webhooks",
    }
    if traceparent:
        headers["traceparent"] = traceparent
    return headers


class Sender:
    def __init__(self, allowed: Sequence[Network] = (), transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._allowed = tuple(allowed)
        timeout = httpx.Timeout(ATTEMPT_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
        self._http = httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=transport)

    async def close(self) -> None:
        await self._http.aclose()

    async def send(self, url: str, body: bytes, headers: dict[str, str]) -> Attempted:
        started = time.monotonic()

        def took() -> int:
            return round((time.monotonic() - started) * 1000)

        try:
            target = await resolve_public(checked_url(url, self._allowed), self._allowed)
        except UnsafeTarget as exc:
            return Attempted(False, None, f"refused: {exc}", took())
        pinned, extensions = _pinned(target)
        try:
            async with self._http.stream(
                "POST", pinned, content=body, headers={**headers, "host": _host_header(target)}, extensions=extensions
            ) as answer:
                kept = b""
                async for chunk in answer.aiter_bytes():
                    kept += chunk
                    if len(kept) >= KEPT_ANSWER_BYTES:
                        break
        except httpx.HTTPError as exc:
            return Attempted(False, None, f"{type(exc).__name__}: {exc}"[:500], took())
        if 200 <= answer.status_code < 300:
            return Attempted(True, answer.status_code, "", took())
        said = kept[:KEPT_ANSWER_BYTES].decode("utf-8", "replace")
        return Attempted(
            False, answer.status_code, f"answered {answer.status_code}: {said}"[:500], took(), _retry_after(answer)
        )


def _pinned(target: Target) -> tuple[str, dict[str, object]]:
    """The URL with its host replaced by the judged address, and TLS's server name for https."""
    parts = urlsplit(target.url)
    address = target.addresses[0]
    host = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{host}:{target.port}"
    extensions: dict[str, object] = {"sni_hostname": target.host} if target.scheme == "https" else {}
    return urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")), extensions


def _host_header(target: Target) -> str:
    default = 443 if target.scheme == "https" else 80
    return target.host if target.port == default else f"{target.host}:{target.port}"


def _retry_after(answer: httpx.Response) -> float | None:
    value = answer.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
