"""Request validation (producers.requests.validate): every refusal says what to fix, and what passes is normalized."""

from __future__ import annotations

import pytest
from litestar.testing import TestClient

from producers.app import create_app
from producers.errors import Rejected
from producers.requests import JobRequest, Limits, validate
from projections.reads.rows import EngineVoices
from tests.support.api_fakes import Reader, deps

ENGINES = [EngineVoices("kokoro-onnx", "m1", 24000, ("af_heart", "jf_alpha"), ("en-us", "en-gb"), 1)]
LIMITS = Limits(max_text_chars=20, min_speed=0.5, max_speed=2.0, default_engine="kokoro-onnx")


def body(**fields) -> JobRequest:
    return JobRequest(**{"text": "Hello there.", "voice": "af_heart", **fields})


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"text": ""}, 422, "text is empty"),
        ({"text": "\u200b \n\t"}, 422, "text is empty"),
        ({"text": "x" * 21}, 413, "has 21 characters; the limit is 20"),
        ({"speed": 0.49}, 422, "outside [0.5, 2.0]"),
        ({"speed": 2.01}, 422, "outside [0.5, 2.0]"),  # VOXLOG_MIN_SPEED, VOXLOG_MAX_SPEED
        ({"format": "m4a"}, 422, "supported formats: wav"),
        ({"sample_rate": 8000}, 422, "supported rates: 16000"),
        ({"format": "opus", "sample_rate": 44100}, 422, "supported rates: 16000, 24000, 48000"),
        ({"engine": "espeak"}, 422, "engine 'espeak' has no worker; known engines: kokoro-onnx"),
        ({"lang": "fr-fr"}, 422, "use one of: en-us, en-gb"),
        ({"voice": "nobody"}, 422, "voice 'nobody' is unknown to kokoro-onnx; known voices: af_heart, jf_alpha"),
        ({"voice": "af_heart(2)+"}, 422, "jf_alpha(2)+jm_kumo(1)"),
        ({"voice": "af_heart+nobody(3)"}, 422, "voice 'nobody' is unknown"),
        ({"text": "\u0000\u0001 control"}, 422, "the control character U+0000 at position 0; remove it"),
        ({"text": "Bell\u0007!"}, 422, "U+0007 at position 4"),
        ({"text": "C1 \u0085 is a space, \u009b is not"}, 422, "U+009B at position 17"),
        ({"text": "half \ud800 a pair"}, 422, "a lone surrogate U+D800 at position 5"),
    ],
)
def test_a_refusal_says_what_to_fix(fields, status, message):
    with pytest.raises(Rejected) as refused:
        validate(body(**fields), LIMITS, ENGINES)
    assert refused.value.status == status
    assert message in str(refused.value)
    assert refused.value.param in fields, "the refusal names the field at fault"


def test_no_announced_worker_is_a_503_not_a_client_error():
    with pytest.raises(Rejected) as refused:
        validate(body(), LIMITS, [])
    assert refused.value.status == 503
    assert "no speech worker has announced itself" in str(refused.value)


def test_what_passes_is_normalized_for_the_fingerprint():
    request = validate(
        body(text="  Hello \u00a0 there.\u200b ", voice="jf_alpha(1)+af_heart(3)", lang=" EN-GB ", format="WAV"),
        LIMITS,
        ENGINES,
    )
    assert request.text == "Hello there."
    assert request.voice == "af_heart(0.7500)+jf_alpha(0.2500)"
    assert (request.lang, request.format, request.engine, request.model_version) == (
        "en-gb",
        "wav",
        "kokoro-onnx",
        "m1",
    )


def test_the_limit_counts_characters_after_normalization():
    request = validate(body(text="x  " * 10), LIMITS, ENGINES)  # 30 characters as sent, 19 once folded
    assert len(request.text) == 19


def test_whitespace_controls_are_folded_not_refused():
    assert validate(body(text="Tab\there,\r\nnew\x0cline."), LIMITS, ENGINES).text == "Tab here, new line."


def test_a_request_normalizes_by_default_and_one_read_as_written_is_another_request():
    default = validate(body(text="It costs $5."), LIMITS, ENGINES)
    as_written = validate(body(text="It costs $5.", normalize=False), LIMITS, ENGINES)
    assert (default.normalize, as_written.normalize) == (True, False)
    assert default.fingerprint() != as_written.fingerprint()


def test_regression_a_voice_weight_with_thousands_of_digits_was_a_500():
    """Fraction() of more than 4,300 digits raises ValueError (Python's limit on int conversion)."""
    with pytest.raises(Rejected, match="at most 9 digits before and after the point") as refused:
        validate(body(voice="af_heart(" + "1" * 5000 + ")+jf_alpha"), LIMITS, ENGINES)
    assert refused.value.status == 422


@pytest.mark.parametrize("route", ["/v1/jobs", "/v1/batches", "/v1/audio/speech", "/v1/documents"])
def test_regression_a_json_body_nested_100000_levels_deep_was_a_500(route: str):
    nested = "[" * 100_000 + "]" * 100_000
    with TestClient(create_app(deps(Reader()))) as test:
        answer = test.post(route, content=nested, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    error = answer.json()
    said = error["error"]["message"] if route == "/v1/audio/speech" else error["detail"]  # OpenAI's shape there
    assert "nests arrays or objects too deeply" in said or "recursion limit exceeded" in said
