"""Errors raised while managing the local infrastructure."""


class InfraError(Exception):
    """Base class of every error raised by ``infra``; its message says what to do."""
