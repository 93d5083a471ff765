"""Pitch-preserving time-stretching: WSOLA (waveform similarity overlap-add, Verhelst and Roelands, 1993).

Speech sped up by resampling rises in pitch; WSOLA instead cuts the audio into overlapping windows and lays
them down at another spacing, each window taken where its waveform best continues the one before it (the
highest cross-correlation within a tolerance of where it should come from), so periods join without
clicks or doubled pitch periods and the pitch stays the speaker's. It suits speech well (one voice, short
periods); it is what ``contracts.speed`` uses beyond the model's own speed range.

Parameters (their change is a new ``contracts.speed.STRETCH_VERSION``): 30 ms Hann windows laid every
15 ms (half-overlap, whose Hann windows sum to a constant), and a search of ±7.5 ms.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from tts_node.engine import Audio

WINDOW_S: Final = 0.030
TOLERANCE_S: Final = 0.0075


def time_stretch(samples: Audio, factor: float, rate: int) -> Audio:
    """``samples`` at ``rate`` Hz made ``factor`` times as fast (> 1 faster, < 1 slower), pitch unchanged:
    ``round(len(samples) / factor)`` samples."""
    if not factor > 0:
        raise ValueError(f"the factor must be > 0, not {factor!r}")
    x = np.asarray(samples, dtype=np.float32).reshape(-1)
    out_len = round(len(x) / factor)
    n = max(2, 2 * round(WINDOW_S * rate / 2))
    if factor == 1.0 or len(x) < n:
        return x.copy() if factor == 1.0 else _resampled_length(x, out_len)
    hop_out = n // 2
    hop_in = hop_out * factor
    tolerance = max(1, round(TOLERANCE_S * rate))
    window = np.hanning(n + 2)[1:-1].astype(np.float32)  # no zero ends: every sample is weighted
    # Padded so that every window, shifted by the tolerance either way or continued by half a window,
    # stays inside.
    pad = n + 2 * tolerance
    padded = np.concatenate([np.zeros(pad, np.float32), x, np.zeros(pad + n + round(hop_in) + 1, np.float32)])
    frames = out_len // hop_out + 2
    out = np.zeros(frames * hop_out + n, np.float32)
    weight = np.zeros_like(out)
    previous = pad  # where in ``padded`` the last window laid down was taken from
    for k in range(frames):
        ideal = pad + round(k * hop_in)
        if k == 0:
            at = ideal
        else:
            natural = padded[previous + hop_out : previous + hop_out + n]  # what would continue it
            region = padded[ideal - tolerance : ideal + tolerance + n]
            at = ideal - tolerance + int(np.argmax(np.correlate(region, natural, mode="valid")))
        out[k * hop_out : k * hop_out + n] += padded[at : at + n] * window
        weight[k * hop_out : k * hop_out + n] += window
        previous = at
    stretched = out / np.maximum(weight, 1e-3)
    return np.asarray(stretched[:out_len], dtype=np.float32)


def _resampled_length(x: Audio, length: int) -> Audio:
    # Shorter than one window: nothing to lay down, only a length to honour (a click's worth of audio).
    if length == 0 or len(x) == 0:
        return np.zeros(length, np.float32)
    return np.interp(np.linspace(0, len(x) - 1, length), np.arange(len(x)), x).astype(np.float32)
