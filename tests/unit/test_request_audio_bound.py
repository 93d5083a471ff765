"""Work counted by what it costs (issue 40, item 4): a request's audio is bounded before anything is synthesized
(``VOXLOG_MAX_REQUEST_AUDIO_S``, 413 naming it), and breaks that meet are one pause of at most 10 s.

Reproductions: 216 ten-second breaks fit in 5,000 characters and merged into one 36-minute silence; speed 0.25
makes four times the audio of the same characters at 1.0.
"""

from __future__ import annotations

import pytest

from contracts import JobQueued
from contracts.audio_estimate import CHARS_PER_AUDIO_S, expected_audio_s
from contracts.ssml import MAX_BREAK_MS, Pause, Text, parse
from producers.errors import Rejected
from producers.requests import JobRequest, Limits, validate
from tests.support.api_fakes import Reader, client, deps
from tests.unit.test_ssml_requests import ENGINES

pytestmark = pytest.mark.unit

LIMITS = Limits(max_text_chars=5000, min_speed=0.25, max_speed=4.0, default_engine="kokoro-onnx", max_audio_s=600)
BREAKS = "<speak>Hi." + "<break time='10s'/>" * 216 + "Bye.</speak>"


def test_regression_216_ten_second_breaks_are_one_pause_of_ten_seconds_not_36_minutes():
    assert len(BREAKS) <= 5000
    assert parse(BREAKS).pieces == (Text("Hi."), Pause(MAX_BREAK_MS), Text("Bye."))
    trailing = parse("<speak>Hi." + "<break time='10s'/>" * 3 + "</speak>").pieces
    assert trailing == (Text("Hi."), Pause(MAX_BREAK_MS)), "a run at the end is bounded too"
    boundary = parse("<speak><p>One.</p><break time='10s'/><p>Two.</p></speak>").pieces
    assert boundary[1] == Pause(MAX_BREAK_MS), "a break and a paragraph's pause together are bounded as one"


def test_the_expected_audio_is_the_characters_at_their_speed_plus_the_pauses():
    text = "x" * 1500
    plain = validate(JobRequest(text=text, voice="af_heart"), LIMITS, ENGINES)
    slow = plain.model_copy(update={"speed": 0.25})
    assert expected_audio_s(plain) == pytest.approx(1500 / CHARS_PER_AUDIO_S)
    assert expected_audio_s(slow) == pytest.approx(4 * expected_audio_s(plain)), "speed 0.25: four times"
    ssml = validate(
        JobRequest(text="<speak>Hello.<break time='3s'/><prosody rate='50%'>Slow words.</prosody></speak>",
                   voice="af_heart"),
        LIMITS, ENGINES,
    )  # fmt: skip
    assert expected_audio_s(ssml) == pytest.approx(6 / CHARS_PER_AUDIO_S + 3 + 11 / (CHARS_PER_AUDIO_S * 0.5))


def test_regression_a_short_text_at_speed_a_quarter_past_the_audio_bound_is_a_413_naming_the_setting():
    text = "Words said slowly. " * 150  # 2,850 characters: 190 s at speed 1, 760 s at 0.25
    assert validate(JobRequest(text=text, voice="af_heart"), LIMITS, ENGINES).speed == 1.0
    with pytest.raises(Rejected) as refused:
        validate(JobRequest(text=text, voice="af_heart", speed=0.25), LIMITS, ENGINES)
    assert refused.value.status == 413
    assert "VOXLOG_MAX_REQUEST_AUDIO_S" in str(refused.value)
    assert "about 760 s" in str(refused.value)


def test_pauses_count_against_the_audio_bound():
    bound = Limits(5000, 0.25, 4.0, "kokoro-onnx", max_audio_s=20)
    said = "<speak>One.<break time='10s'/>Two.<break time='10s'/>Three.</speak>"
    with pytest.raises(Rejected, match="VOXLOG_MAX_REQUEST_AUDIO_S"):
        validate(JobRequest(text=said, voice="af_heart"), bound, ENGINES)
    unbounded = Limits(5000, 0.25, 4.0, "kokoro-onnx", max_audio_s=0)
    assert validate(JobRequest(text=said, voice="af_heart"), unbounded, ENGINES).input_format == "ssml"


@pytest.mark.parametrize(
    ("route", "payload", "status"),
    [
        ("/v1/jobs", {"text": "<speak>a" + "<break time='10s'/>b" * 60 + "</speak>", "voice": "af_heart"}, 413),
        ("/v1/audio/speech", {"model": "tts-1", "voice": "af_heart", "speed": 0.25,
                              "input": "<speak>a" + "<break time='10s'/>b" * 60 + "</speak>"}, 400),
    ],
)  # fmt: skip
async def test_every_speech_route_refuses_too_much_audio_and_records_nothing(route, payload, status):
    """OpenAI's route answers every invalid request 400, in OpenAI's shape; voxlog's own 413."""
    api_deps = deps(Reader(), openai_default_voice="af_heart", limits=LIMITS)
    async with client(api_deps) as api:
        answer = await api.post(route, json=payload)
    assert answer.status_code == status, answer.text
    assert "VOXLOG_MAX_REQUEST_AUDIO_S" in answer.text
    assert not [e for e in api_deps.publisher.published if isinstance(e, JobQueued)]  # type: ignore[attr-defined]
