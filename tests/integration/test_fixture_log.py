"""The committed version-1 log replays through today's decoder into the committed tables (tests/fixtures)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import asyncpg

from contracts import decode_event
from foundation.kafka import RecordPosition
from projections.archive import Manifest, read_file
from projections.audit import LoggedEvent, Outcome, history_of
from projections.migrations import drop_schema, migrate_database
from projections.rebuild import write
from tests.support.fixture_log import EXPECTED, FIXTURE, dump_tables, fold_archive


def fixture_records() -> list[tuple[RecordPosition, int, bytes | None]]:
    manifest = Manifest.load(FIXTURE)
    return [
        (RecordPosition(manifest.topic, entry.partition, r.offset), r.timestamp, r.value)
        for entry in manifest.files
        for r in read_file(FIXTURE, entry)
    ]


def test_the_fixture_is_a_version_1_log_with_every_event_type():
    raw = [json.loads(value or b"{}") for _, _, value in fixture_records()]
    assert {r["schema_version"] for r in raw} == {1}
    assert {r["type"] for r in raw} == {
        "JobQueued",
        "JobClaimed",
        "SegmentProduced",
        "JobCompleted",
        "JobReleased",
        "JobFailed",
    }


async def test_the_v1_fixture_log_replays_into_the_committed_tables(stack):
    schema = f"fx_{uuid.uuid4().hex[:14]}"
    await migrate_database(stack.database_url, schema)
    conn = await asyncpg.connect(stack.database_url)
    try:
        await write(conn, schema, fold_archive(FIXTURE), "replay")
        rebuilt = await dump_tables(conn, schema)
    finally:
        await conn.close()
        await drop_schema(stack.database_url, schema)
    expected = json.loads(EXPECTED.read_text())
    for table, rows in expected.items():
        assert rebuilt[table] == rows, f"{table} differs from the committed expectation"


def test_the_audit_of_the_fixtures_killed_job_shows_both_attempts_and_the_fenced_late_events():
    logged = [
        LoggedEvent(at, datetime.fromtimestamp(ts / 1000, UTC), decode_event(value))
        for at, ts, value in sorted(fixture_records(), key=lambda r: (r[0].partition, r[0].offset))
    ]
    killed = next(e.event.job_id for e in logged if e.event.attempt == 2 and e.event.type == "JobCompleted")
    history = history_of(killed, logged)
    assert [(a.attempt, a.worker_id, a.ended_by) for a in history.attempts.values()] == [
        (1, "w0", "taken over by attempt 2"),
        (2, "w1", "completed"),
    ]
    assert [(e.logged.event.type, e.outcome) for e in history.entries if e.outcome != Outcome.APPLIED] == [
        ("SegmentProduced", Outcome.FENCED),
        ("JobCompleted", Outcome.FENCED),
        ("JobClaimed", Outcome.DUPLICATE),
    ]
