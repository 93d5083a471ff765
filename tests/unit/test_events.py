from __future__ import annotations

import json
import uuid

import pytest
from pydantic import ValidationError

from contracts import (
    EVENT_CLASSES,
    HEADER_SCHEMA_VERSION,
    HEADER_TRACEPARENT,
    HEADER_TYPE,
    DecodeError,
    DegradedFrom,
    JobQueued,
    SegmentProduced,
    UnsupportedSchemaVersion,
    decode_event,
    derive_event_id,
    encode_event,
    event_headers,
    header_value,
)
from contracts.codec import is_traceparent
from contracts.events import CURRENT_SCHEMA_VERSIONS
from tests.support.events import one_of_each


def test_the_sample_job_covers_every_event_type():
    assert {type(e) for e in one_of_each()} == set(EVENT_CLASSES)


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: e.type)
def test_every_event_type_round_trips_through_json(event):
    decoded = decode_event(encode_event(event))
    assert decoded == event
    assert type(decoded) is type(event)


@pytest.mark.parametrize("event", one_of_each(), ids=lambda e: e.type)
def test_headers_carry_type_version_and_trace(event):
    headers = event_headers(event)
    assert header_value(headers, HEADER_TYPE) == event.type
    assert header_value(headers, HEADER_SCHEMA_VERSION) == str(event.schema_version)
    trace = header_value(headers, HEADER_TRACEPARENT)
    assert trace is not None
    assert is_traceparent(trace)


def test_a_given_traceparent_is_propagated_and_a_malformed_one_replaced():
    event = one_of_each()[0]
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert header_value(event_headers(event, parent), HEADER_TRACEPARENT) == parent
    replaced = header_value(event_headers(event, "not-a-trace"), HEADER_TRACEPARENT)
    assert replaced != "not-a-trace"
    assert replaced is not None
    assert is_traceparent(replaced)


def test_events_are_immutable():
    event = one_of_each()[0]
    with pytest.raises(ValidationError):
        event.attempt = 5  # type: ignore[misc]


def test_unknown_type_is_a_decode_error_naming_the_field():
    raw = json.loads(encode_event(one_of_each()[0]))
    raw["type"] = "JobExploded"
    with pytest.raises(DecodeError, match="type"):
        decode_event(json.dumps(raw).encode())


@pytest.mark.parametrize(
    ("data", "reason"),
    [(None, "tombstone"), (b"\xff\xfe", "UTF-8 JSON"), (b"[1, 2]", "expected an object"), (b"{", "JSON")],
)
def test_undecodable_values_say_why(data, reason):
    with pytest.raises(DecodeError, match=reason):
        decode_event(data)


def test_extra_fields_are_rejected():
    raw = json.loads(encode_event(one_of_each()[1]))
    raw["payload"]["gpu_temperature"] = 80
    with pytest.raises(DecodeError, match="gpu_temperature"):
        decode_event(json.dumps(raw).encode())


def test_a_newer_schema_version_is_refused_with_advice():
    raw = json.loads(encode_event(one_of_each()[0]))
    raw["schema_version"] = CURRENT_SCHEMA_VERSIONS["JobQueued"] + 1
    with pytest.raises(UnsupportedSchemaVersion, match="upgrade voxlog"):
        decode_event(json.dumps(raw).encode())


def test_an_older_schema_version_is_upcast_through_its_steps_and_read_as_it_is_where_none_is_written():
    current = one_of_each()[4]  # JobCompleted, at version 2
    raw = json.loads(encode_event(current))
    # Pretend version 1 named the count "segments": a rename, which only a written step can read.
    raw["schema_version"] = 1
    raw["payload"]["segments"] = raw["payload"].pop("segment_count")

    def v1_to_v2(old: dict) -> dict:
        payload = dict(old["payload"])
        payload["segment_count"] = payload.pop("segments")
        return {**old, "payload": payload}

    assert decode_event(json.dumps(raw).encode(), {("JobCompleted", 1): v1_to_v2}) == current
    with pytest.raises(DecodeError, match="segments"):  # no step: read as it is, and the rename is refused
        decode_event(json.dumps(raw).encode(), {})
    raw["schema_version"] = 0
    with pytest.raises(UnsupportedSchemaVersion, match="start at 1"):
        decode_event(json.dumps(raw).encode())


def test_deterministic_event_ids_repeat_for_the_same_fact_only():
    job = uuid.uuid4()
    assert derive_event_id(job, "SegmentProduced", 1, 3) == derive_event_id(job, "SegmentProduced", 1, 3)
    assert derive_event_id(job, "SegmentProduced", 1, 3) != derive_event_id(job, "SegmentProduced", 2, 3)
    assert derive_event_id(job, "SegmentProduced", 1, 3) != derive_event_id(job, "SegmentProduced", 1, 4)


def test_naive_timestamps_are_rejected():
    raw = json.loads(encode_event(one_of_each()[0]))
    raw["occurred_at"] = "2026-11-29T12:00:00"
    with pytest.raises(DecodeError, match="occurred_at"):
        decode_event(json.dumps(raw).encode())


def test_fingerprint_must_be_a_sha256_hex():
    event = one_of_each()[0]
    with pytest.raises(ValidationError):
        JobQueued(**{**event.model_dump(), "fingerprint": "abc"})


def test_node_announcements_round_trip_and_are_keyed_by_worker():
    from contracts import decode_node_event, record_key
    from tests.support.events import node_announced

    node = node_announced("gpu-box-cuda:1", engine="kokoro", device="cuda:1")
    assert decode_node_event(encode_event(node)) == node
    assert record_key(node) == b"gpu-box-cuda:1"
    assert header_value(event_headers(node), HEADER_TYPE) == "NodeAnnounced"
    with pytest.raises(DecodeError):
        decode_node_event(encode_event(one_of_each()[0]))


def test_a_version_1_claim_is_read_as_the_current_version_with_its_host_and_wait_unrecorded():
    claim = one_of_each()[1]
    assert (claim.type, claim.schema_version, claim.payload.host) == ("JobClaimed", 3, "node-1")
    v1 = json.loads(encode_event(claim))
    v1["schema_version"] = 1
    del v1["payload"]["host"]
    del v1["payload"]["waited"]
    read = decode_event(json.dumps(v1).encode())
    assert read == claim.model_copy(update={"payload": claim.payload.model_copy(update={"host": None})})
    assert read.schema_version == 3
    missing = json.loads(encode_event(claim))
    del missing["payload"]["host"]
    with pytest.raises(DecodeError, match=r"payload\.host"):
        decode_event(json.dumps(missing).encode())


def test_a_version_1_heartbeat_is_read_with_its_one_job_as_its_one_running_claim():
    from contracts import decode_node_event

    job_id = uuid.uuid4()
    payload = {
        "worker_id": "w-1",
        "engine": "kokoro-onnx",
        "model_version": "m",
        "device": "cpu",
        "started_at": "2026-12-01T00:00:00Z",
        "sent_at": "2026-12-01T00:00:05Z",
        "job_id": str(job_id),
        "fingerprint": "a" * 64,
        "attempt": 2,
        "segments_done": 3,
        "text_chars": 120,
        "progress_at": "2026-12-01T00:00:04Z",
    }
    envelope = {"event_id": str(uuid.uuid4()), "occurred_at": "2026-12-01T00:00:05Z"}
    v1 = {**envelope, "type": "NodeHeartbeat", "schema_version": 1, "producer": {"service": "w", "instance": "i"}}
    busy = decode_node_event(json.dumps({**v1, "payload": payload}).encode())
    [claim] = busy.payload.claims
    seen = (claim.job_id, claim.attempt, claim.segments_done, claim.text_chars, claim.running)
    assert seen == (job_id, 2, 3, 120, True)
    idle = {key: value for key, value in payload.items() if key not in {"job_id", "fingerprint", "attempt"}}
    assert decode_node_event(json.dumps({**v1, "payload": idle}).encode()).payload.claims == ()


def test_a_version_1_job_queued_normalizes_and_keeps_its_fingerprint():
    current = one_of_each()[0]
    raw = json.loads(encode_event(current))
    raw["schema_version"] = 1
    del raw["payload"]["request"]["normalize"]
    decoded = decode_event(json.dumps(raw).encode())
    assert isinstance(decoded, JobQueued)
    assert decoded.payload.request.normalize is True
    assert decoded == current
    assert decoded.payload.request.fingerprint() == current.fingerprint


def test_a_request_read_as_written_has_a_fingerprint_of_its_own():
    request = one_of_each()[0].payload.request
    as_written = request.model_copy(update={"normalize": False})
    assert as_written.fingerprint() != request.fingerprint()
    assert request.model_copy(update={"normalize": True}).fingerprint() == request.fingerprint()


def test_a_version_2_segment_is_read_as_version_3_with_no_word_times():
    segment = next(e for e in one_of_each() if isinstance(e, SegmentProduced))
    raw = json.loads(encode_event(segment))
    raw["schema_version"] = 2
    raw["payload"].pop("words", None)
    read = decode_event(json.dumps(raw).encode())
    assert isinstance(read, SegmentProduced)
    assert (read.schema_version, read.payload.words) == (3, None)


def test_a_version_4_job_queued_is_read_as_version_5_not_degraded():
    current = one_of_each()[0]
    raw = json.loads(encode_event(current))
    raw["schema_version"] = 4
    del raw["payload"]["degraded_from"]
    read = decode_event(json.dumps(raw).encode())
    assert isinstance(read, JobQueued)
    assert (read.schema_version, read.payload.degraded_from) == (CURRENT_SCHEMA_VERSIONS["JobQueued"], None)
    assert read == current


def test_a_degraded_job_queued_round_trips_and_names_the_request_its_client_asked_for():
    current = one_of_each()[0]
    asked = current.payload.request
    degraded = asked.model_copy(update={"speed": 1.15, "sample_rate": 16000})
    was = DegradedFrom(speed=asked.speed, sample_rate=asked.sample_rate, reason="operator: launch day")
    event = current.model_copy(
        update={
            "fingerprint": degraded.fingerprint(),
            "payload": current.payload.model_copy(update={"request": degraded, "degraded_from": was}),
        }
    )
    read = decode_event(encode_event(event))
    assert isinstance(read, JobQueued)
    assert read.payload.degraded_from == was
    assert was.requested(read.payload.request) == asked
    assert read.fingerprint != asked.fingerprint()


def test_a_version_1_mode_switch_is_read_as_version_2_and_degraded_is_a_mode():
    from contracts import decode_node_event
    from tests.support.events import mode_set

    cache_only = mode_set(True, reason="maintenance")
    raw = json.loads(encode_event(cache_only))
    raw["schema_version"] = 1
    read = decode_node_event(json.dumps(raw).encode())
    assert (read.schema_version, read) == (2, cache_only)
    degraded = mode_set(True, mode="degraded")
    assert decode_node_event(encode_event(degraded)) == degraded
    raw = json.loads(encode_event(degraded))
    raw["payload"]["mode"] = "slow"
    with pytest.raises(DecodeError, match="mode"):
        decode_node_event(json.dumps(raw).encode())
