"""Whether audio the canary got back sounds like speech of its text: judged without a model.

Speech of a short English sentence lasts about as long as the text takes to read (13-16 characters a
second at speed 1), has energy, pauses between words (its loudness varies from one 20-ms frame to the
next, where a tone or a hum does not) and is not clipped. With the ``asr`` extra (pocketsphinx's
bundled US English model), the words recognized must include most of the text's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

CHARS_PER_S: Final = 15.0  # how fast English is read aloud
DURATION_RANGE: Final = (0.4, 2.5)  # the audio's length over the text's expected one, at most this far off
DURATION_SLACK_S: Final = 0.5  # leading and trailing silence, the first segment's quick start
MIN_RMS_DBFS: Final = -40.0  # quieter than this overall is silence
MIN_VARIATION: Final = 0.3  # frame loudness's coefficient of variation: speech pauses, a tone does not
MAX_CLIPPED: Final = 0.001  # the fraction of samples at full scale
MIN_WORDS_HEARD: Final = 0.5  # with the asr extra: the text's words the recognizer must hear
FRAME_S: Final = 0.02


@dataclass(frozen=True)
class Verdict:
    """What the audio measured, and each check it failed (none: it passed)."""

    duration_s: float
    rms_dbfs: float
    variation: float
    clipped: float
    words_heard: float | None  # None: no recognizer installed
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


def expected_duration_s(text: str, speed: float = 1.0) -> float:
    return len(text) / CHARS_PER_S / speed


def judge(samples: npt.NDArray[np.float32], rate: int, text: str, *, listen: bool = True) -> Verdict:
    """Judge mono float ``samples`` at ``rate`` as speech of ``text`` (and, when ``listen`` and the asr extra is
    installed, as its words)."""
    duration = len(samples) / rate if rate else 0.0
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
    rms_dbfs = 20 * np.log10(rms) if rms > 0 else -np.inf
    frame = max(1, round(rate * FRAME_S))
    frames = samples[: len(samples) // frame * frame].reshape(-1, frame) if len(samples) >= frame else samples[None, :0]
    loudness = np.sqrt(np.mean(np.square(frames, dtype=np.float64), axis=1)) if frames.size else np.zeros(1)
    variation = float(np.std(loudness) / np.mean(loudness)) if np.mean(loudness) > 0 else 0.0
    clipped = float(np.mean(np.abs(samples) >= 0.999)) if len(samples) else 0.0
    failures: list[str] = []
    expected = expected_duration_s(text)
    low, high = expected * DURATION_RANGE[0], expected * DURATION_RANGE[1] + DURATION_SLACK_S
    if not low <= duration <= high:
        failures.append(f"duration: {duration:.2f} s for {len(text)} characters, expected {low:.2f} to {high:.2f} s")
    if rms_dbfs < MIN_RMS_DBFS:
        failures.append(f"energy: {rms_dbfs:.1f} dBFS, below {MIN_RMS_DBFS:.0f} (silence)")
    elif variation < MIN_VARIATION:
        failures.append(f"energy: its loudness hardly varies ({variation:.2f} < {MIN_VARIATION}): a tone, not speech")
    if clipped > MAX_CLIPPED:
        failures.append(f"clipping: {clipped:.2%} of the samples at full scale (at most {MAX_CLIPPED:.1%})")
    heard = words_heard(samples, rate, text) if listen else None
    if heard is not None and heard < MIN_WORDS_HEARD:
        failures.append(f"words: {heard:.0%} of the text's words recognized, fewer than {MIN_WORDS_HEARD:.0%}")
    return Verdict(round(duration, 3), round(float(rms_dbfs), 1), round(variation, 2), clipped, heard, tuple(failures))


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def words_heard(samples: npt.NDArray[np.float32], rate: int, text: str) -> float | None:
    """The fraction of ``text``'s words that pocketsphinx hears in the audio; ``None`` without the asr extra."""
    try:
        from pocketsphinx import Decoder  # the asr extra; imported only when it is there
    except ImportError:
        return None
    decoder = Decoder(samprate=16000)
    resampled = np.interp(np.arange(0, len(samples), rate / 16000), np.arange(len(samples)), samples)
    pcm = (np.clip(resampled, -1, 1) * 32767).astype("<i2").tobytes()
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    hypothesis = decoder.hyp()
    heard = set(_words(hypothesis.hypstr if hypothesis is not None else ""))
    wanted = _words(text)
    return sum(word in heard for word in wanted) / len(wanted) if wanted else 1.0
