"""The one way anything is submitted: validate, answer what is known, admit, place, publish, answer.

``POST /v1/jobs`` and ``/v1/audio/speech`` submit one request, ``/v1/batches``
many, ``/v1/documents`` a document's parts and the record that names them:
each is a :class:`Submission` of items, and :meth:`Submissions.submit` takes
every one of them through the same steps, so a rule added here holds for
every route:

1. **validate** every item (nothing is recorded unless all are valid: one bad
   request of many is a 422 listing each bad one by index);
2. **answer what is known**: an item whose idempotency key named a job before
   is answered with that job (409 if it named another request); an item whose
   audio is cached is answered with the cached job, once its blobs are marked
   used (a document's parts are always queued, as jobs of their own, and a
   worker completes a cached one at once);
3. **admit** what needs a synthesis (:mod:`producers.admission`: 429 over the
   backlog limit, 503 in cache-only mode);
4. **place** each new job in a partition (:mod:`producers.placement`);
5. **publish** the jobs, then the record that names them (a document), and
   return once the log acknowledged them (acks=all). A submission the log took
   in part, or could not confirm, is a 503 that names the idempotency key to
   retry with; the retry names the same jobs and document.

While PostgreSQL cannot be read, step 2 answers nothing from it and step 3
admits everything (the log is the write side): a retry still names the same
jobs, and workers coalesce duplicates.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import structlog

from contracts import (
    AudioRef,
    DocumentSubmitted,
    JobQueued,
    JobQueuedPayload,
    Priority,
    Producer,
    SynthesisRequest,
    job_event,
    utc_now,
)
from foundation.blobs import BlobStore
from foundation.errors import BrokerUnavailable, PublishUnconfirmed
from foundation.metrics import SUBMISSIONS
from producers.admission import Admission
from producers.errors import Rejected
from producers.idempotency import client_key, item_key, job_id_for
from producers.ports import DocumentLog, JobLog, OffLoop, Placement
from producers.queries import ProjectionReader, ProjectionUnavailable
from producers.requests import JobRequest, Limits, Refused, validate_all
from producers.rows import JobRow

log = structlog.get_logger("voxlog.api")


@dataclass(frozen=True)
class Item:
    """One request of a submission; ``job_id`` fixed (a document's part), else named by the key."""

    request: JobRequest
    priority: Priority
    job_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Submission:
    items: Sequence[Item]
    key: str
    """The scoped idempotency key (:mod:`producers.idempotency`): the client's, or a fresh one."""
    client_sent_key: bool
    """Whether the client sent ``key`` (only then can it have named jobs before)."""
    from_cache: bool = True
    """Answer an item whose audio is cached with the cached job (a document's parts: no, they are its own)."""
    record: Callable[[Sequence[SynthesisRequest]], DocumentSubmitted] | None = None
    """The record that names the items (a document), made from their validated requests."""


class Answer(StrEnum):
    QUEUED = "queued"  # a new job, on the log
    CACHED = "cached"  # a finished job whose audio is cached answers it
    KNOWN = "known"  # the idempotency key named this job before


@dataclass(frozen=True)
class Answered:
    """What became of one item."""

    index: int
    job_id: uuid.UUID
    fingerprint: str
    answer: Answer
    job: JobRow | None = None  # the cached or known job, as the projection shows it (no segments)


@dataclass(frozen=True)
class Submitted:
    answers: list[Answered]
    key: str
    requests: list[SynthesisRequest]

    @property
    def queued(self) -> int:
        return sum(1 for a in self.answers if a.answer is Answer.QUEUED)


@dataclass(frozen=True)
class InvalidItem:
    index: int
    status: int
    detail: str


class InvalidItems(Rejected):
    """Some items of a submission of several are invalid: nothing of it is recorded."""

    def __init__(self, invalid: list[InvalidItem], count: int) -> None:
        super().__init__(
            f"{len(invalid)} of {count} requests are invalid; nothing was submitted: fix them and send them again"
        )
        self.invalid = invalid


class Submissions:
    """The pipeline, with this API's projection, log, blobs, limits, admission and placement."""

    def __init__(
        self,
        reader: ProjectionReader,
        publisher: JobLog,
        blobs: BlobStore,
        limits: Limits,
        producer: Producer,
        *,
        admission: Admission | None = None,
        placement: Placement | None = None,
        document_log: DocumentLog | None = None,
        offload: OffLoop | None = None,
    ) -> None:
        self._reader = reader
        self._publisher = publisher
        self._blobs = blobs
        self.limits = limits
        self._producer = producer
        self._admission = admission
        self._placement = placement
        self._document_log = document_log
        self._offload = offload  # where large submissions are validated (producers.requests.validate_all)

    async def submit(self, submission: Submission) -> Submitted:
        requests = await self._validate(submission.items)
        keys = [self._key_of(submission, i) for i in range(len(requests))]
        fingerprints = [request.fingerprint() for request in requests]
        answered = await self._known(submission, keys, fingerprints)
        live = await self._live_results([fp for i, fp in enumerate(fingerprints) if i not in answered])
        if submission.from_cache:
            answered |= await self._cached(fingerprints, live, answered)
        events = [
            self._queued(requests[i], item, keys[i]) for i, item in enumerate(submission.items) if i not in answered
        ]
        await self._admit(events, live)
        record = submission.record(requests) if submission.record is not None else None
        await self._publish(events, record, submission)
        queued = iter(events)
        answers = [answered[i] if i in answered else _queued_answer(i, next(queued)) for i in range(len(requests))]
        for answer in answers:
            SUBMISSIONS.labels(answer.answer.value).inc()
        return Submitted(answers, submission.key, requests)

    async def _validate(self, items: Sequence[Item]) -> list[SynthesisRequest]:
        engines = await self._reader.engines()
        checked = await validate_all([item.request for item in items], self.limits, engines, self._offload)
        requests, invalid = [], []
        for index, outcome in enumerate(checked):
            if isinstance(outcome, Refused):
                if len(items) == 1 or outcome.status == 503:  # one request, or none can be taken: say it as it is
                    raise Rejected(outcome.detail, outcome.status)
                invalid.append(InvalidItem(index, outcome.status, outcome.detail))
            else:
                requests.append(outcome)
        if invalid:
            raise InvalidItems(invalid, len(items))
        return requests

    @staticmethod
    def _key_of(submission: Submission, index: int) -> str | None:
        """The key that names item ``index``'s job (``None``: its id is fixed, a document's part)."""
        if submission.items[index].job_id is not None:
            return None
        return submission.key if len(submission.items) == 1 else item_key(submission.key, index)

    async def _known(
        self, submission: Submission, keys: list[str | None], fingerprints: list[str]
    ) -> dict[int, Answered]:
        """The items whose key named a job before: that job answers them (409 if it was another request)."""
        named = {key: i for i, key in enumerate(keys) if key is not None}
        if not submission.client_sent_key or not named:
            return {}
        try:
            earlier = await self._reader.jobs_by_keys(list(named))
        except ProjectionUnavailable as exc:
            log.warning("submitting without the projection", error=str(exc))
            return {}
        answered = {}
        for key, job in earlier.items():
            index = named[key]
            if job.fingerprint != fingerprints[index]:
                raise Rejected(
                    "this Idempotency-Key was used for another request; send a new key with a new request", 409
                )
            answered[index] = Answered(index, job.job_id, job.fingerprint, Answer.KNOWN, job)
        return answered

    async def _live_results(self, fingerprints: list[str]) -> dict[str, tuple[uuid.UUID, list[AudioRef]]]:
        """Of ``fingerprints``, those with a live result: its job and blobs (none while PostgreSQL is down)."""
        if not fingerprints:
            return {}
        try:
            return await self._reader.cached_results(fingerprints)
        except ProjectionUnavailable as exc:
            log.warning("submitting without the result cache", error=str(exc))
            return {}

    async def _cached(
        self,
        fingerprints: list[str],
        live: dict[str, tuple[uuid.UUID, list[AudioRef]]],
        answered: dict[int, Answered],
    ) -> dict[int, Answered]:
        """The items a live result answers, once its blobs are marked used (the sweeper then keeps them for the
        retention; a result whose blobs are already gone is synthesized afresh)."""
        if not live:
            return {}

        def touched() -> dict[str, uuid.UUID]:
            return {fp: job_id for fp, (job_id, refs) in live.items() if self._blobs.touch(refs)}

        kept = await asyncio.to_thread(touched)
        return {
            i: Answered(i, kept[fp], fp, Answer.CACHED)
            for i, fp in enumerate(fingerprints)
            if i not in answered and fp in kept
        }

    async def _admit(self, events: list[JobQueued], live: dict[str, tuple[uuid.UUID, list[AudioRef]]]) -> None:
        """Ask admission for the work the new jobs bring: each fingerprint once (duplicates coalesce onto one
        synthesis), and none whose result is live (a worker completes such a job from the cache)."""
        if self._admission is None:
            return
        work = {e.fingerprint: len(e.payload.request.text) for e in events if e.fingerprint not in live}
        if work:
            await self._admission.admit(list(work), sum(work.values()))

    def _queued(self, request: SynthesisRequest, item: Item, key: str | None) -> JobQueued:
        job_id = item.job_id or job_id_for(key or "", request.fingerprint())
        now = utc_now()
        payload = JobQueuedPayload(request=request, idempotency_key=key, submitted_at=now, priority=item.priority)
        return job_event(JobQueued, job_id, request.fingerprint(), 0, self._producer, payload, at=now)

    async def _publish(self, events: list[JobQueued], record: DocumentSubmitted | None, submission: Submission) -> None:
        try:
            if events:
                partitions = await self._placement.place(events) if self._placement is not None else None
                await self._publisher.publish_all(events, partitions)
            if record is not None:
                if self._document_log is None:
                    raise Rejected("this API records no documents", 404)
                await self._document_log.publish(record)
        except BrokerUnavailable as exc:
            raise Unrecorded(exc, client_key(submission.key)) from exc


class Unrecorded(Rejected):
    """The log did not take (or confirm) the whole submission: a 503 naming the key to retry with."""

    def __init__(self, cause: BrokerUnavailable, key: str) -> None:
        if isinstance(cause, PublishUnconfirmed):
            what = f"the job log did not confirm the submission in time ({cause}); part of it may be recorded"
        else:
            what = f"the job log is unreachable ({cause}); part of the submission may be recorded"
        super().__init__(
            f"{what}. Send it again with the header Idempotency-Key: {key} so that the retry names the same jobs",
            503,
        )
        self.key = key


def _queued_answer(index: int, event: JobQueued) -> Answered:
    return Answered(index, event.job_id, event.fingerprint, Answer.QUEUED)
