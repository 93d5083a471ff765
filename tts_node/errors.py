"""Errors raised by the TTS engine layer.

The split matters to callers: an ``EngineInputError`` fails the job for good,
an ``EngineFailure`` may succeed on retry, a ``ModelUnavailable`` means this
node cannot serve at all until its model files are fixed.
"""

from __future__ import annotations


class TtsNodeError(Exception):
    """Base of every error raised by ``tts_node``."""


class EngineInputError(TtsNodeError):
    """The request cannot be spoken as given; retrying will not help."""


class EngineFailure(TtsNodeError):
    """The model or its runtime failed on valid input; retrying may help."""


class ModelUnavailable(TtsNodeError):
    """Model weights or data files are missing or corrupt."""
