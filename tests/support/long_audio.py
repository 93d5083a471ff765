"""Ten minutes of an answer rendered in one output format, in a process of its own (issue 40).

A long Ogg Vorbis answer, handed to libsndfile in one write, overflowed the stack of the API's ``to_thread``
worker and killed the process with SIGSEGV. ``tests/unit/test_long_vorbis_answer_segfault.py`` runs this
module as a child (``python -m tests.support.long_audio FORMAT``), so that a crash fails that test instead of
killing pytest. The child encodes ``ANSWER_S`` seconds of ``answer()`` at ``SOURCE_RATE`` to the format at
every rate of ``RENDER_RATES`` (48 kHz resampled, 24 kHz as the engine made it), as a whole file and, for a
streamable format, through one stream encoder; it encodes on a thread whose stack is ``STACK_BYTES``, an
eighth of a ``to_thread`` worker's 8 MiB, so that what an encode puts on the stack must not grow with the
answer. It then decodes each render on its main thread and prints one JSON line per render: its rate, the
decoded rate, seconds and the level of the answer's last burst (present: the render is not cut short).
"""

from __future__ import annotations

import io
import json
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Final

import av
import numpy as np
import soundfile as sf

from foundation import audio_formats
from foundation.audio import WAV_HEADER_BYTES, Samples
from foundation.stream_encoders import stream_encoder

# Two minutes: 2.9 M frames at 24 kHz and 5.8 M at 48 kHz, past the 2.1 M that overflowed an 8 MiB stack and
# 11 to 22 times the frames that would overflow the child's 1 MiB one, had an encoder been handed them at once
# (ten minutes proved nothing more, in five times the suite's time).
ANSWER_S: Final = 120
SOURCE_RATE: Final = 24_000
RENDER_RATES: Final = (48_000, 24_000)
STACK_BYTES: Final = 1 << 20
PERIOD_S: Final = 10  # every period: silence (an SSML break), then a burst of sound, so the answer ends loud
BURST_S: Final = 1


def answer(seconds: int = ANSWER_S, rate: int = SOURCE_RATE) -> Samples:
    """``seconds`` of mono audio: in every ``PERIOD_S``, silence then ``BURST_S`` of a voiced-like tone."""
    t = np.arange(seconds * rate, dtype=np.float64) / rate
    tone = 0.2 * np.sin(2 * np.pi * 180 * t) + 0.08 * np.sin(2 * np.pi * 540 * t) + 0.04 * np.sin(2 * np.pi * 1260 * t)
    loud = (t % PERIOD_S) >= PERIOD_S - BURST_S
    return np.asarray(np.where(loud, tone, 0.0), dtype=np.float32)


def _on_small_stack(work: Callable[[], bytes]) -> bytes:
    """``work()`` on a new thread with a ``STACK_BYTES`` stack (a crash there kills this process)."""
    result: list[bytes] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as error:  # handed to the caller's thread
            errors.append(error)

    previous = threading.stack_size(STACK_BYTES)
    try:
        thread = threading.Thread(target=run, name="small-stack-encode")
        thread.start()
    finally:
        threading.stack_size(previous)
    thread.join()
    if errors:
        raise errors[0]
    return result[0]


def _pcm16(data: bytes) -> Samples:
    return np.frombuffer(data, dtype="<i2").astype(np.float32) * np.float32(1 / 32768)


def decode(fmt: str, data: bytes, rate: int) -> tuple[Samples, int]:
    """A render's samples (mono float32) and rate, as a client would decode them."""
    if fmt == "pcm":
        return _pcm16(data), rate
    if fmt == "aac":
        with av.open(io.BytesIO(data), "r", format="adts") as container:
            pieces = [frame.to_ndarray().reshape(-1) for frame in container.decode(audio=0)]
            decoded_rate = container.streams.audio[0].sample_rate
        return np.concatenate(pieces).astype(np.float32), decoded_rate
    if fmt == "wav" and data[4:8] == b"\xff\xff\xff\xff":  # the streamed header: sizes "unknown"
        return _pcm16(data[WAV_HEADER_BYTES:]), rate
    samples, decoded_rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    return np.asarray(samples[:, 0], dtype=np.float32), int(decoded_rate)


def _streamed(fmt: str, samples: Samples, rate: int) -> bytes:
    encoder = stream_encoder(fmt, rate)
    return encoder.write(samples, SOURCE_RATE) + encoder.close()


def render(fmt: str) -> list[dict[str, object]]:
    """Every render of ``answer()`` in ``fmt``, encoded on a small stack, decoded and measured."""
    samples = answer()
    renders: list[tuple[str, int, Callable[[], bytes]]] = [
        ("file", rate, partial(audio_formats.encode, samples, SOURCE_RATE, fmt, rate))
        for rate in audio_formats.supported_rates(fmt)
        if rate in RENDER_RATES
    ]
    if audio_formats.streamable(fmt):
        renders.append(("stream", RENDER_RATES[0], partial(_streamed, fmt, samples, RENDER_RATES[0])))
    measured: list[dict[str, object]] = []
    for path, rate, work in renders:
        data = _on_small_stack(work)
        decoded, decoded_rate = decode(fmt, data, rate)
        burst = decoded[-decoded_rate * BURST_S :][decoded_rate // 4 : -decoded_rate // 4]  # the last burst's middle
        measured.append(
            {
                "format": fmt,
                "path": path,
                "rate": rate,
                "bytes": len(data),
                "decoded_rate": decoded_rate,
                "seconds": len(decoded) / decoded_rate,
                "last_burst_rms": float(np.sqrt(np.mean(np.square(burst, dtype=np.float64)))),
            }
        )
    return measured


def main(argv: list[str]) -> int:
    for line in render(argv[0]):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
