"""Errors of the consumers package (worker and sweeper)."""


class ConsumerError(Exception):
    """Base class of every error raised by ``consumers``."""


class InputRejected(ConsumerError):
    """The engine cannot speak this request (no pronounceable text, unknown voice): not retryable."""


class TransientEngineError(ConsumerError):
    """The engine failed in a way a retry may fix."""


class BlobWriteFailed(ConsumerError):
    """A segment's audio could not be stored (a full disk, a broken mount): retryable."""


class EngineHung(ConsumerError):
    """An engine call never returned: the job was given back, and this process cannot synthesize again."""
