# ruff: noqa: RUF001
"""Hypothesis strategies for the control topic, and for a projector's batches that hold both topics.

``node_logs`` plays what the control topic holds: a few workers' announcements
and heartbeats, cache-only switches of both sources, documents, API keys and
lexicon entries set and removed, each
stamped by its producer's clock, which takes few values (so a later record of
the log can carry an older time), with any record delivered again later (an
exact copy) or followed by another record of the same row at the same clock
(an id and a content of its own: a tie the rows' rules must break the same
way everywhere). Text fields hold what ``COPY`` and array literals must
escape.

``with_node_events`` merges a jobs log with a nodes log in any order that
keeps each one's own: the projector reads both topics, and its batches hold
records of both.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hypothesis import strategies as st

from contracts import (
    WEBHOOK_EVENT_TYPES,
    ApiKeyIssued,
    ApiKeyIssuedPayload,
    ApiKeyRevoked,
    ApiKeyRevokedPayload,
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    JobEvent,
    LexiconEntryRemoved,
    LexiconEntryRemovedPayload,
    LexiconEntrySet,
    LexiconEntrySetPayload,
    NodeAnnounced,
    NodeAnnouncedPayload,
    NodeEvent,
    NodeHeartbeat,
    NodeHeartbeatPayload,
    ServiceModeSet,
    ServiceModeSetPayload,
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    WebhookEndpointRemoved,
    WebhookEndpointRemovedPayload,
    WebhookEndpointSet,
    WebhookEndpointSetPayload,
)
from contracts.scheduling import HeldClaim, QueueCount, QueuedJob
from tests.support.events import PRODUCER, T0, request

_TRICKY = 'Say "\\N",\ta back\\slash\nand {braces}, ünïcödé'
_WORKERS = st.sampled_from(["w-a", 'w "b"\t\\'])
_CLOCK = st.integers(0, 3).map(lambda s: T0 + timedelta(seconds=s))
_VOICES = st.lists(st.sampled_from(["af_heart", 'a"b', "c,d", "", "{x}", "back\\slash", "NULL"]), max_size=3)
_DOCUMENTS = (uuid.UUID(int=7001), uuid.UUID(int=7002))


def _announced(draw: st.DrawFn, common: dict) -> NodeAnnounced:
    payload = NodeAnnouncedPayload(
        worker_id=draw(_WORKERS),
        engine="kokoro-onnx",
        model_version=draw(st.sampled_from(["m1", "m2"])),
        device=draw(st.sampled_from(["cpu", "cuda:0"])),
        sample_rate=24000,
        voices=tuple(draw(_VOICES)),
        languages=tuple(draw(st.sampled_from([[], ["en-us"], ["en-us", "ja"]]))),
        started_at=T0,
    )
    return NodeAnnounced(payload=payload, **common)


def _heartbeat(draw: st.DrawFn, common: dict) -> NodeHeartbeat:
    busy = draw(st.booleans())
    # Version 2: the claims it holds and the jobs waiting on it (jsonb columns of their own).
    claims = tuple(
        HeldClaim(job_id=uuid.UUID(int=n), fingerprint="ab" * 32, attempt=1, text_chars=n * 10, running=n == 1,
                  progress_at=common["occurred_at"])
        for n in range(1, draw(st.integers(1, 3)) + 1)
    ) if busy else ()  # fmt: skip
    waiting = draw(st.integers(0, 3))
    queue = tuple(
        QueuedJob(job_id=uuid.UUID(int=100 + n), tenant="t-a" if n % 2 else "t.b", priority="batch", text_chars=n)
        for n in range(waiting)
    )
    counts = (QueueCount(tenant="t-a", priority="batch", jobs=waiting, text_chars=3 * waiting),) if waiting else ()
    payload = NodeHeartbeatPayload(
        worker_id=draw(_WORKERS),
        engine="kokoro-onnx",
        model_version="m1",
        device="cpu",
        started_at=T0,
        sent_at=common["occurred_at"],
        job_id=uuid.UUID(int=draw(st.integers(1, 3))) if busy else None,
        fingerprint="ab" * 32 if busy else None,
        attempt=draw(st.integers(1, 3)) if busy else None,
        segments_done=draw(st.integers(0, 4)),
        segments_total=draw(st.none() | st.integers(0, 4)),
        text_chars=draw(st.none() | st.integers(0, 5000)),
        progress_at=common["occurred_at"] if busy else None,
        chars_per_s=draw(st.none() | st.floats(0.5, 500.0)),
        busy_s=draw(st.floats(0.0, 1e4, allow_subnormal=False)),
        claims=claims,
        queue=queue,
        queue_counts=counts,
    )
    return NodeHeartbeat(payload=payload, **common)


def _mode(draw: st.DrawFn, common: dict) -> ServiceModeSet:
    payload = ServiceModeSetPayload(
        mode=draw(st.sampled_from(["cache_only", "degraded"])),
        enabled=draw(st.booleans()),
        source=draw(st.sampled_from(["operator", "backlog"])),
        reason=draw(st.sampled_from(["", "backlog 2000 s", _TRICKY])),
    )
    return ServiceModeSet(payload=payload, **common)


def _document(draw: st.DrawFn, common: dict) -> DocumentSubmitted:
    payload = DocumentSubmittedPayload(
        document_id=draw(st.sampled_from(_DOCUMENTS)),
        title=draw(st.sampled_from(["A book", _TRICKY])),
        markup="markdown",
        chapters=(DocumentChapter(title=_TRICKY, parts=2), DocumentChapter(title="Two", parts=1)),
        breaks="spc",
        total_chars=120,
        request=request("A book"),
        idempotency_key=draw(st.none() | st.just("client-key")),
        submitted_at=common["occurred_at"],
    )
    return DocumentSubmitted(payload=payload, **common)


_KEYS = st.sampled_from(["0123456789ab", "ba9876543210"])


def _issued(draw: st.DrawFn, common: dict) -> ApiKeyIssued:
    payload = ApiKeyIssuedPayload(
        key_id=draw(_KEYS),
        tenant=draw(st.sampled_from(["acme", "default"])),
        scopes=tuple(draw(st.lists(st.sampled_from(["submit", "read", "admin", "operator"]), unique=True))),
        name=draw(st.sampled_from(["", _TRICKY])),
        secret_sha256="cd" * 32,
        issued_at=common["occurred_at"],
        expires_at=draw(st.none() | st.just(T0 + timedelta(days=30))),
    )
    return ApiKeyIssued(payload=payload, **common)


def _revoked(draw: st.DrawFn, common: dict) -> ApiKeyRevoked:
    payload = ApiKeyRevokedPayload(
        key_id=draw(_KEYS), tenant="acme", revoked_at=common["occurred_at"], reason=draw(st.sampled_from(["", _TRICKY]))
    )
    return ApiKeyRevoked(payload=payload, **common)


_WORDS = st.sampled_from(["tomato", 'to"ma\\to'])


def _word_set(draw: st.DrawFn, common: dict) -> LexiconEntrySet:
    payload = LexiconEntrySetPayload(
        word=draw(_WORDS),
        phonemes=draw(st.sampled_from(["təmˈɑːtoʊ", "təmˈAtO"])),
        reason=draw(st.sampled_from(["", _TRICKY])),
    )
    return LexiconEntrySet(payload=payload, **common)


def _word_removed(draw: st.DrawFn, common: dict) -> LexiconEntryRemoved:
    payload = LexiconEntryRemovedPayload(word=draw(_WORDS), reason=draw(st.sampled_from(["", _TRICKY])))
    return LexiconEntryRemoved(payload=payload, **common)


_ENDPOINTS = st.sampled_from([uuid.UUID(int=7), uuid.UUID(int=8)])


def _endpoint_set(draw: st.DrawFn, common: dict) -> WebhookEndpointSet:
    payload = WebhookEndpointSetPayload(
        endpoint_id=draw(_ENDPOINTS),
        tenant=draw(st.sampled_from(["acme", "default"])),
        url=draw(st.sampled_from(["https://hooks.example.com/a", "https://example.org/x?q=" + _TRICKY])),
        event_types=tuple(draw(st.lists(st.sampled_from(WEBHOOK_EVENT_TYPES), unique=True, min_size=1))),
        description=draw(st.sampled_from(["", _TRICKY])),
        secret_generation=draw(st.integers(1, 3)),
        previous_secret_until=draw(st.none() | st.just(T0 + timedelta(days=1))),
        created_at=T0,
    )
    return WebhookEndpointSet(payload=payload, **common)


def _endpoint_removed(draw: st.DrawFn, common: dict) -> WebhookEndpointRemoved:
    payload = WebhookEndpointRemovedPayload(
        endpoint_id=draw(_ENDPOINTS), tenant="acme", reason=draw(st.sampled_from(["", _TRICKY]))
    )
    return WebhookEndpointRemoved(payload=payload, **common)


_DELIVERIES = st.sampled_from([uuid.UUID(int=9), uuid.UUID(int=10)])


def _delivery(draw: st.DrawFn, common: dict) -> WebhookDeliveryRecorded:
    attempts = draw(st.integers(0, 3))
    payload = WebhookDeliveryRecordedPayload(
        delivery_id=draw(_DELIVERIES),
        endpoint_id=draw(_ENDPOINTS),
        tenant="acme",
        event_type=draw(st.sampled_from(WEBHOOK_EVENT_TYPES)),
        job_id=draw(st.none() | st.just(uuid.UUID(int=11))),
        body='{"type": "job.completed", "note": "' + _TRICKY.replace('"', "'").replace("\\", "/") + '"}',
        created_at=T0,
        state=draw(st.sampled_from(["pending", "delivered", "given_up"])),
        attempts=attempts,
        next_attempt_at=draw(st.none() | st.just(T0 + timedelta(seconds=30))),
        last_status=draw(st.none() | st.sampled_from([204, 500])),
        last_error=draw(st.sampled_from(["", _TRICKY])),
        last_duration_ms=draw(st.none() | st.just(12)),
    )
    return WebhookDeliveryRecorded(payload=payload, **common)


_KINDS = {
    "announced": _announced,
    "heartbeat": _heartbeat,
    "mode": _mode,
    "document": _document,
    "issued": _issued,
    "revoked": _revoked,
    "word_set": _word_set,
    "word_removed": _word_removed,
    "endpoint_set": _endpoint_set,
    "endpoint_removed": _endpoint_removed,
    "delivery": _delivery,
}


@st.composite
def _node_event(draw: st.DrawFn) -> NodeEvent:
    common = {"event_id": draw(st.uuids()), "occurred_at": draw(_CLOCK), "producer": PRODUCER}
    event: NodeEvent = _KINDS[draw(st.sampled_from(sorted(_KINDS)))](draw, common)
    return event


_SIBLING_CHANGES: dict[type, Callable[[Any], dict[str, object]]] = {
    NodeAnnounced: lambda p: {"device": "cuda:1"},
    NodeHeartbeat: lambda p: {"segments_done": p.segments_done + 1},
    ServiceModeSet: lambda p: {"enabled": not p.enabled},
    DocumentSubmitted: lambda p: {"title": "Submitted again"},
    ApiKeyIssued: lambda p: {"name": "issued again"},
    ApiKeyRevoked: lambda p: {"reason": "revoked again"},
    LexiconEntrySet: lambda p: {"phonemes": "tˈOmAtO"},
    LexiconEntryRemoved: lambda p: {"reason": "removed again"},
    WebhookEndpointSet: lambda p: {"secret_generation": p.secret_generation + 1},
    WebhookEndpointRemoved: lambda p: {"reason": "removed again"},
    WebhookDeliveryRecorded: lambda p: {"attempts": p.attempts + 1},
}


def _sibling(event: NodeEvent, event_id: uuid.UUID) -> NodeEvent:
    """Another record of the same row at the same clock (a restarted worker's, a second switch, a retried
    submission): an id and a content of its own."""
    change = _SIBLING_CHANGES[type(event)](event.payload)
    return event.model_copy(update={"event_id": event_id, "payload": event.payload.model_copy(update=change)})


@st.composite
def node_logs(draw: st.DrawFn) -> list[NodeEvent]:
    log = draw(st.lists(_node_event(), max_size=12))
    for original in draw(st.lists(st.integers(0, len(log) - 1), max_size=4)) if log else []:
        # Later: the same record again (a producer's retry), or another of the same row at the same clock.
        again = log[original] if draw(st.booleans()) else _sibling(log[original], draw(st.uuids()))
        log.insert(draw(st.integers(original + 1, len(log))), again)
    return log


@st.composite
def with_node_events(draw: st.DrawFn, jobs: st.SearchStrategy[list[JobEvent]]) -> list[JobEvent | NodeEvent]:
    """A log of ``jobs`` and a nodes log, merged in any order that keeps each one's own."""
    merged: list[JobEvent | NodeEvent] = list(draw(jobs))
    position = 0
    for event in draw(node_logs()):
        position = draw(st.integers(position, len(merged)))
        merged.insert(position, event)
        position += 1
    return merged
