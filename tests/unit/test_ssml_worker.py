# ruff: noqa: RUF001
"""An SSML job through the worker (consumers.job_runner, the engine adapter, tts_node.ssml) with the benchmark
engine: its pauses are segments of exactly their samples of silence, its rates the speed it is said at, and its
captions name the words said."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest

from consumers.attempts import Attempt
from consumers.job_runner import JobRunner, RetryPolicy
from consumers.ledger import Ledger
from contracts import AudioRef, Producer, SegmentProduced
from contracts.ssml import parse
from foundation.audio import WAV_HEADER_BYTES
from tests.support.events import segments_recorded
from tests.support.job_logs import _Builder
from tests.unit.test_job_runner import Log, call
from tts_node.bench_sleep import SAMPLE_RATE, BenchSleepEngine, audio_seconds
from voxlog.engine_adapter import TtsNodeSpeechEngine

pytestmark = pytest.mark.unit

SSML = (
    "<speak><p>Hello there.</p><p>Room <say-as interpret-as='characters'>B12</say-as>"
    "<break time='1500ms'/><prosody rate='150%'>quickly now</prosody>"
    "<phoneme ph='təmˈɑːtoʊ'>tomato</phoneme></p></speak>"
)


class Blobs:
    """Keeps every WAV it is given, by the uri it answers."""

    def __init__(self) -> None:
        self.wavs: dict[str, bytes] = {}

    def put(self, data: bytes, suffix: str) -> AudioRef:
        uri = f"file:///{len(self.wavs)}.wav"
        self.wavs[uri] = data
        return AudioRef(sha256=f"{len(self.wavs):064x}", uri=uri)


def samples(wav: bytes) -> np.ndarray:
    return np.frombuffer(wav[WAV_HEADER_BYTES:], dtype="<i2")


async def run_ssml(ssml: str, speed: float = 1.0) -> tuple[list[SegmentProduced], Blobs, Log]:
    blobs, log = Blobs(), Log()
    runner = JobRunner(
        TtsNodeSpeechEngine(BenchSleepEngine()),
        blobs,
        log,
        Producer(service="worker", instance="w"),
        "w",
        RetryPolicy(3, 0.0),
        call,
    )
    job = _Builder(uuid.UUID(int=33))
    job.request = job.request.model_copy(
        update={"text": parse(ssml).canonical, "input_format": "ssml", "voice": "bench_tone", "speed": speed}
    )
    job.fingerprint = job.request.fingerprint()
    ledger = Ledger(timedelta(minutes=10))
    view = ledger.observe(job.queued(), 0)
    outcome = await runner.run(Attempt(view, view.request, 1, ledger))
    assert outcome.kind == "completed", log.events[-1]
    return segments_recorded(log.events), blobs, log


async def test_an_ssml_job_is_its_pieces_and_its_pauses_exact_samples_of_silence():
    segments, blobs, _ = await run_ssml(SSML)
    said = [(s.payload.span.text, s.payload.span.start, s.payload.span.end) for s in segments]
    assert said == [
        ("Hello there.", 0, 12),
        ("", 12, 12),  # the paragraphs' pause
        ("Room B-one-two", 12, 26),  # the say-as read aloud, in one run with its sentence
        ("", 26, 26),
        ("quickly now", 26, 37),
        ("tomato", 37, 43),
    ]
    audio = [samples(blobs.wavs[s.payload.audio.uri]) for s in segments]
    assert len(audio[1]) == round(0.7 * SAMPLE_RATE), "a <p>'s 700 ms"
    assert len(audio[3]) == round(1.5 * SAMPLE_RATE), "the <break>'s 1500 ms"
    assert not audio[1].any()
    assert not audio[3].any()
    spoken = {0: ("Hello there.", 1.0), 2: ("Room B-one-two", 1.0), 4: ("quickly now", 1.5), 5: ("tomato", 1.0)}
    for index, (text, rate) in spoken.items():
        assert len(audio[index]) == round(SAMPLE_RATE * audio_seconds(text, rate)), text
    total = sum(len(a) for a in audio)
    assert total == sum(len(audio[i]) for i in spoken) + round(0.7 * SAMPLE_RATE) + round(1.5 * SAMPLE_RATE)


async def test_the_speed_of_a_request_and_its_prosody_rate_multiply():
    segments, blobs, _ = await run_ssml("<speak>Plain words.<prosody rate='x-slow'>slow words</prosody></speak>", 2.0)
    plain, slow = (samples(blobs.wavs[s.payload.audio.uri]) for s in segments)
    assert len(plain) == round(SAMPLE_RATE * audio_seconds("Plain words.", 2.0))
    assert len(slow) == round(SAMPLE_RATE * audio_seconds("slow words", 2.0 * 0.5))


async def test_pauses_have_no_words_and_every_word_is_in_what_is_said():
    segments, _, _ = await run_ssml(SSML)
    for segment in segments:
        span, words = segment.payload.span, segment.payload.words
        assert words is not None
        if not span.text:
            assert words == ()
            continue
        said = [span.text[w.start - span.start : w.end - span.start] for w in words]
        assert said == span.text.split()


async def test_a_segment_said_at_another_rate_is_another_segment_in_the_cache():
    """The segment key holds the speed it is said at (the request's times the rate), never the request's alone."""
    segments, _, _ = await run_ssml("<speak>Same words.<break/><prosody rate='fast'>Same words.</prosody></speak>")
    first, _, fast = segments
    assert first.payload.segment_key is not None
    assert fast.payload.segment_key is not None
    assert first.payload.segment_key != fast.payload.segment_key
