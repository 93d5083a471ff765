"""Bad input, malformed records and an unreachable broker: clear errors, nothing lost or half-recorded."""

from __future__ import annotations

import uuid

import httpx
import pytest

from contracts import decode_event, header_value
from contracts.topics import DLQ_HEADER_REASON, DLQ_HEADER_SOURCE_OFFSET, DLQ_HEADER_SOURCE_PARTITION
from tests.support.apps import start_pipeline, wait_for_job, wait_http
from tests.support.engines import FAILING_ENGINE
from tests.support.kafka import read_to_end
from tests.support.stack import free_port


async def test_bad_inputs_get_a_4xx_that_says_what_to_fix_and_enqueue_nothing(apps, topics):
    app, voices = await start_pipeline(apps, VOXLOG_MAX_TEXT_CHARS="200")
    voice = voices[0]
    cases = [
        ({"text": "", "voice": voice}, 422, "text is empty"),
        ({"text": " \t\u200b\n ", "voice": voice}, 422, "text is empty"),
        ({"text": "word " * 60, "voice": voice}, 413, "the limit is 200"),
        ({"text": "Hi.", "voice": voice, "speed": 5}, 422, "outside [0.25, 4.0]"),
        ({"text": "Hi.", "voice": "nobody"}, 422, f"known voices: {voice}"),
        ({"text": "Hi.", "voice": voice, "format": "m4a"}, 422, "supported formats: wav, flac"),
        ({"text": "Hi.", "voice": voice, "sample_rate": 8000}, 422, "supported rates: 16000"),
        ({"text": "Hi.", "voice": f"{voice}(2)+"}, 422, "jf_alpha(2)+jm_kumo(1)"),
        ({"text": "Hi.", "voice": voice, "lang": "xx"}, 422, "use one of: en-us"),
        ({"text": "Hi.", "voice": voice, "engine": "espeak"}, 422, "known engines: bench-sleep"),
        ({"text": "Hi.", "voice": voice, "colour": "blue"}, 400, "colour"),
        ({"voice": voice}, 400, "text"),
        ({"text": 42, "voice": voice}, 400, "text"),
    ]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        for body, status, message in cases:
            response = await client.post("/v1/jobs", json=body)
            assert response.status_code == status, (body, response.text)
            assert message in response.text, (body, response.text)
        not_json = await client.post("/v1/jobs", content=b"{nope", headers={"content-type": "application/json"})
        assert not_json.status_code == 400
        assert (await client.get("/v1/jobs/not-a-uuid")).status_code in (400, 404)
    assert await read_to_end(topics.kafka, topics.jobs) == [], "nothing was enqueued"


async def test_a_job_whose_every_attempt_fails_ends_failed_and_its_audio_is_409(apps):
    """Text with nothing to speak is refused at submission now (it was accepted, then failed): what still
    fails after acceptance is an engine that cannot render it, here the bench engine's injected failure."""
    app, voices = await start_pipeline(apps, **FAILING_ENGINE)
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        refused = await client.post("/v1/jobs", json={"text": "\U0001f389\U0001f680", "voice": voices[0]})
        assert refused.status_code == 422, refused.text
        assert "nothing to speak" in refused.text
        submitted = await client.post("/v1/jobs", json={"text": "A doomed request.", "voice": voices[0]})
        assert submitted.status_code == 202, submitted.text
        job = await wait_for_job(client, submitted.json()["job_id"])
        assert job["state"] == "failed"
        assert job["error"]["code"] == "engine_error"
        audio = await client.get(f"/v1/jobs/{job['job_id']}/audio")
        assert audio.status_code == 409
        assert "failed" in audio.text


async def test_malformed_records_go_to_the_dlq_and_the_pipeline_keeps_going(apps, topics):
    app, voices = await start_pipeline(apps)
    voice = voices[0]
    producer = topics.kafka.producer(acks="all")
    await producer.start()
    try:
        garbage = await producer.send_and_wait(
            topics.jobs, b"{not json", key=b"k1", headers=[("type", b"JobQueued"), ("schema_version", b"1")]
        )
        unknown = await producer.send_and_wait(topics.jobs, b'{"type": "JobExploded"}', key=b"k2")
    finally:
        await producer.stop()

    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        submitted = await client.post("/v1/jobs", json={"text": "Still working.", "voice": voice})
        job = await wait_for_job(client, submitted.json()["job_id"])
    assert job["state"] == "completed"

    dead = await read_to_end(topics.kafka, topics.settings.dlq_topic)
    by_source = {}
    for record in dead:
        source = (
            int(header_value(record.headers, DLQ_HEADER_SOURCE_PARTITION) or -1),
            int(header_value(record.headers, DLQ_HEADER_SOURCE_OFFSET) or -1),
        )
        by_source.setdefault(source, []).append(record)
    assert (garbage.partition, garbage.offset) in by_source
    assert (unknown.partition, unknown.offset) in by_source
    for records in by_source.values():
        for record in records:
            assert header_value(record.headers, DLQ_HEADER_REASON)
    garbage_reasons = {
        header_value(r.headers, DLQ_HEADER_REASON) for r in by_source[(garbage.partition, garbage.offset)]
    }
    assert all("not UTF-8 JSON" in (reason or "") for reason in garbage_reasons)
    consumers = {header_value(r.headers, "dlq.consumer").split(":")[0] for r in dead}
    assert consumers == {"projector", "worker"}, "each consumer reports what it could not process"
    with pytest.raises(Exception, match="JSON"):
        decode_event(by_source[(garbage.partition, garbage.offset)][0].value)


async def test_an_unreachable_broker_gets_503_and_nothing_is_recorded(apps, topics, pg):
    """An API whose broker is unreachable refuses the job and records nothing of it, in the log or in
    Postgres: the same request with the same Idempotency-Key through a healthy API is a new job."""
    app, voices = await start_pipeline(apps)
    body = {"text": "Lost?", "voice": voices[0]}
    headers = {"Idempotency-Key": "unreachable-broker-1"}
    dead_kafka = apps(VOXLOG_KAFKA_BOOTSTRAP_SERVERS=f"127.0.0.1:{free_port()}")
    dead_kafka.start("api", ["api"])
    await wait_http(f"{dead_kafka.api}/healthz")
    async with httpx.AsyncClient(base_url=dead_kafka.api, timeout=60) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["checks"]["postgres"] == "ok"
        assert ready.json()["checks"]["kafka"].startswith("error")
        response = await client.post("/v1/jobs", json=body, headers=headers)
        assert response.status_code == 503
        assert int(response.headers["retry-after"]) > 0
        assert "nothing was accepted" in response.text
    assert await pg.fetchval("SELECT count(*) FROM jobs") == 0
    assert await pg.fetchval("SELECT count(*) FROM job_events") == 0

    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        retried = await client.post("/v1/jobs", json=body, headers=headers)
        assert retried.status_code == 202, retried.text
        job = await wait_for_job(client, retried.json()["job_id"])
    assert job["state"] == "completed"
    queued = [
        e
        for e in (decode_event(r.value) for r in await read_to_end(topics.kafka, topics.jobs))
        if e.type == "JobQueued"
    ]
    assert [e.job_id for e in queued] == [uuid.UUID(job["job_id"])], "one submission on the log: the healthy one"
