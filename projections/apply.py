"""How each event changes the projection tables.

Every function runs inside the batch's transaction. Applying an event twice
changes nothing: ``job_events.event_id`` is unique and an event whose id is
already there is skipped. Fencing follows ``contracts.job_state``: the guard
of each statement (the states and the attempt comparison a job row must
match) is built from that module's ``RULES``, so an event the rule fences
matches no row, and a worker declared stale cannot overwrite the newer
attempt's state, segments or result.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Final

import asyncpg

from contracts import (
    CacheEvicted,
    DocumentSubmitted,
    JobCancelled,
    JobClaimed,
    JobCompleted,
    JobEvent,
    JobFailed,
    JobQueued,
    JobReleased,
    JobState,
    NodeEvent,
    NodeHeartbeat,
    SegmentProduced,
    ServiceModeSet,
    type_name,
)
from contracts.job_state import CACHE_HIT, RULES, AttemptRule, Rule
from foundation.kafka import RecordPosition
from projections.rows import DocumentRow, as_record, columns, document_row, event_row


def guard(rule: Rule, attempt_param: str) -> str:
    """The WHERE condition on a ``jobs`` row under which ``rule`` applies (the state machine's, in SQL)."""
    states = ", ".join(f"'{state.value}'" for state in sorted(rule.from_states))
    if rule.attempt is AttemptRule.ANY:
        return f"state IN ({states})"
    compare = "<" if rule.attempt is AttemptRule.NEWER else "="
    return f"state IN ({states}) AND attempt {compare} {attempt_param}"


def _to(rule: Rule) -> str:
    assert rule.to_state is not None, rule
    return f"'{rule.to_state.value}'"


_CLAIMED: Final = RULES[type_name(JobClaimed)]
_SEGMENT: Final = RULES[type_name(SegmentProduced)]
_COMPLETED: Final = RULES[type_name(JobCompleted)]
_CACHE_HIT: Final = RULES[CACHE_HIT]
_RELEASED: Final = RULES[type_name(JobReleased)]
_FAILED: Final = RULES[type_name(JobFailed)]
_CANCELLED: Final = RULES[type_name(JobCancelled)]


class Outcome(StrEnum):
    APPLIED = "applied"
    FENCED = "fenced"  # recorded in job_events, changing nothing else (contracts.job_state)
    DUPLICATE = "duplicate"  # this event id was applied before


async def apply_job_event(
    conn: asyncpg.Connection, event: JobEvent, at: RecordPosition, cache_ttl: timedelta
) -> Outcome:
    """Apply one job event, and say what it did."""
    recorded = await conn.fetchval(
        "INSERT INTO job_events (event_id, job_id, fingerprint, type, schema_version, attempt, occurred_at,"
        " producer, topic, kafka_partition, kafka_offset, payload)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::jsonb)"
        " ON CONFLICT (event_id) DO NOTHING RETURNING true",
        *as_record(event_row(event, at)),  # the row replay and the set-based path write, column for column
    )
    if not recorded:
        return Outcome.DUPLICATE
    match event:
        case JobQueued():
            applied = await _queued(conn, event)
        case JobClaimed():
            applied = await _claimed(conn, event)
        case SegmentProduced():
            applied = await _segment(conn, event)
        case JobCompleted():
            applied = await _completed(conn, event, cache_ttl)
        case JobReleased():
            applied = await _released(conn, event)
        case JobFailed():
            applied = await _failed(conn, event)
        case CacheEvicted():
            applied = await _evicted(conn, event)
        case JobCancelled():
            applied = await _cancelled(conn, event)
    return Outcome.APPLIED if applied else Outcome.FENCED


async def _queued(conn: asyncpg.Connection, e: JobQueued) -> bool:
    status: str = await conn.execute(
        "INSERT INTO jobs (job_id, fingerprint, state, attempt, request, idempotency_key, submitted_at,"
        f" updated_at, last_event_id) VALUES ($1, $2, '{JobState.QUEUED.value}', $3, $4::jsonb, $5, $6, $7, $8)"
        " ON CONFLICT (job_id) DO NOTHING",
        e.job_id,
        e.fingerprint,
        e.attempt,
        e.payload.request.model_dump_json(),
        e.payload.idempotency_key,
        e.payload.submitted_at,
        e.occurred_at,
        e.event_id,
    )
    return status.endswith(" 1")


async def _claimed(conn: asyncpg.Connection, e: JobClaimed) -> bool:
    status = await conn.execute(
        f"UPDATE jobs SET state = {_to(_CLAIMED)}, attempt = $2, worker_id = $3, claimed_at = $4, updated_at = $4,"
        " last_event_id = $5, release_reason = NULL, not_before = NULL"
        f" WHERE job_id = $1 AND {guard(_CLAIMED, '$2')}",
        e.job_id,
        e.attempt,
        e.payload.worker_id,
        e.occurred_at,
        e.event_id,
    )
    if status != "UPDATE 1":
        return False
    await conn.execute("DELETE FROM segments WHERE job_id = $1 AND attempt < $2", e.job_id, e.attempt)
    return True


async def _segment(conn: asyncpg.Connection, e: SegmentProduced) -> bool:
    p = e.payload
    status: str = await conn.execute(
        "INSERT INTO segments (job_id, segment_index, attempt, span_start, span_end, span_text, audio_sha256,"
        " audio_uri, duration_ms, sample_rate, byte_length, produced_at, segment_key, reused)"
        " SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14"
        f" WHERE EXISTS (SELECT 1 FROM jobs WHERE job_id = $1 AND {guard(_SEGMENT, '$3')})"
        " ON CONFLICT (job_id, segment_index) DO UPDATE SET attempt = EXCLUDED.attempt,"
        " span_start = EXCLUDED.span_start, span_end = EXCLUDED.span_end, span_text = EXCLUDED.span_text,"
        " audio_sha256 = EXCLUDED.audio_sha256, audio_uri = EXCLUDED.audio_uri,"
        " duration_ms = EXCLUDED.duration_ms, sample_rate = EXCLUDED.sample_rate,"
        " byte_length = EXCLUDED.byte_length, produced_at = EXCLUDED.produced_at,"
        " segment_key = EXCLUDED.segment_key, reused = EXCLUDED.reused"
        " WHERE segments.attempt < EXCLUDED.attempt",
        e.job_id,
        p.index,
        e.attempt,
        p.span.start,
        p.span.end,
        p.span.text,
        p.audio.sha256,
        p.audio.uri,
        p.duration_ms,
        p.sample_rate,
        p.byte_length,
        e.occurred_at,
        p.segment_key,
        p.reused,
    )
    return status.endswith(" 1")


_COMPLETE: Final = (
    "UPDATE jobs SET state = {to}, segment_count = $3, total_duration_ms = $4, cache_hit = $5,"
    " source_job_id = $6, completed_at = $7, updated_at = $7, last_event_id = $8"
    " WHERE job_id = $1 AND {guard}"
)
_COMPLETE_SYNTHESIZED: Final = _COMPLETE.format(to=_to(_COMPLETED), guard=guard(_COMPLETED, "$2"))
_COMPLETE_CACHE_HIT: Final = _COMPLETE.format(to=_to(_CACHE_HIT), guard=guard(_CACHE_HIT, "$2"))


async def _completed(conn: asyncpg.Connection, e: JobCompleted, cache_ttl: timedelta) -> bool:
    p = e.payload
    status = await conn.execute(
        _COMPLETE_CACHE_HIT if p.cache_hit else _COMPLETE_SYNTHESIZED,
        e.job_id,
        e.attempt,
        p.segment_count,
        p.total_duration_ms,
        p.cache_hit,
        p.source_job_id,
        e.occurred_at,
        e.event_id,
    )
    if status != "UPDATE 1":
        return False
    if p.cache_hit:
        await conn.execute(
            "UPDATE result_cache SET last_hit_at = greatest(last_hit_at, $2) WHERE fingerprint = $1",
            e.fingerprint,
            e.occurred_at,
        )
        return True
    await conn.execute(
        "INSERT INTO result_cache (fingerprint, job_id, segment_count, total_duration_ms, total_bytes,"
        " created_at, expires_at, last_hit_at)"
        " SELECT $1, $2, $3, $4, coalesce(sum(byte_length), 0), $5, $6, $5 FROM segments WHERE job_id = $2"
        " ON CONFLICT (fingerprint) DO UPDATE SET job_id = EXCLUDED.job_id,"
        " segment_count = EXCLUDED.segment_count, total_duration_ms = EXCLUDED.total_duration_ms,"
        " total_bytes = EXCLUDED.total_bytes, created_at = EXCLUDED.created_at,"
        " expires_at = EXCLUDED.expires_at, last_hit_at = EXCLUDED.last_hit_at"
        " WHERE result_cache.created_at < EXCLUDED.created_at",
        e.fingerprint,
        e.job_id,
        p.segment_count,
        p.total_duration_ms,
        e.occurred_at,
        e.occurred_at + cache_ttl,
    )
    return True


async def _released(conn: asyncpg.Connection, e: JobReleased) -> bool:
    p = e.payload
    status = await conn.execute(
        f"UPDATE jobs SET state = {_to(_RELEASED)}, release_reason = $3, not_before = $4, updated_at = $5,"
        f" last_event_id = $6 WHERE job_id = $1 AND {guard(_RELEASED, '$2')}",
        e.job_id,
        p.failed_attempt,
        p.reason,
        p.not_before,
        e.occurred_at,
        e.event_id,
    )
    if status != "UPDATE 1":
        return False
    # Partial segments of the released attempt are discarded.
    await conn.execute("DELETE FROM segments WHERE job_id = $1 AND attempt <= $2", e.job_id, p.failed_attempt)
    return True


async def _failed(conn: asyncpg.Connection, e: JobFailed) -> bool:
    status: str = await conn.execute(
        f"UPDATE jobs SET state = {_to(_FAILED)}, error_code = $3, error_message = $4, failed_at = $5,"
        f" updated_at = $5, last_event_id = $6 WHERE job_id = $1 AND {guard(_FAILED, '$2')}",
        e.job_id,
        e.attempt,
        e.payload.reason_code,
        e.payload.message,
        e.occurred_at,
        e.event_id,
    )
    return status == "UPDATE 1"


async def _cancelled(conn: asyncpg.Connection, e: JobCancelled) -> bool:
    status: str = await conn.execute(
        f"UPDATE jobs SET state = {_to(_CANCELLED)}, cancel_reason = $2, cancelled_at = $3, updated_at = $3,"
        f" last_event_id = $4 WHERE job_id = $1 AND {guard(_CANCELLED, '')}",  # any attempt: no parameter
        e.job_id,
        e.payload.reason,
        e.occurred_at,
        e.event_id,
    )
    return status == "UPDATE 1"


async def _document(conn: asyncpg.Connection, event: DocumentSubmitted) -> bool:
    status: str = await conn.execute(
        f"INSERT INTO documents ({', '.join(columns(DocumentRow))})"
        " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8::jsonb, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
        *as_record(document_row(event)),
    )
    return status.endswith(" 1")


async def apply_node_event(conn: asyncpg.Connection, event: NodeEvent) -> bool:
    """Upsert the worker's row; an older announcement or heartbeat never replaces a newer one."""
    if isinstance(event, DocumentSubmitted):
        return await _document(conn, event)
    if isinstance(event, NodeHeartbeat):
        return await _heartbeat(conn, event)
    if isinstance(event, ServiceModeSet):
        return await _mode(conn, event)
    p = event.payload
    status = await conn.execute(
        "INSERT INTO nodes (worker_id, engine, model_version, device, sample_rate, voices, languages,"
        " started_at, announced_at, last_event_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        " ON CONFLICT (worker_id) DO UPDATE SET engine = EXCLUDED.engine, model_version = EXCLUDED.model_version,"
        " device = EXCLUDED.device, sample_rate = EXCLUDED.sample_rate, voices = EXCLUDED.voices,"
        " languages = EXCLUDED.languages, started_at = EXCLUDED.started_at, announced_at = EXCLUDED.announced_at,"
        " last_event_id = EXCLUDED.last_event_id"
        " WHERE nodes.announced_at <= EXCLUDED.announced_at AND nodes.last_event_id <> EXCLUDED.last_event_id",
        p.worker_id,
        p.engine,
        p.model_version,
        p.device,
        p.sample_rate,
        list(p.voices),
        list(p.languages),
        p.started_at,
        event.occurred_at,
        event.event_id,
    )
    return status.endswith(" 1")


async def _heartbeat(conn: asyncpg.Connection, event: NodeHeartbeat) -> bool:
    p = event.payload
    status = await conn.execute(
        "INSERT INTO node_heartbeats (worker_id, engine, model_version, device, started_at, sent_at, job_id,"
        " fingerprint, attempt, segments_done, segments_total, text_chars, progress_at, chars_per_s, busy_s,"
        " last_event_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)"
        " ON CONFLICT (worker_id) DO UPDATE SET engine = EXCLUDED.engine, model_version = EXCLUDED.model_version,"
        " device = EXCLUDED.device, started_at = EXCLUDED.started_at, sent_at = EXCLUDED.sent_at,"
        " job_id = EXCLUDED.job_id, fingerprint = EXCLUDED.fingerprint, attempt = EXCLUDED.attempt,"
        " segments_done = EXCLUDED.segments_done, segments_total = EXCLUDED.segments_total,"
        " text_chars = EXCLUDED.text_chars, progress_at = EXCLUDED.progress_at,"
        " chars_per_s = EXCLUDED.chars_per_s, busy_s = EXCLUDED.busy_s, last_event_id = EXCLUDED.last_event_id"
        " WHERE node_heartbeats.sent_at <= EXCLUDED.sent_at",
        p.worker_id,
        p.engine,
        p.model_version,
        p.device,
        p.started_at,
        p.sent_at,
        p.job_id,
        p.fingerprint,
        p.attempt,
        p.segments_done,
        p.segments_total,
        p.text_chars,
        p.progress_at,
        p.chars_per_s,
        p.busy_s,
        event.event_id,
    )
    return status.endswith(" 1")


async def _mode(conn: asyncpg.Connection, event: ServiceModeSet) -> bool:
    m = event.payload
    status = await conn.execute(
        "INSERT INTO service_modes (mode, source, enabled, reason, set_at, last_event_id)"
        " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (mode, source) DO UPDATE SET enabled = EXCLUDED.enabled,"
        " reason = EXCLUDED.reason, set_at = EXCLUDED.set_at, last_event_id = EXCLUDED.last_event_id"
        " WHERE service_modes.set_at <= EXCLUDED.set_at",
        m.mode,
        m.source,
        m.enabled,
        m.reason,
        event.occurred_at,
        event.event_id,
    )
    return status.endswith(" 1")


async def _evicted(conn: asyncpg.Connection, e: CacheEvicted) -> bool:
    """Drop the result cache entry the eviction names (a newer result of the fingerprint stays)."""
    completed = await conn.fetchval(
        f"SELECT state = '{JobState.COMPLETED.value}' FROM jobs WHERE job_id = $1", e.job_id
    )
    if not completed:
        return False  # fenced: a job that never completed has no result to evict
    await conn.execute("DELETE FROM result_cache WHERE fingerprint = $1 AND job_id = $2", e.fingerprint, e.job_id)
    return True
