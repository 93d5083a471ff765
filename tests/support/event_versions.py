"""Records as each earlier schema version wrote them, and what today's decoder must read them as.

``tests/fixtures/event_versions.json`` holds, for every event type and every version below its current one, a
record as that version wrote it and the current event it reads as. It was written once, with the upcaster
chain of the day (``python -m tests.support.event_versions``), from today's sample events with each field a
later version added taken out (the ``ADDED`` history below, which the events' docstrings tell); it is
committed and never written again, so it holds the decoder to what every earlier version meant whatever its
upcasters become (``tests/unit/test_event_versions.py``). The version-1 log (``tests/fixtures/v1_log``) is
the older, whole-log fixture of the same rule.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

from contracts import AnyEvent, decode_event, decode_node_event, encode_event
from contracts.events import CURRENT_SCHEMA_VERSIONS, EVENT_CLASSES, JOB_EVENT_TYPES, NODE_EVENT_CLASSES
from foundation.kafka import RecordPosition
from projections.reducer import Projection
from projections.rows import TABLES
from tests.support.events import document_submitted, mode_set, one_of_each
from tests.support.job_logs import _Builder

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "event_versions.json"
EVENT_MODELS: Final = {cls.model_fields["type"].default: cls for cls in (*EVENT_CLASSES, *NODE_EVENT_CLASSES)}

# (type, version) -> the payload fields (dotted within the payload) that version added.
ADDED: Final[dict[tuple[str, int], tuple[str, ...]]] = {
    ("JobQueued", 2): ("request.normalize", "priority"),
    ("JobQueued", 3): ("tenant", "key_id", "request.cache_scope"),
    ("JobQueued", 4): ("traceparent",),
    ("JobQueued", 5): ("degraded_from",),
    ("JobQueued", 6): ("request.input_format",),
    ("JobQueued", 7): ("request.pronunciations",),
    ("JobQueued", 8): ("document_id",),
    ("JobClaimed", 2): ("host",),
    ("JobClaimed", 3): ("waited",),
    ("SegmentProduced", 2): ("segment_key", "reused"),
    ("SegmentProduced", 3): ("words",),
    ("JobCompleted", 2): ("waited",),
    ("JobCompleted", 3): ("segment",),
    ("DocumentSubmitted", 2): (),  # the scene break "b" in breaks: a value, not a field
    ("DocumentSubmitted", 3): ("tenant",),
    ("DocumentSubmitted", 4): ("request.input_format",),
    ("DocumentSubmitted", 5): ("request.pronunciations",),
    ("ServiceModeSet", 2): (),  # the mode "degraded": a value, not a field
}


def samples() -> list[AnyEvent]:
    """Two jobs' lives with every event type, a document and a mode switch: every field a later version added
    at what an older record means."""
    done = _Builder(uuid.UUID(int=44))  # a job that completes: two segments, a second attempt after a release
    life = [done.queued(), done.claimed(1), done.segment(1, 0), done.released(1), done.claimed(2)]
    life += [done.segment(2, 0), done.segment(2, 1), done.completed(2, 2)]
    return [*life, *one_of_each(), document_submitted(uuid.UUID(int=41), parts=3), mode_set(True)]


def _without(raw: dict[str, Any], dotted: str) -> None:
    *path, last = dotted.split(".")
    target = raw["payload"]
    for name in path:
        target = target[name]
    target.pop(last, None)


def as_written_at(event: AnyEvent, version: int) -> dict[str, Any]:
    """``event`` as version ``version`` of its type wrote it."""
    raw = json.loads(encode_event(event))
    for later in range(version + 1, CURRENT_SCHEMA_VERSIONS[event.type] + 1):
        for dotted in ADDED[(event.type, later)]:
            _without(raw, dotted)
    raw["schema_version"] = version
    return raw


def heartbeat_v1() -> dict[str, Any]:
    """A version-1 heartbeat: its worker's one job named in the payload, where version 2 lists claims."""
    payload = {
        "worker_id": "w-1", "engine": "kokoro-onnx", "model_version": "m", "device": "cpu",
        "started_at": "2026-12-01T00:00:00Z", "sent_at": "2026-12-01T00:00:05Z",
        "job_id": str(uuid.UUID(int=42)), "fingerprint": "a" * 64, "attempt": 2, "segments_done": 3,
        "text_chars": 120, "progress_at": "2026-12-01T00:00:04Z",
    }  # fmt: skip
    return {
        "event_id": str(uuid.UUID(int=43)), "occurred_at": "2026-12-01T00:00:05Z", "type": "NodeHeartbeat",
        "schema_version": 1, "producer": {"service": "worker", "instance": "i"}, "payload": payload,
    }  # fmt: skip


def decoded(raw: dict[str, Any]) -> AnyEvent:
    """``raw`` read by today's decoder of its topic."""
    data = json.dumps(raw).encode()
    return decode_event(data) if raw["type"] in JOB_EVENT_TYPES else decode_node_event(data)


def entries(events: list[AnyEvent]) -> list[dict[str, Any]]:
    """Every (type, earlier version): the record as written, and the current event the decoder reads."""
    made = []
    for event in events:
        for version in range(1, CURRENT_SCHEMA_VERSIONS[event.type]):
            raw = as_written_at(event, version)
            made.append({"type": event.type, "version": version, "record": raw, "reads_as": _current(decoded(raw))})
    raw = heartbeat_v1()
    made.append({"type": "NodeHeartbeat", "version": 1, "record": raw, "reads_as": _current(decoded(raw))})
    return made


def log_at(events: list[AnyEvent], version: int) -> list[dict[str, Any]]:
    """The sample log as a deployment at ``version`` wrote it: each event at that version, or its type's
    current one when that is older."""
    return [as_written_at(e, min(version, CURRENT_SCHEMA_VERSIONS[e.type])) for e in events]


def replayed(log: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The tables ``log`` folds into, each row as JSON, in a stable order."""
    projection = Projection(timedelta(hours=1))
    for offset, raw in enumerate(log):
        event = decoded(raw)
        at = RecordPosition("jobs" if raw["type"] in JOB_EVENT_TYPES else "nodes", 0, offset)
        if raw["type"] in JOB_EVENT_TYPES:
            projection.apply(event, at)  # type: ignore[arg-type]
        else:
            projection.apply_node(event, at)  # type: ignore[arg-type]
    tables = {}
    for table in TABLES:
        rows = [json.dumps(asdict(row), default=str, sort_keys=True) for row in projection.rows(table.name)]  # type: ignore[call-overload]
        tables[table.name] = [json.loads(row) for row in sorted(rows)]
    return tables


def _current(event: AnyEvent) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(encode_event(event))
    return found


def load() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(FIXTURE.read_text())
    return found


def advance(fixture: dict[str, Any]) -> None:
    """Bring what the fixture expects up to today's versions, and nothing else: a version added since an
    expectation was written reads each older record as it did, with the fields it added at their defaults
    (the rule of ``contracts.upcasting``); the records themselves are never written again."""
    for entry in fixture["entries"]:
        _advance_event(entry["reads_as"])
    for tables in fixture["tables"].values():
        for row in tables.get("job_events", []):
            event = {
                "type": row["type"],
                "schema_version": row["schema_version"],
                "payload": json.loads(row["payload"]),
            }
            _advance_event(event)
            row["schema_version"] = event["schema_version"]
            row["payload"] = json.dumps(event["payload"], separators=(",", ":"))


def _advance_event(event: dict[str, Any]) -> None:
    kind = event["type"]
    while event["schema_version"] < CURRENT_SCHEMA_VERSIONS[kind]:
        event["schema_version"] += 1
        for dotted in ADDED[(kind, event["schema_version"])]:
            assert "." not in dotted, f"{kind}: a nested field's default is not read here ({dotted})"
            payload_model = EVENT_MODELS[kind].model_fields["payload"].annotation
            event["payload"][dotted] = payload_model.model_fields[dotted].default  # type: ignore[union-attr]


def write() -> None:
    """Add what the fixture lacks (a new version's records); what it holds is never written again, and what
    it expects only advanced (:func:`advance`)."""
    fixture = load() if FIXTURE.exists() else {"entries": [], "logs": {}, "tables": {}}
    advance(fixture)
    events = [decoded(raw) for raw in fixture.get("samples", [])] or samples()
    fixture["samples"] = [_current(e) for e in events]
    have = {(e["type"], e["version"]) for e in fixture["entries"]}
    fixture["entries"] += [e for e in entries(events) if (e["type"], e["version"]) not in have]
    for version in range(1, max(CURRENT_SCHEMA_VERSIONS.values())):
        if str(version) not in fixture["logs"]:
            fixture["logs"][str(version)] = log_at(events, version)
            fixture["tables"][str(version)] = replayed(fixture["logs"][str(version)])
    FIXTURE.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write()
    print(f"wrote {FIXTURE}")
