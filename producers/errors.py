"""Errors of the producers package (the HTTP API)."""

from typing import Final

RETRY_AFTER_S: Final = 5
"""When to come back after a refusal that names no time of its own (a service down, the log unsure)."""


class ProducerError(Exception):
    """Base class of every error raised by ``producers``."""


class Rejected(ProducerError):
    """The request is invalid, or cannot be taken now; ``status`` is the HTTP status to answer with, and
    ``retry_after`` (seconds) when coming back later will do."""

    def __init__(self, message: str, status: int = 422, *, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    def headers(self) -> dict[str, str] | None:
        if self.retry_after is not None:
            return {"Retry-After": str(self.retry_after)}
        return {"Retry-After": str(RETRY_AFTER_S)} if self.status == 503 else None


class LogUnreadable(ProducerError):
    """The log cannot be read in time (Kafka unreachable): a job's history or past state cannot be told."""
