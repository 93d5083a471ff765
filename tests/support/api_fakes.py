"""The API in process, on fakes of its ports: a projection the test scripts, a log that records what it takes.

``api(...)`` builds the real app (every route, the real submission pipeline,
dependency injection and exception handlers) over these fakes, so a unit test
drives the HTTP layer as a client does, without Kafka or PostgreSQL.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from contracts import AudioRef, JobQueued, JobState, Producer, SynthesisRequest
from foundation.errors import PublishUnconfirmed
from foundation.offload import Budget, Offload
from producers.admission import Admission
from producers.app import create_app
from producers.deps import ApiDeps
from producers.document_parsing import DocumentBudget, DocumentParser
from producers.ports import Polling
from producers.requests import Limits
from producers.submission import Submissions
from producers.submission_log import SubmissionLog
from projections.reads.backlog import Backlog
from projections.reads.queue_place import QueueRow
from projections.reads.rows import EngineVoices, JobRecord, JobStateRow, LiveResult, SegmentRow, UsageRow

ENGINES = [EngineVoices("kokoro-onnx", "m1", 24000, ("af_heart", "jf_alpha"), ("en-us",), 1)]
LIMITS = Limits(1000, 0.5, 2.0, "kokoro-onnx", max_batch=10)
DOCUMENTS = DocumentBudget(
    max_bytes=2**20, max_chars=20_000, part_chars=200, max_parts=1000, max_chapters=100, max_unpacked_bytes=2**20
)
OFFLOADED = ("foundation.offload", "producers.document_parsing", "producers.requests", "tests.support.offloaded")
OFFLOAD = Offload(Budget(cpu_s=20, memory_bytes=1024 * 2**20), processes=2, preload=OFFLOADED)
"""One for every test: a process per call, forked from one fork server started on first use."""
PRODUCER = Producer(service="api", instance="test")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def ref(name: str) -> AudioRef:
    sha = hashlib.sha256(name.encode()).hexdigest()
    return AudioRef(sha256=sha, uri=f"file:///blobs/{sha}.wav")


def segment(index: int, uri: str | None = None, duration_ms: int = 100) -> SegmentRow:
    return SegmentRow(
        segment_index=index,
        audio_sha256="ab" * 32,
        audio_uri=uri or f"mem://{index}",
        duration_ms=duration_ms,
        attempt=1,
        span_start=0,
        span_end=1,
        span_text="x",
        sample_rate=24000,
        byte_length=44,
        produced_at=T0,
        reused=False,
    )


def job_row(
    event: JobQueued, state: JobState = JobState.QUEUED, segments: Sequence[SegmentRow] = (), **changes: Any
) -> JobRecord:
    """The projection's row of the job ``event`` queued, in ``state``."""
    values: dict[str, Any] = {
        "job_id": event.job_id,
        "fingerprint": event.fingerprint,
        "state": state,
        "attempt": 0,
        "request": event.payload.request,
        "idempotency_key": event.payload.idempotency_key,
        "tenant": event.payload.tenant,
        "degraded_from": event.payload.degraded_from,
        "worker_id": None,
        "cache_hit": False,
        "source_job_id": None,
        "segment_count": None,
        "total_duration_ms": None,
        "release_reason": None,
        "not_before": None,
        "error_code": None,
        "error_message": None,
        "submitted_at": event.payload.submitted_at,
        "claimed_at": None,
        "completed_at": None,
        "failed_at": None,
        "cancelled_at": None,
        "cancel_reason": None,
        "segments": tuple(segments),
    }
    return JobRecord(**{**values, **changes})


def request_of(text: str, voice: str = "af_heart") -> SynthesisRequest:
    return SynthesisRequest(
        text=text, voice=voice, speed=1.0, lang="en-us", engine="kokoro-onnx", model_version="m1", format="wav",
        sample_rate=24000,
    )  # fmt: skip


_EMPTY_JOB: dict[str, Any] = {
    "fingerprint": "ab" * 32, "attempt": 1, "request": request_of("Scripted."), "idempotency_key": None,
    "worker_id": None, "cache_hit": False, "source_job_id": None, "segment_count": None, "total_duration_ms": None,
    "release_reason": None, "not_before": None, "submitted_at": T0, "claimed_at": None, "completed_at": None,
    "failed_at": None, "cancelled_at": None, "cancel_reason": None,
}  # fmt: skip


class Reader:
    """The projection, as the test says it is: jobs by id, live results by fingerprint; ``down`` raises it.

    ``script``, when set, is what successive ``progress`` reads return (the last repeats): a stream's view."""

    def __init__(self, down: Exception | None = None) -> None:
        self.down = down
        self.jobs: dict[uuid.UUID, JobRecord] = {}
        self.cached: dict[str, LiveResult] = {}
        self.placements: dict[str, int] = {}  # by fingerprint, as cached_results_placed upserts them
        self.placed_lookups = 0
        self.key_reads = 0  # jobs_by_keys calls: a round trip of their own
        self.script: list[tuple[JobStateRow | None, list[SegmentRow]] | Exception] = []
        self.progress_reads: list[int] = []
        self.usage_rows: list[UsageRow] = []
        self.modes: dict[str, list[tuple[str, str]]] = {}  # by service mode, the switches holding it on
        self.flying: set[str] = set()  # fingerprints of live jobs
        self.places: dict[uuid.UUID, QueueRow] = {}  # queued jobs' places, as workers' heartbeats list them
        self.place_reads: list[uuid.UUID] = []

    def _raise_if_down(self) -> None:
        if self.down is not None:
            raise self.down

    def project(self, event: JobQueued, state: JobState = JobState.QUEUED, **changes: Any) -> JobRecord:
        row = self.jobs[event.job_id] = job_row(event, state, **changes)
        return row

    async def engines(self) -> list[EngineVoices]:
        return ENGINES

    async def ping(self) -> None:
        self._raise_if_down()

    async def job(self, job_id: uuid.UUID, tenant: str | None = None) -> JobRecord | None:
        """The job as projected (``tenant``'s only, when given); a scripted job (``script``) as its last read says."""
        self._raise_if_down()
        if job_id in self.jobs or not self.script:
            found = self.jobs.get(job_id)
            if found is None or (tenant is not None and found.tenant != tenant):
                return None
            source = self.jobs.get(found.source_job_id) if found.source_job_id is not None else None
            if found.source_job_id is not None and (source is None or source.tenant != found.tenant):
                found = msgspec.structs.replace(found, source_job_id=None)  # as ProjectionReader.job: not another's
            return found
        last = self.script[-1]
        if isinstance(last, Exception):
            raise last
        state, segments = last
        if state is None:
            return None
        return JobRecord(
            **{**_EMPTY_JOB, "job_id": job_id, "state": state.state, "error_code": state.error_code,
               "error_message": state.error_message, "segments": tuple(segments)}
        )  # fmt: skip

    async def queue_listing(self, job_id: uuid.UUID) -> QueueRow | None:
        self._raise_if_down()
        self.place_reads.append(job_id)
        return self.places.get(job_id)

    async def jobs_by_keys(self, keys: list[str]) -> dict[str, JobRecord]:
        self._raise_if_down()
        self.key_reads += 1
        found: dict[str, JobRecord] = {}
        for job in sorted(self.jobs.values(), key=lambda j: j.submitted_at):
            if job.idempotency_key in keys:
                found.setdefault(job.idempotency_key, job)
        return found

    async def jobs_by_ids(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, JobRecord]:
        self._raise_if_down()
        return {job_id: job for job_id, job in self.jobs.items() if job_id in job_ids}

    async def cached_results(self, fingerprints: list[str]) -> dict[str, LiveResult]:
        self._raise_if_down()
        return {fp: found for fp, found in self.cached.items() if fp in fingerprints}

    async def cached_results_placed(
        self, fingerprints: list[str], proposed: list[int], ttl_s: float, partitions: int, keys: list[str] | None = None
    ) -> tuple[dict[str, LiveResult], dict[str, int], dict[str, JobRecord]]:
        """The lookup with the placements' upsert and the keys' jobs: a fingerprint placed before keeps its
        partition (one round trip, counted)."""
        self._raise_if_down()
        self.placed_lookups += 1
        for fingerprint, partition in zip(fingerprints, proposed, strict=True):
            self.placements.setdefault(fingerprint, partition)
        known: dict[str, JobRecord] = {}
        for job in sorted(self.jobs.values(), key=lambda j: j.submitted_at):
            if job.idempotency_key in (keys or ()):
                known.setdefault(job.idempotency_key, job)
        placed = {fp: self.placements[fp] for fp in fingerprints}
        return await self.cached_results(fingerprints), placed, known

    async def progress(self, job_id: uuid.UUID, since: int) -> tuple[JobStateRow | None, list[SegmentRow]]:
        self.progress_reads.append(since)
        entry = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(entry, Exception):
            raise entry
        state, segments = entry
        return state, [s for s in segments if s.segment_index >= since]

    async def partitions_of(self, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, int]:
        return {}

    async def wanted_elsewhere(self, fingerprint: str, job_id: uuid.UUID) -> bool:
        return False

    async def in_flight(self, fingerprints: list[str]) -> set[str]:
        self._raise_if_down()
        return self.flying & set(fingerprints)

    async def backlog(self) -> Backlog:
        self._raise_if_down()
        return Backlog(syntheses=0, chars=0, chars_per_s=None)

    async def modes_on(self) -> dict[str, list[tuple[str, str]]]:
        self._raise_if_down()
        return self.modes

    async def usage(self, tenant: str | None, since: Any, until: Any = None) -> list[UsageRow]:
        self._raise_if_down()
        return [
            row
            for row in self.usage_rows
            if (tenant is None or row.tenant == tenant) and row.day >= since and (until is None or row.day <= until)
        ]


def progress(state: JobState, *segments: SegmentRow, error: str | None = None, code: str | None = None) -> Any:
    """One scripted read of a stream: the job's state and every segment it has so far."""
    return JobStateRow(state=state, source_job_id=None, error_code=code, error_message=error), list(segments)


class Blobs:
    """The blob store: every blob is there but those named ``gone``; ``touched`` lists what was marked used."""

    def __init__(self, gone: set[str] | None = None) -> None:
        self.gone = gone or set()
        self.touched: list[str] = []

    def touch(self, refs: list[AudioRef]) -> bool:
        if any(r.sha256 in self.gone for r in refs):
            return False
        self.touched += [r.sha256 for r in refs]
        return True


class Log:
    """The jobs (and documents) log: records what it takes; after ``takes`` events it fails the way an
    unconfirmed publish does."""

    def __init__(self, takes: int | None = None) -> None:
        self.takes = takes
        self.published: list[Any] = []
        self.partitions: list[int | None] = []

    def _take(self, events: Sequence[Any], partitions: Sequence[int | None] | None) -> None:
        room = None if self.takes is None else self.takes - len(self.published)
        if room is not None and len(events) > room:
            self.published.extend(events[: max(room, 0)])
            raise PublishUnconfirmed("Kafka did not acknowledge all records in time")
        self.published.extend(events)
        self.partitions.extend(partitions or [None] * len(events))

    async def publish_all(self, events: Sequence[Any], partitions: Sequence[int | None] | None = None) -> None:
        self._take(events, partitions)

    async def publish(self, event: Any, partition: int | None = None) -> None:
        self._take([event], [partition])

    async def check(self) -> None:
        return None

    async def partition_count(self) -> int:
        return 24


class Documents:
    async def document_by_key(self, key: str) -> None:
        return None


def live(job_id: uuid.UUID, segments: int = 1) -> LiveResult:
    """A live result of ``segments`` segments of 100 ms, its blob named after its job."""
    return LiveResult(job_id=job_id, refs=(ref(str(job_id)),), segment_count=segments, total_duration_ms=100 * segments)


def deps(
    reader: Reader,
    log: Log | None = None,
    *,
    blobs: Any = None,
    limits: Limits = LIMITS,
    admission: Admission | None = None,
    placement: Any = None,
    documents: Any = None,
    document_budget: DocumentBudget = DOCUMENTS,
    offload: Offload = OFFLOAD,
    **fields: Any,
) -> ApiDeps:
    log = log if log is not None else Log()
    blobs = blobs if blobs is not None else Blobs()
    submissions = Submissions(
        reader,  # type: ignore[arg-type]
        SubmissionLog(log, limits.max_record_bytes, placement, document_log=log),
        blobs,
        limits,
        PRODUCER,
        admission=admission,
        cache_scope=fields.pop("cache_scope", "shared"),
        offload=offload,
        quotas=fields.pop("quotas", None),
        degraded=fields.pop("degraded", None),
        lexicon=fields.pop("lexicon", None),
        drafts=fields.pop("drafts", None),
    )
    return ApiDeps(
        reader=reader,  # type: ignore[arg-type]
        submissions=submissions,
        publisher=log,
        blobs=blobs,
        limits=limits,
        producer=PRODUCER,
        audit=fields.pop("audit", None),  # type: ignore[arg-type]
        lag=fields.pop("lag", None),  # type: ignore[arg-type]
        changes=fields.pop("changes", Polling(0.0)),
        documents=documents if documents is not None else Documents(),
        document_parser=DocumentParser(offload, document_budget),
        **fields,
    )


def client(api_deps: ApiDeps) -> httpx.AsyncClient:
    """An HTTP client of the app built on ``api_deps`` (use it as ``async with``)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(api_deps)), base_url="http://api")
