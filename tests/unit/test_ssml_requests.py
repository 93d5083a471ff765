"""SSML at the API (producers.requests, every speech route): detected or asked for, refused with what to fix,
recorded canonically; and in the log (JobQueued 5, its fingerprint, older records read as text)."""

from __future__ import annotations

import uuid

import pytest
from litestar.testing import TestClient

from contracts import JobQueued, decode_event, encode_event
from contracts.events import CURRENT_SCHEMA_VERSIONS
from producers.app import create_app
from producers.errors import Rejected
from producers.requests import JobRequest, Limits, validate
from projections.reads.rows import EngineVoices
from tests.support.api_fakes import Documents, Log, Reader, client, deps, segment
from tests.support.job_logs import _Builder
from tests.unit.test_speech_streams_by_default import Blobs, completed, scripted

pytestmark = pytest.mark.unit

ENGINES = [EngineVoices("kokoro-onnx", "m1", 24000, ("af_heart", "jf_alpha"), ("en-us", "en-gb"), 1)]
LIMITS = Limits(max_text_chars=200, min_speed=0.5, max_speed=2.0, default_engine="kokoro-onnx")
SSML = "<speak>Hello <break time='0.5s'/> world.</speak>"
CANONICAL = '<speak>Hello<break time="500ms"/>world.</speak>'


def body(**fields) -> JobRequest:
    return JobRequest(**{"text": SSML, "voice": "af_heart", **fields})


def test_a_leading_speak_is_ssml_recorded_canonically():
    request = validate(body(text="\n  " + SSML), LIMITS, ENGINES)
    assert (request.input_format, request.text) == ("ssml", CANONICAL)


@pytest.mark.parametrize("text", ["a <b> c", "x < y > z", "<3 you", "<speaker> said hi"])
def test_text_that_merely_looks_like_markup_is_text(text):
    request = validate(body(text=text), LIMITS, ENGINES)
    assert (request.input_format, request.text) == ("text", text)


def test_input_format_says_it_either_way():
    as_text = validate(body(input_format="text"), LIMITS, ENGINES)
    assert (as_text.input_format, as_text.text) == ("text", SSML), "the client said text: markup is read as text"
    declared = validate(body(text="<?xml version='1.0'?>" + SSML, input_format="ssml"), LIMITS, ENGINES)
    assert (declared.input_format, declared.text) == ("ssml", CANONICAL)
    bare = validate(body(text="Hello <break time='0.5s'/> world.", input_format="ssml"), LIMITS, ENGINES)
    assert (bare.input_format, bare.text) == ("ssml", CANONICAL), "declared SSML without <speak> is read inside one"
    with pytest.raises(Rejected, match="<b> is not supported"):
        validate(body(text="a <b> c", input_format="ssml"), LIMITS, ENGINES)
    with pytest.raises(Rejected, match="not well-formed XML: not well-formed"):
        validate(body(text="x < y", input_format="ssml"), LIMITS, ENGINES)


def test_spellings_of_one_document_share_a_fingerprint_and_text_never_shares_one_with_ssml():
    one = validate(body(), LIMITS, ENGINES)
    two = validate(body(text='<speak version="1.0">Hello<break strength="medium"/>world.</speak>'), LIMITS, ENGINES)
    assert one.fingerprint() == two.fingerprint()
    same_characters = validate(body(text=CANONICAL, input_format="text"), LIMITS, ENGINES)
    assert same_characters.text == one.text
    assert same_characters.fingerprint() != one.fingerprint()


@pytest.mark.parametrize(
    ("fields", "status", "message"),
    [
        ({"text": "<speak><audio src='a.wav'/>Hi</speak>"}, 422, "<audio> is not supported"),
        ({"text": "<speak><emphasis>Hi</emphasis></speak>"}, 422, "<emphasis> is not supported"),
        ({"text": "<speak><break time='1s'/></speak>"}, 422, "the SSML has nothing to speak"),
        ({"text": "<speak>Hi\u0007</speak>"}, 422, "the control character U+0007 at position 9"),
        ({"text": "<speak>" + "x" * 400 + "</speak>"}, 413, "the limit is 400 as sent"),
        ({"text": "<speak>" + "x " * 100 + "</speak>"}, 413, "in its canonical form; the limit is 200"),
        (
            {"text": "<speak><prosody rate='300%'>Hi</prosody></speak>", "speed": 1.5},
            422,
            "a speed of 4.5, outside the model's 0.25 to 4: use a rate between 16.67% and 266.67%",
        ),
    ],
)
def test_ssml_refusals_say_what_to_fix(fields, status, message):
    with pytest.raises(Rejected) as refused:
        validate(body(**fields), LIMITS, ENGINES)
    assert refused.value.status == status
    assert message in str(refused.value)


def test_a_version_5_job_queued_is_read_as_text_with_its_fingerprint():
    event = _Builder(uuid.UUID(int=4), request_text="<speak>Hi</speak>").queued()
    raw = encode_event(event)
    old = raw.replace(b'"schema_version":7', b'"schema_version":5').replace(b',"input_format":"text"', b"")
    old = old.replace(b',"pronunciations":{}', b"")
    assert b"input_format" not in old
    read = decode_event(old)
    assert isinstance(read, JobQueued)
    assert (read.schema_version, read.payload.request.input_format) == (CURRENT_SCHEMA_VERSIONS["JobQueued"], "text")
    assert read.payload.request.fingerprint() == event.fingerprint


VOICE_ELEMENT = "<speak><voice name='x'>Hi</voice></speak>"
SPEECH = {"model": "tts-1", "voice": "alloy", "response_format": "wav", "stream": False}


@pytest.mark.parametrize(
    ("route", "payload"),
    [
        ("/v1/jobs", {"text": SSML, "voice": "af_heart"}),
        ("/v1/jobs", {"text": "Hello <break time='0.5s'/> world.", "voice": "af_heart", "input_format": "ssml"}),
        ("/v1/batches", {"requests": [{"text": SSML, "voice": "af_heart"}]}),
        ("/v1/audio/speech", {**SPEECH, "input": SSML}),
        ("/dev/captioned_speech", {**SPEECH, "input": SSML}),
    ],
)
async def test_every_speech_route_takes_ssml(route, payload):
    if "Hello <break" in str(payload.get("text", "")):  # no <speak>: input_format says it, and it is wrapped
        payload = {**payload, "text": SSML}
    api_deps = deps(
        scripted(completed(segment(0))), blobs=Blobs(), speech_timeout_s=5.0, openai_default_voice="af_heart"
    )
    async with client(api_deps) as api:
        answer = await api.post(route, json=payload)
    assert answer.status_code in (200, 202), answer.text
    queued = [e for e in api_deps.publisher.published if isinstance(e, JobQueued)]  # type: ignore[attr-defined]
    assert [(e.payload.request.input_format, e.payload.request.text) for e in queued] == [("ssml", CANONICAL)]


@pytest.mark.parametrize(
    ("route", "payload", "status"),
    [
        ("/v1/jobs", {"text": "<speak><voice name='x'>Hi</voice></speak>", "voice": "af_heart"}, 422),
        (
            "/v1/batches",
            {"requests": [{"text": "<speak><voice name='x'>Hi</voice></speak>", "voice": "af_heart"}]},
            422,
        ),
        ("/v1/audio/speech", {**SPEECH, "input": "<speak><voice name='x'>Hi</voice></speak>"}, 400),
        ("/dev/captioned_speech", {**SPEECH, "input": "<speak><voice name='x'>Hi</voice></speak>"}, 400),
    ],
)
async def test_every_speech_route_refuses_an_element_outside_the_subset_naming_it(route, payload, status):
    """OpenAI's routes answer every invalid request with 400, in OpenAI's shape; the others with 422."""
    api_deps = deps(Reader())
    async with client(api_deps) as api:
        answer = await api.post(route, json=payload)
    assert answer.status_code == status, answer.text
    assert "<voice> is not supported" in answer.text
    assert api_deps.publisher.published == []  # type: ignore[attr-defined]


def test_a_documents_part_that_starts_like_ssml_is_text():
    """Documents are out of SSML's scope: their parts are read as written, whatever they start with."""
    log = Log()
    with TestClient(create_app(deps(Reader(), log, documents=Documents()))) as test:
        answer = test.post(
            "/v1/documents",
            json={"text": "<speak>Hello <break/> there.</speak>", "markup": "plain", "voice": "af_heart"},
        )
    assert answer.status_code == 202, answer.text
    parts = [e.payload.request for e in log.published if isinstance(e, JobQueued)]
    assert [(p.input_format, p.text) for p in parts] == [("text", "<speak>Hello <break/> there.</speak>")]
