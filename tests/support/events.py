"""Builders of valid events for tests: one per type, varied by arguments."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from contracts import (
    ApiKeyIssued,
    ApiKeyIssuedPayload,
    ApiKeyRevoked,
    ApiKeyRevokedPayload,
    AudioRef,
    CacheEvicted,
    CacheEvictedPayload,
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    JobCancelled,
    JobCancelledPayload,
    JobClaimed,
    JobClaimedPayload,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobFailed,
    JobFailedPayload,
    JobQueued,
    JobQueuedPayload,
    JobReleased,
    JobReleasedPayload,
    NodeAnnounced,
    NodeAnnouncedPayload,
    NodeHeartbeat,
    NodeHeartbeatPayload,
    Producer,
    SegmentProduced,
    SegmentProducedPayload,
    ServiceMode,
    ServiceModeSet,
    ServiceModeSetPayload,
    SynthesisRequest,
    TextSpan,
    WordTiming,
    derive_event_id,
    node_event,
)
from contracts.events import recorded_segment
from contracts.scheduling import HeldClaim, QueueCount, QueuedJob

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
PRODUCER = Producer(service="tests", instance="pytest-1")


def request(text: str = "Hello world.", voice: str = "jf_alpha") -> SynthesisRequest:
    return SynthesisRequest(
        text=text,
        voice=voice,
        speed=1.0,
        lang="en-us",
        engine="kokoro-onnx",
        model_version="6e742170d309",
        format="wav",
        sample_rate=24000,
    )


def one_of_each(text: str = "Hello world.", job_id: uuid.UUID | None = None) -> list[JobEvent]:
    """A job's life with every event type, in an order a real job could take."""
    req = request(text)
    fp = req.fingerprint()
    job = job_id or uuid.uuid4()
    common = {"job_id": job, "fingerprint": fp, "producer": PRODUCER}
    sha = "ab" * 32
    return [
        JobQueued(
            event_id=uuid.uuid4(),
            attempt=0,
            occurred_at=T0,
            payload=JobQueuedPayload(request=req, idempotency_key="client-key-1", submitted_at=T0),
            **common,
        ),
        JobClaimed(
            event_id=derive_event_id(job, "JobClaimed", 1),
            attempt=1,
            occurred_at=T0 + timedelta(seconds=1),
            payload=JobClaimedPayload(
                worker_id="w1", device="cpu", engine="kokoro-onnx", model_version="6e742170d309", host="node-1"
            ),
            **common,
        ),
        JobReleased(
            event_id=derive_event_id(job, "JobReleased", 1),
            attempt=1,
            occurred_at=T0 + timedelta(seconds=2),
            payload=JobReleasedPayload(reason="transient", failed_attempt=1, not_before=T0 + timedelta(seconds=5)),
            **common,
        ),
        SegmentProduced(
            event_id=derive_event_id(job, "SegmentProduced", 2, 0),
            attempt=2,
            occurred_at=T0 + timedelta(seconds=6),
            payload=SegmentProducedPayload(
                index=0,
                span=TextSpan(start=0, end=len(text), text=text),
                audio=AudioRef(sha256=sha, uri=f"file:///blobs/{sha}"),
                duration_ms=1200,
                sample_rate=24000,
                byte_length=57644,
                words=(WordTiming(start=0, end=min(5, len(text)), start_ms=300, end_ms=650),),
            ),
            **common,
        ),
        JobCompleted(
            event_id=derive_event_id(job, "JobCompleted", 2),
            attempt=2,
            occurred_at=T0 + timedelta(seconds=7),
            payload=JobCompletedPayload(segment_count=1, total_duration_ms=1200),
            **common,
        ),
        CacheEvicted(
            event_id=derive_event_id(job, "CacheEvicted", 0),
            attempt=0,
            occurred_at=T0 + timedelta(seconds=7, milliseconds=500),
            payload=CacheEvictedPayload(reason="capacity", total_bytes=57644),
            **common,
        ),
        JobFailed(
            event_id=derive_event_id(job, "JobFailed", 3),
            attempt=3,
            occurred_at=T0 + timedelta(seconds=8),
            payload=JobFailedPayload(reason_code="engine_error", message="model raised", attempts=3),
            **common,
        ),
        JobCancelled(
            event_id=derive_event_id(job, "JobCancelled", 0),
            attempt=0,
            occurred_at=T0 + timedelta(seconds=9),
            payload=JobCancelledPayload(reason="client", message="DELETE /v1/jobs"),
            **common,
        ),
    ]


def node_announced(worker_id: str = "w-test", engine: str = "kokoro-onnx", device: str = "cpu") -> NodeAnnounced:
    return NodeAnnounced(
        event_id=uuid.uuid4(),
        occurred_at=T0,
        producer=PRODUCER,
        payload=NodeAnnouncedPayload(
            worker_id=worker_id,
            engine=engine,
            model_version="6e742170d309",
            device=device,
            sample_rate=24000,
            voices=("jf_alpha",),
            languages=("en-us",),
            started_at=T0,
        ),
    )


def heartbeat(
    worker_id: str = "w-test",
    seconds: int = 0,
    segments_done: int = 0,
    *,
    sent: datetime | None = None,
    claims: tuple[HeldClaim, ...] = (),
    queue: tuple[QueuedJob, ...] = (),
    queue_counts: tuple[QueueCount, ...] = (),
    chars_per_s: float | None = None,
) -> NodeHeartbeat:
    """A worker's heartbeat sent ``seconds`` after T0 (or at ``sent``); version 2's claims and queue if given."""
    sent = sent or T0 + timedelta(seconds=seconds)
    payload = NodeHeartbeatPayload(
        worker_id=worker_id, engine="kokoro-onnx", model_version="6e742170d309", device="cpu",
        started_at=min(T0, sent), sent_at=sent, segments_done=segments_done, claims=claims, queue=queue,
        queue_counts=queue_counts, chars_per_s=chars_per_s,
    )  # fmt: skip
    return NodeHeartbeat(event_id=uuid.uuid4(), occurred_at=sent, producer=PRODUCER, payload=payload)


def mode_set(enabled: bool, seconds: int = 0, reason: str = "", mode: ServiceMode = "cache_only") -> ServiceModeSet:
    """The operator's switch of ``mode`` (cache-only unless told)."""
    payload = ServiceModeSetPayload(mode=mode, enabled=enabled, source="operator", reason=reason)
    return ServiceModeSet(
        event_id=uuid.uuid4(), occurred_at=T0 + timedelta(seconds=seconds), producer=PRODUCER, payload=payload
    )


def late_work_of_a_dead_attempt(events: list[JobEvent], job_id: uuid.UUID, index: int) -> list[JobEvent]:
    """What attempt 1 of ``job_id`` sends when it comes back after being taken over (a worker cut off by a
    network partition): its segment ``index``, its completion, and its claim once more (a producer's retry)."""
    claim = next(e for e in events if isinstance(e, JobClaimed) and e.job_id == job_id and e.attempt == 1)
    segment = next(e for e in events if isinstance(e, SegmentProduced) and e.job_id == job_id and e.attempt == 1)
    late_segment = segment.model_copy(
        update={
            "event_id": derive_event_id(job_id, "SegmentProduced", 1, index),
            "payload": segment.payload.model_copy(update={"index": index}),
        }
    )
    completion = JobCompleted(
        event_id=derive_event_id(job_id, "JobCompleted", 1),
        job_id=job_id,
        fingerprint=segment.fingerprint,
        attempt=1,
        occurred_at=segment.occurred_at + timedelta(seconds=1),
        producer=segment.producer,
        payload=JobCompletedPayload(segment_count=index + 1, total_duration_ms=1),
    )
    return [late_segment, completion, claim]


def document_submitted(document_id: uuid.UUID, parts: int, title: str = "A book") -> DocumentSubmitted:
    """A document of one chapter of ``parts`` parts, each a paragraph."""
    payload = DocumentSubmittedPayload(
        document_id=document_id,
        title=title,
        markup="markdown",
        chapters=(DocumentChapter(title=title, parts=parts),),
        breaks="p" * (parts - 1) + "c",
        total_chars=10 * parts,
        request=request(title),
        priority="batch",
        submitted_at=T0,
    )
    return node_event(
        DocumentSubmitted, PRODUCER, payload, event_id=derive_event_id(document_id, "DocumentSubmitted", 0)
    )


def key_issued(
    key_id: str = "0123456789ab", tenant: str = "acme", scopes: tuple[str, ...] = ("submit", "read")
) -> ApiKeyIssued:
    payload = ApiKeyIssuedPayload(
        key_id=key_id,
        tenant=tenant,
        scopes=scopes,
        name="test",
        secret_sha256="ab" * 32,
        issued_at=T0,  # type: ignore[arg-type]
    )
    return node_event(ApiKeyIssued, PRODUCER, payload, at=T0)


def key_revoked(key_id: str = "0123456789ab", tenant: str = "acme", at: datetime = T0) -> ApiKeyRevoked:
    payload = ApiKeyRevokedPayload(key_id=key_id, tenant=tenant, revoked_at=at, reason="rotated")
    return node_event(ApiKeyRevoked, PRODUCER, payload, at=at)


def segments_recorded(events: list[JobEvent]) -> list[SegmentProduced]:
    """Every segment ``events`` record, as ``SegmentProduced`` events: those of their own, and the last of an
    attempt, which rides in its ``JobCompleted`` (version 3) and is read here as its own record would be."""
    found = []
    for event in events:
        segment = recorded_segment(event)
        if isinstance(event, SegmentProduced):
            found.append(event)
        elif segment is not None:
            found.append(
                SegmentProduced(
                    event_id=event.event_id,
                    occurred_at=event.occurred_at,
                    producer=event.producer,
                    job_id=event.job_id,
                    fingerprint=event.fingerprint,
                    attempt=event.attempt,
                    payload=segment,
                )
            )
    return found
