"""Degraded mode: what a new synthesis becomes while an operator or the backlog holds the mode on.

Past ``VOXLOG_DEGRADE_BACKLOG_S`` (the sweeper's switch) or by the operator's
``voxlog admin degraded on``, the API takes new syntheses at cheaper settings
instead of refusing them: the request's speed times ``speed_factor`` (capped
at 4.0, the fastest speed accepted; Kokoro's time is about proportional to the audio's
length, so this is what the fleet drains faster by) and a lower output
``sample_rate`` (the model's own rate is unchanged, so this saves bytes, not
synthesis time). The submission pipeline (:mod:`producers.submission`)
rewrites the request before it is fingerprinted, so that the job's
fingerprint is the audio it will have: degraded duplicates coalesce, and a
later full-quality request is synthesized anew. What is cached or in flight at
full quality costs nothing and is never degraded.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Final

from contracts import DegradedFrom, SynthesisRequest
from foundation.audio_formats import SUPPORTED_RATES, UnsupportedAudio, check
from producers.errors import ProducerError

MAX_REASON_CHARS: Final = 1000


class DegradedSettingsInvalid(ProducerError):
    """``VOXLOG_DEGRADED_*`` name something no request could be degraded to."""


@dataclass(frozen=True)
class DegradedSettings:
    sample_rate: int  # 0: keep the request's
    speed_factor: float  # 1: keep the request's
    max_speed: float

    def __post_init__(self) -> None:
        if self.sample_rate and self.sample_rate not in SUPPORTED_RATES:
            raise DegradedSettingsInvalid(
                f"VOXLOG_DEGRADED_SAMPLE_RATE={self.sample_rate} is not a rate voxlog delivers; use 0 (keep the"
                f" request's) or one of {', '.join(map(str, SUPPORTED_RATES))}"
            )


def degrade(
    request: SynthesisRequest, settings: DegradedSettings, why: str
) -> tuple[SynthesisRequest, DegradedFrom] | None:
    """``request`` at the degraded settings, and what was changed (the request as its client asked for it, and
    why); ``None`` when nothing would get cheaper: it asks for as little already, or its format cannot be
    delivered at the degraded rate (opus at 22050 Hz, say) and its speed is at the top already."""
    speed = max(request.speed, min(settings.max_speed, round(request.speed * settings.speed_factor, 3)))
    rate = request.sample_rate
    if 0 < settings.sample_rate < rate:
        with contextlib.suppress(UnsupportedAudio):  # the format cannot go that low: keep its rate
            rate = check(request.format, settings.sample_rate)[1]
    if (speed, rate) == (request.speed, request.sample_rate):
        return None
    degraded = request.model_copy(update={"speed": speed, "sample_rate": rate})
    return degraded, DegradedFrom(speed=request.speed, sample_rate=request.sample_rate, reason=why[:MAX_REASON_CHARS])
