"""Regression (issue 40, item 1): a long answer in Vorbis killed the API with SIGSEGV.

``audio_formats`` handed a whole job to one ``soundfile.write``; libsndfile passed every frame to libvorbis
at once, which allocates them on the calling thread's stack: past about 2.1 M frames (87 s at 24 kHz, 44 s
at 48 kHz) the ``to_thread`` worker's 8 MiB overflowed and the process died (nine ten-second SSML breaks
made such an answer). Every encoder is now handed at most ``ENCODE_BLOCK_FRAMES`` frames a call.

The class, closed: every output format this process offers is rendered for two minutes (``ANSWER_S``) at
48 kHz (from the engine's 24 kHz, through the resampler) and at 24 kHz, whole and, where it streams,
through a stream encoder, in a child process (``tests.support.long_audio``) on a thread with a 1 MiB
stack, so that a crash fails the test instead of killing pytest; each render must decode to the answer's
length with its last burst of sound in place (with encoders handed whole answers again, the Vorbis child
dies of SIGSEGV at two minutes as it did at ten). And, in this process, no encoder is handed more than a
block in one call.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from foundation import aac, audio_formats
from foundation.audio import ENCODE_BLOCK_FRAMES, blocks, encode_file, encode_wav
from foundation.stream_encoders import stream_encoder
from tests.support.long_audio import ANSWER_S, RENDER_RATES, SOURCE_RATE, answer

ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT_S = 100  # a format takes 1 to 10 s on an idle machine; the unit timeout is 120 s
SECONDS_TOLERANCE = 0.1  # encoder delay and padding (mp3, aac), frame rounding; a crash or a cut is far more


def _render_in_a_child(fmt: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.support.long_audio", fmt],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, not the venv's editable install
        capture_output=True,
        text=True,
        check=False,
        timeout=CHILD_TIMEOUT_S,
    )


@pytest.mark.parametrize("fmt", audio_formats.supported_formats())
@pytest.mark.slow
def test_regression_two_minutes_at_48_khz_render_in_every_format(fmt: str) -> None:
    child = _render_in_a_child(fmt)
    assert child.returncode == 0, f"{fmt}: the child exited {child.returncode}\n{child.stderr[-4000:]}"
    renders = [json.loads(line) for line in child.stdout.splitlines()]
    expected = {("file", rate) for rate in audio_formats.supported_rates(fmt) if rate in RENDER_RATES}
    if audio_formats.streamable(fmt):
        expected.add(("stream", RENDER_RATES[0]))
    assert {(r["path"], r["rate"]) for r in renders} == expected
    assert ("file", 48_000) in expected  # every format offers 48 kHz, opus included
    for r in renders:
        assert r["decoded_rate"] == r["rate"], r
        assert abs(r["seconds"] - ANSWER_S) <= SECONDS_TOLERANCE, r
        assert r["last_burst_rms"] > 0.1, r  # the answer's last two seconds (a tone, rms 0.155) are there


class _Spy:
    def __init__(self) -> None:
        self.calls: list[int] = []


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    """The frames of every call into libsndfile's writer and into PyAV's AAC encoder."""
    spy = _Spy()
    write = sf.SoundFile.write

    def spied_write(self: sf.SoundFile, data: np.ndarray) -> None:
        spy.calls.append(len(data))
        write(self, data)

    monkeypatch.setattr(sf.SoundFile, "write", spied_write)
    if aac.available():
        from_ndarray = aac.av.AudioFrame.from_ndarray

        def spied_from_ndarray(array: np.ndarray, **kwargs: Any) -> object:
            spy.calls.append(array.shape[-1])
            return from_ndarray(array, **kwargs)

        monkeypatch.setattr(aac.av.AudioFrame, "from_ndarray", staticmethod(spied_from_ndarray))
    return spy


@pytest.mark.parametrize("fmt", audio_formats.supported_formats())
def test_no_encoder_is_handed_more_than_a_block_in_one_call(fmt: str, writes: _Spy) -> None:
    samples = answer(seconds=12)  # 288,000 frames at 24 kHz, 576,000 at 48 kHz: several blocks
    audio_formats.encode(samples, SOURCE_RATE, fmt, 48_000)
    if audio_formats.streamable(fmt):
        audio_formats.encode_chunk(samples, SOURCE_RATE, fmt, 48_000)
        encoder = stream_encoder(fmt, 48_000)
        encoder.write(samples, SOURCE_RATE)
        encoder.close()
    assert writes.calls, "the spy saw no encoder call"
    assert max(writes.calls) <= ENCODE_BLOCK_FRAMES
    assert sum(writes.calls) >= 12 * 48_000


def test_the_segments_wav_does_not_reach_libsndfile(writes: _Spy) -> None:
    """A segment's WAV is written with numpy (issue 41): no encoder call, whatever its length."""
    samples = answer(seconds=12)
    data = encode_wav(samples, SOURCE_RATE)
    assert writes.calls == []
    decoded, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == SOURCE_RATE
    assert np.abs(decoded - samples).max() <= 1 / 32768 + 1e-6


def test_blocks_cover_the_samples_once_in_order() -> None:
    for n in (0, 1, ENCODE_BLOCK_FRAMES - 1, ENCODE_BLOCK_FRAMES, ENCODE_BLOCK_FRAMES + 1, 3 * ENCODE_BLOCK_FRAMES + 7):
        samples = np.arange(n, dtype=np.float32)
        pieces = list(blocks(samples))
        assert all(0 < len(p) <= ENCODE_BLOCK_FRAMES for p in pieces)
        assert np.array_equal(np.concatenate([samples[:0], *pieces]), samples)


def test_a_file_written_in_blocks_equals_one_written_in_one_call() -> None:
    """For the deterministic containers, the bytes of ``sf.write`` (Ogg's carry a random serial number)."""
    samples = answer(seconds=7)
    kinds = [("WAV", "PCM_16"), ("FLAC", "PCM_16")]
    if "mp3" in audio_formats.supported_formats():
        kinds.append(("MP3", "MPEG_LAYER_III"))  # VBR, with LAME's Info frame written at close
    for container, subtype in kinds:
        whole = io.BytesIO()
        sf.write(whole, samples, SOURCE_RATE, format=container, subtype=subtype)
        assert encode_file(samples, SOURCE_RATE, container=container, subtype=subtype) == whole.getvalue()
