"""The fuzz campaign's long answers (issue 40): SSML whose breaks alone pass the length at which one Vorbis
write killed the API, asked for in every format and every mode, in bodies the routes take."""

from __future__ import annotations

import base64
import json

from contracts import ssml
from foundation import audio_formats
from producers.requests import JobRequest
from producers.speech import SpeechRequest
from tests.support.api_fuzz import (
    LONG_ANSWER_BREAKS,
    LONG_ANSWER_MODES,
    LONG_ANSWER_RATE,
    LongAnswer,
    long_answer_ssml,
    long_answers,
    sse_audio,
)

CRASHED_AT_FRAMES = 2_100_000  # one Vorbis write this long overflowed a to_thread worker's 8 MiB stack


def test_a_long_answers_breaks_alone_pass_the_crash_at_24_and_48_khz() -> None:
    parsed = ssml.parse(long_answer_ssml(LONG_ANSWER_BREAKS))
    pauses = [p.ms for p in parsed.pieces if isinstance(p, ssml.Pause)]
    assert pauses == [ssml.MAX_BREAK_MS] * LONG_ANSWER_BREAKS
    silence_s = sum(pauses) / 1000
    assert silence_s == LongAnswer("ogg", "whole", LONG_ANSWER_BREAKS).silence_s == 100
    assert silence_s * 24_000 > CRASHED_AT_FRAMES
    assert silence_s * LONG_ANSWER_RATE > 2 * CRASHED_AT_FRAMES
    assert parsed.speaks(lambda text: any(c.isalnum() for c in text))


def test_every_format_is_asked_for_in_every_mode_scale_times() -> None:
    formats = audio_formats.supported_formats()
    cases = long_answers(formats, 2)
    assert len(cases) == 2 * len(formats) * len(LONG_ANSWER_MODES)
    assert {(c.response_format, c.mode) for c in cases} == {(f, m) for f in formats for m in LONG_ANSWER_MODES}
    assert {c.breaks for c in cases} == {LONG_ANSWER_BREAKS}
    assert {c.take for c in cases} == {1, 2}
    assert len({(c.label, c.take) for c in cases}) == len(cases)


def test_each_take_is_another_text_as_long() -> None:
    texts = [long_answer_ssml(LONG_ANSWER_BREAKS, take) for take in (1, 2, 3)]
    assert len(set(texts)) == 3
    for text in texts:
        pauses = [p.ms for p in ssml.parse(text).pieces if isinstance(p, ssml.Pause)]
        assert pauses == [ssml.MAX_BREAK_MS] * LONG_ANSWER_BREAKS


def test_the_bodies_are_ones_the_routes_take() -> None:
    for case in long_answers(audio_formats.supported_formats(), 1):
        path, body = case.request("bench_tone")
        if case.mode == "job":
            assert path == "/v1/jobs"
            job = JobRequest.model_validate(body)
            assert (job.format, job.sample_rate) == audio_formats.check(case.response_format, LONG_ANSWER_RATE)
            assert case.rate == LONG_ANSWER_RATE
        else:
            assert path == "/v1/audio/speech"
            speech = SpeechRequest.model_validate(body)
            assert speech.response_format == case.response_format
            assert speech.stream is (case.mode != "whole")
            assert speech.stream_format == ("sse" if case.mode == "sse" else None)
            assert case.rate == 24_000
        assert ssml.looks_like_ssml(body.get("text", body.get("input", "")))


def test_sse_audio_joins_the_deltas_and_names_the_last_event() -> None:
    def event(payload: dict[str, object]) -> str:
        return f"data: {json.dumps(payload)}\n\n"

    pieces = [b"RIFF", b"\x00\x01", b"\x02"]
    body = "".join(event({"type": "speech.audio.delta", "audio": base64.b64encode(p).decode()}) for p in pieces)
    done = body + event({"type": "speech.audio.done", "usage": {"input_tokens": 1}})
    assert sse_audio(done.encode()) == (b"".join(pieces), "speech.audio.done")
    failed = body + event({"type": "error", "error": {"message": "the job failed"}})
    assert sse_audio(failed.encode()) == (b"".join(pieces), "error")
    assert sse_audio(b"") == (b"", None)
