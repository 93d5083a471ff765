"""Speed factors: the range a request may ask for, and how much of it the model itself makes.

A request may ask for 0.25 to 4.0 (``SPEED_RANGE``, OpenAI's range). Kokoro takes a speed factor too, but
its durations are whole 25 ms frames (600 samples at 24 kHz), rounded, and at least one frame a phoneme
(``pred_dur = round(duration / speed).clamp(min=1)``): the faster it is asked to speak, the more short
phonemes bottom out at one frame, and the speech is not as fast as asked. Measured on the int8 model (two
segments, 6.12 s at 1.0): 0.25 and 0.5 give 0.25 and 0.51 times as fast, but 2.0 gives 1.86, 3.0 2.27
and 4.0 2.43. So the model makes ``NATIVE_SPEED_RANGE`` (0.25 to 2.0), and what is asked beyond it is made
at 2.0 and time-stretched, pitch preserved (WSOLA, ``tts_node.time_stretch``), by the rest: 4.0 is the
model at 2.0, then twice as fast (3.71 times as fast as 1.0, measured, where the model alone gave 2.43).

Both the API (the fingerprint) and the worker (the audio) split a speed with :func:`split_speed`, so the
rule is written once; a stretched request's fingerprint and segment keys name ``STRETCH_VERSION``, so audio
made by the model at such a speed (an API configured to send it there) is never served for a stretched one.
"""

from __future__ import annotations

import math
from typing import Final

SPEED_RANGE: Final = (0.25, 4.0)
NATIVE_SPEED_RANGE: Final = (0.25, 2.0)
STRETCH_VERSION: Final = "wsola-1"
"""Names the time-stretching algorithm and its parameters: a change of either changes it."""


def split_speed(speed: float) -> tuple[float, float]:
    """``(model speed, stretch factor)`` whose product is ``speed``: the model's speed clamped to
    ``NATIVE_SPEED_RANGE``, and the factor (1.0 inside it) by which its audio is then made faster (> 1)
    or slower (< 1)."""
    if not math.isfinite(speed) or speed <= 0:
        raise ValueError(f"speed must be a finite number > 0, not {speed!r}")
    low, high = NATIVE_SPEED_RANGE
    native = min(max(speed, low), high)
    return native, (1.0 if native == speed else speed / native)


def stretched(speed: float) -> bool:
    """Whether ``speed`` is beyond what the model makes, and so time-stretched (never for a speed that is
    not a positive number: the fingerprint of such a request is hashed before it is refused)."""
    low, high = NATIVE_SPEED_RANGE
    return math.isfinite(speed) and speed > 0 and not low <= speed <= high
