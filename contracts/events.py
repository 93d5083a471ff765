"""Job events: the facts voxlog records on Kafka.

Every event is an immutable envelope (``event_id``, ``type``,
``schema_version``, ``job_id``, ``fingerprint``, ``attempt``, ``occurred_at``,
``producer``) around a typed ``payload``. ``type`` is a literal, so
:data:`JobEvent` is a discriminated union that decodes straight to the right
class. A change to a payload's shape bumps that event's ``schema_version`` and
adds an upcaster in :mod:`contracts.upcasting`, so old logs still replay.

``attempt`` lives in the envelope only: 0 for ``JobQueued``, cache hits,
``CacheEvicted`` and ``JobCancelled``, 1 for the first claim, +1 for each claim after a release.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Final, Literal, TypeVar, get_args

from pydantic import AwareDatetime, BaseModel, Field, TypeAdapter, field_validator

from contracts.fingerprint import fingerprint as compute_fingerprint
from contracts.scheduling import MAX_QUEUE_SHOWN, HeldClaim, QueueCount, QueuedJob, WaitedBehind
from contracts.vocabulary import DEFAULT_TENANT, NonNegative, Priority, Sha256Hex, Tenant
from contracts.vocabulary import Frozen as _Frozen

# Namespace for deterministic event ids (uuid5), so that a retried emission of
# the same fact gets the same id and projections apply it once.
EVENT_NAMESPACE: Final = uuid.UUID("6c1d3a52-63c1-4d2b-9a7e-0f5f8f0b7a11")


class Producer(_Frozen):
    """Which process emitted an event."""

    service: Annotated[str, Field(min_length=1, max_length=64)]
    instance: Annotated[str, Field(min_length=1, max_length=128)]


class SynthesisRequest(_Frozen):
    """The normalized request: every field that determines the audio."""

    text: Annotated[str, Field(min_length=1)]
    voice: Annotated[str, Field(min_length=1, max_length=256)]
    speed: Annotated[float, Field(gt=0)]
    lang: Annotated[str, Field(min_length=1, max_length=16)]
    engine: Annotated[str, Field(min_length=1, max_length=64)]
    model_version: Annotated[str, Field(min_length=1, max_length=128)]
    format: Annotated[str, Field(min_length=1, max_length=16)]
    sample_rate: Annotated[int, Field(gt=0)]
    # Whether numbers, dates, units, ... are spelled out before G2P (the rules' version is part of the
    # engine's model_version). Added in JobQueued version 2; version 1 requests upcast to True.
    normalize: bool = True
    # Whose cache the audio belongs to: None, shared by every tenant (VOXLOG_CACHE_SCOPE=shared); a tenant,
    # that tenant's alone (=tenant). Part of the fingerprint only when set. Added in JobQueued version 3.
    cache_scope: Annotated[str | None, Field(max_length=64)] = None
    # How ``text`` is read: "text", or "ssml" (the canonical SSML of contracts.ssml, which the worker parses
    # again). Part of the fingerprint only when "ssml". Added in JobQueued version 6; older requests are text.
    input_format: Literal["text", "ssml"] = "text"
    # Words said as given phonemes (contracts.pronunciations): word (casefolded) -> Kokoro phonemes, for the
    # words the text says, the request's own and the server lexicon's, resolved by the API. Part of the
    # fingerprint only when not empty. Added in JobQueued version 7 (DocumentSubmitted 5); older have none.
    pronunciations: dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=500)]] = Field(
        default_factory=dict
    )

    @field_validator("pronunciations")
    @classmethod
    def _sorted(cls, value: dict[str, str]) -> dict[str, str]:
        return dict(sorted(value.items()))  # one spelling of the record for one map

    def fingerprint(self) -> str:
        """The request's fingerprint (see :mod:`contracts.fingerprint`)."""
        return compute_fingerprint(
            text=self.text,
            voice=self.voice,
            speed=self.speed,
            lang=self.lang,
            engine=self.engine,
            model_version=self.model_version,
            audio_format=self.format,
            sample_rate=self.sample_rate,
            normalize=self.normalize,
            cache_scope=self.cache_scope,
            input_format=self.input_format,
            pronunciations=self.pronunciations,
        )


class DegradedFrom(_Frozen):
    """What degraded mode changed in a job's request (``JobQueued`` version 5): the speed and sample rate the
    client asked for (the request recorded is the degraded one, so the fingerprint is the audio's), and why
    (the switches that held the mode on)."""

    speed: Annotated[float, Field(gt=0)]
    sample_rate: Annotated[int, Field(gt=0)]
    reason: Annotated[str, Field(max_length=1100)] = ""

    def requested(self, request: SynthesisRequest) -> SynthesisRequest:
        """``request`` (the degraded one) as the client asked for it."""
        return request.model_copy(update={"speed": self.speed, "sample_rate": self.sample_rate})


class JobQueuedPayload(_Frozen):
    """``priority`` (version 2): workers take interactive jobs first, and one batch job after every few
    interactive ones so that batch work never starves. Not part of the fingerprint: it changes when a
    job is synthesized, not what it sounds like. ``tenant`` and ``key_id`` (version 3): who owns the job,
    and the API key it was submitted with (its public prefix; ``None`` while auth is off). ``traceparent``
    (version 4): the W3C trace context of the request that submitted it, the trace every later event of
    the job continues (:mod:`contracts.trace_context`; ``None`` in a job recorded before version 4).
    ``degraded_from`` (version 5): set when degraded mode rewrote the request (a faster speed, a lower sample
    rate) before it was fingerprinted; ``None``: the job is at the quality its client asked for.
    ``document_id`` (version 8): the document the job is a part of (its webhook outcome and its document's are
    decided from it); ``None`` for a job of its own, and in a part recorded before version 8."""

    request: SynthesisRequest
    idempotency_key: Annotated[str | None, Field(max_length=256)] = None
    submitted_at: AwareDatetime
    priority: Priority = "interactive"
    tenant: Tenant = DEFAULT_TENANT
    key_id: Annotated[str | None, Field(max_length=64)] = None
    traceparent: Annotated[str | None, Field(pattern=r"^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")] = None
    degraded_from: DegradedFrom | None = None
    document_id: uuid.UUID | None = None


class JobClaimedPayload(_Frozen):
    """Version 2 added ``host``, the machine the worker runs on (audits name it beside the worker id, which
    an operator may set to anything); ``None`` in a claim recorded before version 2."""

    worker_id: Annotated[str, Field(min_length=1)]
    device: Annotated[str, Field(min_length=1)]
    engine: Annotated[str, Field(min_length=1)]
    model_version: Annotated[str, Field(min_length=1)]
    host: Annotated[str | None, Field(min_length=1, max_length=255)]
    waited: WaitedBehind | None = None
    """Version 3: what the job waited behind on this worker before its claim (:mod:`contracts.scheduling`);
    ``None`` when it waited behind nothing, or in a claim recorded before version 3."""


class TextSpan(_Frozen):
    """Characters ``[start, end)`` of the normalized request text."""

    start: NonNegative
    end: NonNegative
    text: str


class AudioRef(_Frozen):
    """Where a segment's audio lives in the content-addressed blob store."""

    sha256: Sha256Hex
    uri: Annotated[str, Field(min_length=1)]


class WordTiming(_Frozen):
    """A caption entry: characters ``[start, end)`` of the request text as written (a word, or a written
    form said as several words: "2.5 kg"), said from ``start_ms`` to ``end_ms`` of its segment's audio."""

    start: NonNegative
    end: NonNegative
    start_ms: NonNegative
    end_ms: NonNegative


class SegmentProducedPayload(_Frozen):
    """Version 2 added ``segment_key`` (what makes this segment's audio: see
    :func:`contracts.fingerprint.segment_key`; ``None`` when not known) and ``reused`` (the audio is an
    earlier segment's of the same key, not a new synthesis). Version 3 added ``words``: when each word
    is said, from the model's predicted durations (``None``: the engine could not tell, or an older
    segment)."""

    index: NonNegative
    span: TextSpan
    audio: AudioRef
    duration_ms: NonNegative
    sample_rate: Annotated[int, Field(gt=0)]
    byte_length: NonNegative
    segment_key: Sha256Hex | None = None
    reused: bool = False
    words: tuple[WordTiming, ...] | None = None


class JobCompletedPayload(_Frozen):
    segment_count: NonNegative
    total_duration_ms: NonNegative
    cache_hit: bool = False
    source_job_id: uuid.UUID | None = None
    waited: WaitedBehind | None = None
    """Version 2: the other jobs whose segments the worker made between this job's claim and its completion
    (:mod:`contracts.scheduling`); ``None`` when none did, or in a completion recorded before version 2."""
    segment: SegmentProducedPayload | None = None
    """Version 3: the attempt's last segment, recorded with its completion: one record where there were two
    (a one-sentence job is its claim and its completion). ``None`` in a completion from the cache, and in
    one recorded before version 3, whose last segment is a ``SegmentProduced`` of its own."""


ReleaseReason = Literal["transient", "shutdown", "rebalance", "stale"]


class JobReleasedPayload(_Frozen):
    reason: ReleaseReason
    failed_attempt: NonNegative
    not_before: AwareDatetime | None = None
    message: Annotated[str, Field(max_length=2000)] = ""


class JobFailedPayload(_Frozen):
    reason_code: Annotated[str, Field(min_length=1, max_length=64)]
    message: Annotated[str, Field(max_length=2000)]
    attempts: NonNegative


EvictionReason = Literal["expired", "capacity", "purge"]


class CacheEvictedPayload(_Frozen):
    """Why a completed job's result stopped answering duplicates: its TTL passed (``expired``), the blob
    store needed the room (``capacity``, least recently used first) or an operator purged it (``purge``).

    Eviction ends reuse, not the jobs: every job keeps its audio for ``VOXLOG_JOB_RETENTION_S`` after its
    completion or last reuse, and the blobs go only when nothing keeps them any more."""

    reason: EvictionReason
    total_bytes: NonNegative  # what the entry held, as the janitor saw it


CancelReason = Literal["client", "document", "disconnected"]


class JobCancelledPayload(_Frozen):
    """Nobody wants the job's audio any more: its client cancelled it (``client``, ``DELETE /v1/jobs/{id}``),
    its document was cancelled (``document``, with ``document_id``), or its streaming client went away
    (``disconnected``). A queued job is then never synthesized and a running one stops at its next segment
    boundary, unless a live duplicate of the same fingerprint still waits for the result: the worker then
    finishes the synthesis for that duplicate (see :mod:`consumers.cancellation`)."""

    reason: CancelReason
    message: Annotated[str, Field(max_length=2000)] = ""
    document_id: uuid.UUID | None = None


class _Record(_Frozen):
    """What every record says besides its type, version and payload: the base of both topics' events."""

    event_id: uuid.UUID
    occurred_at: AwareDatetime
    producer: Producer


class _Envelope(_Record):
    """A job event's record: which job, of which request, in which attempt."""

    job_id: uuid.UUID
    fingerprint: Sha256Hex
    attempt: NonNegative


class JobQueued(_Envelope):
    """Version 2 added ``request.normalize`` (spell out numbers, dates, ... before G2P) and ``priority``;
    version 3 ``tenant``, ``key_id`` and ``request.cache_scope``; version 4 ``traceparent``; version 5
    ``degraded_from``; version 6 ``request.input_format`` (SSML); version 7 ``request.pronunciations``;
    version 8 ``document_id``."""

    type: Literal["JobQueued"] = "JobQueued"
    schema_version: Literal[8] = 8
    payload: JobQueuedPayload


class JobClaimed(_Envelope):
    type: Literal["JobClaimed"] = "JobClaimed"
    schema_version: Literal[3] = 3
    payload: JobClaimedPayload


class SegmentProduced(_Envelope):
    type: Literal["SegmentProduced"] = "SegmentProduced"
    schema_version: Literal[3] = 3
    payload: SegmentProducedPayload


class JobCompleted(_Envelope):
    """Version 2 added ``waited``; version 3 ``segment``, the attempt's last segment."""

    type: Literal["JobCompleted"] = "JobCompleted"
    schema_version: Literal[3] = 3
    payload: JobCompletedPayload


class JobReleased(_Envelope):
    type: Literal["JobReleased"] = "JobReleased"
    schema_version: Literal[1] = 1
    payload: JobReleasedPayload


class JobFailed(_Envelope):
    type: Literal["JobFailed"] = "JobFailed"
    schema_version: Literal[1] = 1
    payload: JobFailedPayload


class CacheEvicted(_Envelope):
    """A completed job's result leaves the result cache (the job itself stays completed)."""

    type: Literal["CacheEvicted"] = "CacheEvicted"
    schema_version: Literal[1] = 1
    payload: CacheEvictedPayload


class JobCancelled(_Envelope):
    """A live job is cancelled: it ends, without audio (attempt 0: a cancellation is not an attempt's)."""

    type: Literal["JobCancelled"] = "JobCancelled"
    schema_version: Literal[1] = 1
    payload: JobCancelledPayload


class NodeAnnouncedPayload(_Frozen):
    worker_id: Annotated[str, Field(min_length=1, max_length=128)]
    engine: Annotated[str, Field(min_length=1, max_length=64)]
    model_version: Annotated[str, Field(min_length=1, max_length=128)]
    device: Annotated[str, Field(min_length=1, max_length=32)]
    sample_rate: Annotated[int, Field(gt=0)]
    voices: tuple[str, ...]
    languages: tuple[str, ...]
    started_at: AwareDatetime


class NodeAnnounced(_Record):
    """A worker's engine, model version and voices; on the compacted control topic, key = worker id."""

    type: Literal["NodeAnnounced"] = "NodeAnnounced"
    schema_version: Literal[1] = 1
    payload: NodeAnnouncedPayload


class NodeHeartbeatPayload(_Frozen):
    """A worker's pulse: alive, and what it is doing. ``progress_at`` is when the current attempt last
    advanced (its claim, or a segment); the sweeper compares it with the job's expected time."""

    worker_id: Annotated[str, Field(min_length=1, max_length=128)]
    engine: Annotated[str, Field(min_length=1, max_length=64)]
    model_version: Annotated[str, Field(min_length=1, max_length=128)]
    device: Annotated[str, Field(min_length=1, max_length=32)]
    started_at: AwareDatetime  # when this worker process started (a restart changes it)
    sent_at: AwareDatetime
    job_id: uuid.UUID | None = None
    fingerprint: Sha256Hex | None = None
    attempt: NonNegative | None = None
    segments_done: NonNegative = 0
    segments_total: NonNegative | None = None
    text_chars: NonNegative | None = None
    progress_at: AwareDatetime | None = None
    chars_per_s: Annotated[float, Field(gt=0)] | None = None  # this node's measured speed, once it has one
    busy_s: Annotated[float, Field(ge=0)] = 0.0  # engine time since start, for a busy fraction
    claims: Annotated[tuple[HeldClaim, ...], Field(max_length=256)] = ()
    """Version 2: every claim the worker holds (the fields above describe the one running, if any)."""
    queue: Annotated[tuple[QueuedJob, ...], Field(max_length=MAX_QUEUE_SHOWN)] = ()
    """Version 2: the first of the jobs waiting on the worker, in the order it would take them now."""
    queue_counts: tuple[QueueCount, ...] = ()
    """Version 2: every job waiting on the worker, counted by tenant and priority."""


class NodeHeartbeat(_Record):
    """Sent every few seconds by each worker; on the compacted control topic, key = ``heartbeat/<worker id>``."""

    type: Literal["NodeHeartbeat"] = "NodeHeartbeat"
    schema_version: Literal[2] = 2
    payload: NodeHeartbeatPayload


ModeSource = Literal["operator", "backlog"]
ServiceMode = Literal["cache_only", "degraded"]
"""``cache_only``: while any source holds it on, the API answers what the cache (or a job already in flight)
can answer and refuses new syntheses. ``degraded`` (version 2): new syntheses are made at the API's degraded
settings (a faster speed, a lower sample rate) instead of being refused."""


class ServiceModeSetPayload(_Frozen):
    """A service mode switched on or off by one source. An operator's switch and the backlog's (the
    sweeper's, past ``VOXLOG_CACHE_ONLY_BACKLOG_S`` or ``VOXLOG_DEGRADE_BACKLOG_S``) are separate records,
    and either one holds the mode on."""

    mode: ServiceMode
    enabled: bool
    source: ModeSource
    reason: Annotated[str, Field(max_length=500)] = ""


class ServiceModeSet(_Record):
    """On the compacted control topic, key = ``mode/<mode>/<source>``: the latest switch of each source. Version 2
    may name the mode ``degraded``; a version-1 record (cache-only, as every one was) reads as it is."""

    type: Literal["ServiceModeSet"] = "ServiceModeSet"
    schema_version: Literal[2] = 2
    payload: ServiceModeSetPayload


Scope = Literal["submit", "read", "admin", "operator"]
"""What an API key may do: submit jobs and documents; read its tenant's jobs, documents and usage; administer
(the lexicon, cache-only mode, cache purges, every tenant's usage); operate (the dashboard, consumer lag)."""
KeyId = Annotated[str, Field(pattern=r"^[0-9a-f]{12}$")]


class ApiKeyIssuedPayload(_Frozen):
    """A key's public part and what it may do; the secret is never recorded, only its sha256."""

    key_id: KeyId
    tenant: Tenant
    scopes: tuple[Scope, ...]
    name: Annotated[str, Field(max_length=200)] = ""
    secret_sha256: Sha256Hex
    issued_at: AwareDatetime
    expires_at: AwareDatetime | None = None


class ApiKeyIssued(_Record):
    """On the compacted control topic, key = ``key/<key_id>``: an API key, issued by ``voxlog keys create``."""

    type: Literal["ApiKeyIssued"] = "ApiKeyIssued"
    schema_version: Literal[1] = 1
    payload: ApiKeyIssuedPayload


class ApiKeyRevokedPayload(_Frozen):
    key_id: KeyId
    tenant: Tenant
    revoked_at: AwareDatetime
    reason: Annotated[str, Field(max_length=500)] = ""


class ApiKeyRevoked(_Record):
    """Same key as the issue (``key/<key_id>``), so compaction keeps the revocation: a key revoked stays
    revoked, whatever the topic forgot."""

    type: Literal["ApiKeyRevoked"] = "ApiKeyRevoked"
    schema_version: Literal[1] = 1
    payload: ApiKeyRevokedPayload


LexiconWord = Annotated[str, Field(min_length=1, max_length=64)]
"""A word of the lexicon, casefolded (:func:`contracts.pronunciations.checked_word`)."""


class LexiconEntrySetPayload(_Frozen):
    """A word of the server's lexicon and the phonemes every request that says it is said with (unless the
    request gives its own), and why or by whom."""

    word: LexiconWord
    phonemes: Annotated[str, Field(min_length=1, max_length=500)]
    reason: Annotated[str, Field(max_length=500)] = ""


class LexiconEntrySet(_Record):
    """On the compacted control topic, key = ``lexicon/<word>``: compaction keeps each word's last word."""

    type: Literal["LexiconEntrySet"] = "LexiconEntrySet"
    schema_version: Literal[1] = 1
    payload: LexiconEntrySetPayload


class LexiconEntryRemovedPayload(_Frozen):
    word: LexiconWord
    reason: Annotated[str, Field(max_length=500)] = ""


class LexiconEntryRemoved(_Record):
    """Same key as the entry (``lexicon/<word>``): the word leaves the lexicon, and requests say it by G2P."""

    type: Literal["LexiconEntryRemoved"] = "LexiconEntryRemoved"
    schema_version: Literal[1] = 1
    payload: LexiconEntryRemovedPayload


WebhookEventType = Literal["job.completed", "job.failed", "job.cancelled", "document.completed", "document.failed"]
"""The outcomes a webhook endpoint may ask to be told of."""
WEBHOOK_EVENT_TYPES: Final[tuple[WebhookEventType, ...]] = get_args(WebhookEventType)


class WebhookEndpointSetPayload(_Frozen):
    """A tenant's webhook endpoint as registered, or as changed (its secret rotated): where deliveries go and
    which outcomes it wants. The signing secret is never recorded: the API and the delivery process derive it
    from the server's ``VOXLOG_WEBHOOK_SIGNING_KEY``, the endpoint and ``secret_generation``; after a rotation
    the previous generation's secret signs too until ``previous_secret_until``, so receivers can switch."""

    endpoint_id: uuid.UUID
    tenant: Tenant
    url: Annotated[str, Field(min_length=1, max_length=2000)]
    event_types: Annotated[tuple[WebhookEventType, ...], Field(min_length=1, max_length=len(WEBHOOK_EVENT_TYPES))]
    description: Annotated[str, Field(max_length=200)] = ""
    secret_generation: Annotated[int, Field(ge=1)] = 1
    previous_secret_until: AwareDatetime | None = None
    created_at: AwareDatetime
    disabled_reason: Annotated[str, Field(max_length=500)] = ""
    """Set when the delivery process disabled it (no delivery succeeded for the retry window) and why: nothing
    is delivered to it until its tenant enables it again. Added without a new version: an older record, which
    has none, is an endpoint that is not disabled."""


class WebhookEndpointSet(_Record):
    """On the compacted control topic, key = ``webhook/<endpoint_id>``: an endpoint registered or changed."""

    type: Literal["WebhookEndpointSet"] = "WebhookEndpointSet"
    schema_version: Literal[1] = 1
    payload: WebhookEndpointSetPayload


class WebhookEndpointRemovedPayload(_Frozen):
    endpoint_id: uuid.UUID
    tenant: Tenant
    reason: Annotated[str, Field(max_length=500)] = ""


class WebhookEndpointRemoved(_Record):
    """Same key as the endpoint (``webhook/<endpoint_id>``), so compaction keeps the removal: an endpoint
    removed stays removed, and nothing is delivered to it again."""

    type: Literal["WebhookEndpointRemoved"] = "WebhookEndpointRemoved"
    schema_version: Literal[1] = 1
    payload: WebhookEndpointRemovedPayload


DeliveryState = Literal["pending", "delivered", "given_up"]
"""``pending``: due now or at ``next_attempt_at``; ``delivered``: an endpoint answered 2xx; ``given_up``: it did
not within the retry window, or its endpoint was removed or disabled."""


class WebhookDeliveryRecordedPayload(_Frozen):
    """A webhook delivery as it stands: made when an outcome is due to an endpoint, and recorded again, whole,
    after each attempt (compaction keeps the latest, and the latest is all a delivery needs)."""

    delivery_id: uuid.UUID  # its webhook-id: the same on every attempt, so receivers de-duplicate
    endpoint_id: uuid.UUID
    tenant: Tenant
    event_type: WebhookEventType
    job_id: uuid.UUID | None = None
    document_id: uuid.UUID | None = None
    body: Annotated[str, Field(min_length=2, max_length=16_000)]  # the JSON sent, the same on every attempt
    traceparent: Annotated[str, Field(max_length=55)] | None = None  # the job's trace, sent with each attempt
    created_at: AwareDatetime
    state: DeliveryState = "pending"
    attempts: Annotated[int, Field(ge=0)] = 0
    next_attempt_at: AwareDatetime | None = None
    last_status: Annotated[int, Field(ge=100, le=599)] | None = None
    last_error: Annotated[str, Field(max_length=500)] = ""
    last_duration_ms: Annotated[int, Field(ge=0)] | None = None


class WebhookDeliveryRecorded(_Record):
    """On the compacted control topic, key = ``delivery/<delivery_id>``: a delivery made, or after an attempt."""

    type: Literal["WebhookDeliveryRecorded"] = "WebhookDeliveryRecorded"
    schema_version: Literal[1] = 1
    payload: WebhookDeliveryRecordedPayload


Markup = Literal["markdown", "plain", "epub"]
PartBreak = Literal["s", "p", "b", "c"]


class DocumentChapter(_Frozen):
    """A chapter: its title and how many of the document's parts, in order, it holds."""

    title: Annotated[str, Field(max_length=500)]
    parts: Annotated[int, Field(gt=0)]


class DocumentSubmittedPayload(_Frozen):
    """A long text split into chapters and parts, each part its own job (queued before this record).

    The part jobs' ids are derived (:func:`document_part_job_id`), so the record names them without
    listing them. ``breaks`` has one letter per part, the pause a listener expects after it: ``s`` (the
    paragraph goes on in the next part), ``p`` (a paragraph ends), ``b`` (a scene break: a part with nothing
    to speak, such as ``* * *``, stood there; version 2), ``c`` (a chapter ends). ``request`` is
    the parts' common request (its ``text`` is the document's title)."""

    document_id: uuid.UUID
    title: Annotated[str, Field(max_length=500)]
    markup: Markup
    chapters: tuple[DocumentChapter, ...]
    breaks: Annotated[str, Field(pattern=r"^[spbc]+$")]
    total_chars: NonNegative
    request: SynthesisRequest
    priority: Priority = "batch"
    idempotency_key: Annotated[str | None, Field(max_length=256)] = None
    submitted_at: AwareDatetime
    tenant: Tenant = DEFAULT_TENANT  # version 3: who owns the document


class DocumentSubmitted(_Record):
    """On the compacted control topic, key = ``document/<id>``: a document's chapters and parts. Version 2 added
    the scene break ``b`` to ``breaks``, version 3 the ``tenant`` that owns it, version 4 its request's
    ``input_format`` (a document's is always ``"text"``), version 5 its request's ``pronunciations`` (the
    document's own, as its client gave them; each part's job records those its text says, with the
    lexicon's)."""

    type: Literal["DocumentSubmitted"] = "DocumentSubmitted"
    schema_version: Literal[5] = 5
    payload: DocumentSubmittedPayload


DOCUMENT_NAMESPACE: Final = uuid.UUID("3f0b6a8e-2c4d-4b7a-9e15-8d2f6c1a0b57")


def document_part_job_id(document_id: uuid.UUID, index: int) -> uuid.UUID:
    """The job id of the document's part ``index`` (0-based, in reading order)."""
    return uuid.uuid5(DOCUMENT_NAMESPACE, f"{document_id}/{index}")


NodeEvent = Annotated[
    NodeAnnounced
    | NodeHeartbeat
    | ServiceModeSet
    | DocumentSubmitted
    | ApiKeyIssued
    | ApiKeyRevoked
    | LexiconEntrySet
    | LexiconEntryRemoved
    | WebhookEndpointSet
    | WebhookEndpointRemoved
    | WebhookDeliveryRecorded,
    Field(discriminator="type"),
]

JobEvent = Annotated[
    JobQueued | JobClaimed | SegmentProduced | JobCompleted | JobReleased | JobFailed | CacheEvicted | JobCancelled,
    Field(discriminator="type"),
]
JOB_EVENT_ADAPTER: Final[TypeAdapter[JobEvent]] = TypeAdapter(JobEvent)

EVENT_CLASSES: Final = (
    JobQueued,
    JobClaimed,
    SegmentProduced,
    JobCompleted,
    JobReleased,
    JobFailed,
    CacheEvicted,
    JobCancelled,
)
NODE_EVENT_ADAPTER: Final[TypeAdapter[NodeEvent]] = TypeAdapter(NodeEvent)
NODE_EVENT_CLASSES: Final = (
    NodeAnnounced,
    NodeHeartbeat,
    ServiceModeSet,
    DocumentSubmitted,
    ApiKeyIssued,
    ApiKeyRevoked,
    LexiconEntrySet,
    LexiconEntryRemoved,
    WebhookEndpointSet,
    WebhookEndpointRemoved,
    WebhookDeliveryRecorded,
)


def type_name(cls: type[BaseModel]) -> str:
    """The literal ``type`` of an event class (what the ``type`` header carries)."""
    name: str = cls.model_fields["type"].default
    return name


JOB_EVENT_TYPES: Final = frozenset(type_name(cls) for cls in EVENT_CLASSES)
CURRENT_SCHEMA_VERSIONS: Final[dict[str, int]] = {
    type_name(cls): cls.model_fields["schema_version"].default for cls in (*EVENT_CLASSES, *NODE_EVENT_CLASSES)
}


def recorded_segment(event: JobEvent) -> SegmentProducedPayload | None:
    """The segment a job's record carries: a ``SegmentProduced``'s, or the attempt's last segment in its
    ``JobCompleted`` (version 3); ``None`` for any other record."""
    if isinstance(event, SegmentProduced):
        return event.payload
    if isinstance(event, JobCompleted):
        return event.payload.segment
    return None


def derive_event_id(job_id: uuid.UUID, event_type: str, attempt: int, *parts: str | int) -> uuid.UUID:
    """A deterministic event id for a fact that a retry could emit twice.

    The same job, type, attempt and distinguishing parts (a segment index, say)
    always give the same id, so projections apply the fact once.
    """
    name = "/".join([str(job_id), event_type, str(attempt), *map(str, parts)])
    return uuid.uuid5(EVENT_NAMESPACE, name)


def utc_now() -> datetime:
    """The current time as an aware UTC datetime (the only clock events use)."""
    return datetime.now(UTC)


JobEventT = TypeVar("JobEventT", bound=_Envelope)
NodeEventT = TypeVar(
    "NodeEventT",
    NodeAnnounced,
    NodeHeartbeat,
    ServiceModeSet,
    DocumentSubmitted,
    ApiKeyIssued,
    ApiKeyRevoked,
    LexiconEntrySet,
    LexiconEntryRemoved,
    WebhookEndpointSet,
    WebhookEndpointRemoved,
    WebhookDeliveryRecorded,
)


def job_event(
    cls: type[JobEventT],
    job_id: uuid.UUID,
    fingerprint: str,
    attempt: int,
    producer: Producer,
    payload: BaseModel,
    *id_parts: str | int,
    at: datetime | None = None,
) -> JobEventT:
    """A job event in its envelope: its id derived from the job, its type, ``attempt`` and ``id_parts`` (a
    segment's index, say), so that emitting the same fact again gives the same id; ``at`` (default now) is
    when it occurred."""
    envelope: dict[str, object] = {
        "event_id": derive_event_id(job_id, type_name(cls), attempt, *id_parts),
        "job_id": job_id,
        "fingerprint": fingerprint,
        "attempt": attempt,
        "occurred_at": at or utc_now(),
        "producer": producer,
        "payload": payload,
    }
    return cls(**envelope)


def node_event(
    cls: type[NodeEventT],
    producer: Producer,
    payload: BaseModel,
    *,
    event_id: uuid.UUID | None = None,
    at: datetime | None = None,
) -> NodeEventT:
    """A node-topic event in its envelope; ``event_id`` when the fact has an identity of its own (a
    document's), else a fresh one (every heartbeat, announcement or switch is a new fact)."""
    return cls(event_id=event_id or uuid.uuid4(), occurred_at=at or utc_now(), producer=producer, payload=payload)
