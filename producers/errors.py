"""Errors of the producers package (the HTTP API)."""


class ProducerError(Exception):
    """Base class of every error raised by ``producers``."""
