"""Errors of the producers package (the HTTP API)."""

from collections.abc import Mapping
from typing import Final

RETRY_AFTER_S: Final = 5
"""When to come back after a refusal that names no time of its own (a service down, the log unsure)."""


class ProducerError(Exception):
    """Base class of every error raised by ``producers``."""


class Rejected(ProducerError):
    """The request is invalid, or cannot be taken now; ``status`` is the HTTP status to answer with, and
    ``retry_after`` (seconds) when coming back later will do. ``param`` names the request field at fault,
    where there is one (as ``POST /v1/jobs`` names it; the OpenAI-shaped answers name it and give a code)."""

    def __init__(
        self,
        message: str,
        status: int = 422,
        *,
        retry_after: int | None = None,
        headers: Mapping[str, str] | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.param = param
        self.status = status
        self.retry_after = retry_after
        self.extra_headers = dict(headers or {})  # a limit's RateLimit and RateLimit-Policy

    def headers(self) -> dict[str, str] | None:
        retry_after = (
            self.retry_after if self.retry_after is not None else RETRY_AFTER_S if self.status == 503 else None
        )
        headers = {**self.extra_headers, **({"Retry-After": str(retry_after)} if retry_after is not None else {})}
        return headers or None


class LogUnreadable(ProducerError):
    """The log cannot be read in time (Kafka unreachable): a job's history or past state cannot be told."""
