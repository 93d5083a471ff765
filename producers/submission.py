"""The one way anything is submitted: validate, answer what is known, admit, place, publish, answer.

``POST /v1/jobs`` and ``/v1/audio/speech`` submit one request, ``/v1/batches``
many, ``/v1/documents`` a document's parts and the record that names them:
each is a :class:`Submission` of items, and :meth:`Submissions.submit` takes
every one of them through the same steps, so a rule added here holds for
every route:

1. **validate** every item (nothing is recorded unless all are valid: one bad
   request of many is a 422 listing each bad one by index), and add to its
   request the server lexicon's pronunciations of the words its text says
   (:mod:`producers.lexicon`; the request's own win);
2. **answer what is known**: an item whose idempotency key named a job before
   is answered with that job (409 if it named another request), as is an item
   with a fixed id (a document's part) the projection shows already; an item
   whose audio is cached is answered at once by a job of its own completed from
   the cache, once the result's blobs are marked used (a document's parts are
   always queued, as jobs of their own, and a worker completes a cached one);
3. **degrade** what needs a synthesis while degraded mode is on
   (:mod:`producers.degradation`): its request is rewritten to the degraded
   settings and fingerprinted again (an item whose audio is cached or in
   flight at the quality asked for is not: it costs nothing), and a degraded
   request whose audio is cached is answered from it;
   **admit** what needs a synthesis (:mod:`producers.admission`: 429 over the
   backlog limit, 503 in cache-only mode), and the new jobs together against
   the key's and the tenant's limits (:mod:`producers.quotas`: 429 over one,
   413 for a submission that alone is over one);
4. **place** each new job in a partition (:mod:`producers.placement`): with
   balanced placement the partitions are proposed before step 2 and upserted
   by its live-result lookup, in the same statement (a new request costs one
   round trip for both; what is then refused is released from the
   partitions' counted work); a job whose request degraded mode rewrote is
   placed as it is published;
5. **publish** (:mod:`producers.submission_log`) the record that names the
   items (a document), then the jobs, once every record is checked against
   the largest the log takes (413 before anything is sent), and return once
   the log acknowledged them (acks=all). A submission the log took in part,
   or could not confirm, is a 503 that names the idempotency key to retry
   with; the retry names the same jobs and document, and sends only what the
   projection does not show.

Every job is its submitter's: the tenant and the API key of the
:class:`~producers.api_keys.Principal` are in its ``JobQueued``, and an item a
live result answers becomes the tenant's own completed job (never the job of
whoever asked first). With ``cache_scope="tenant"`` the tenant is part of every
fingerprint, so tenants share no synthesis.

While PostgreSQL cannot be read, step 2 answers nothing from it and step 3
admits everything, unjudged (the log is the write side): a retry still names the same
jobs, and workers coalesce duplicates.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import structlog

from contracts import (
    DegradedFrom,
    DocumentSubmitted,
    JobCompleted,
    JobEvent,
    JobQueued,
    JobQueuedPayload,
    Priority,
    Producer,
    SynthesisRequest,
    job_event,
    utc_now,
)
from contracts.audio_estimate import expected_audio_ms, work_chars
from foundation import tracing
from foundation.blobs import BlobStore
from foundation.metrics import SUBMISSIONS, SUBMISSIONS_DEGRADED
from producers.admission import Admission
from producers.api_keys import Principal
from producers.degradation import DegradedSettings, degrade
from producers.errors import Rejected
from producers.idempotency import client_key, item_key, job_id_for
from producers.lexicon import Lexicon
from producers.limits_ledger import Admitted
from producers.ports import OffLoop, PlacementDraft, PlacementDrafts
from producers.quotas import Quotas
from producers.requests import JobRequest, Limits, Refused, validate_all
from producers.submission_log import SubmissionLog, cache_hit
from projections.errors import ProjectionUnavailable
from projections.reads.jobs import ProjectionReader
from projections.reads.rows import JobRecord, LiveResult

log = structlog.get_logger("voxlog.api")
CacheScope = Literal["shared", "tenant"]


@dataclass(frozen=True)
class Item:
    """One request of a submission; ``job_id`` fixed (a document's part, of ``document_id``), else named by the
    key."""

    request: JobRequest
    priority: Priority
    job_id: uuid.UUID | None = None
    document_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Submission:
    items: Sequence[Item]
    key: str
    """The scoped idempotency key (:mod:`producers.idempotency`): the client's, or a fresh one."""
    client_sent_key: bool
    """Whether the client sent ``key`` (only then can it have named jobs before)."""
    principal: Principal
    """Whom the jobs belong to."""
    from_cache: bool = True
    """Answer an item whose audio is cached at once (a document's parts: no, a worker completes them)."""
    record: Callable[[Sequence[SynthesisRequest]], DocumentSubmitted] | None = None
    """The record that names the items (a document), made from their validated requests."""


class Answer(StrEnum):
    QUEUED = "queued"  # a new job, on the log
    CACHED = "cached"  # a new job, completed at once from a live result
    KNOWN = "known"  # the idempotency key named this job before


@dataclass(frozen=True)
class Answered:
    """What became of one item."""

    index: int
    job_id: uuid.UUID
    fingerprint: str
    answer: Answer
    job: JobRecord | None = None  # a known job, as the projection shows it (no segments)
    source: LiveResult | None = None  # the result a cached answer reuses
    published: tuple[JobEvent, ...] = ()  # a cached answer's: its JobQueued and JobCompleted, as published
    degraded_from: DegradedFrom | None = None  # a new job's: what degraded mode changed in its request


@dataclass(frozen=True)
class Submitted:
    answers: list[Answered]
    key: str
    requests: list[SynthesisRequest]

    @property
    def queued(self) -> int:
        return sum(1 for a in self.answers if a.answer is Answer.QUEUED)


@dataclass(frozen=True)
class _NewJobs:
    queued: list[JobQueued]
    completions: dict[int, JobCompleted]  # by position in queued
    degraded: dict[int, DegradedFrom]  # by item
    cached: dict[int, LiveResult]  # by item
    admitted: list[uuid.UUID]  # recorded by the limits (forgotten if the log does not take them)


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
        log_: SubmissionLog,
        blobs: BlobStore,
        limits: Limits,
        producer: Producer,
        *,
        admission: Admission | None = None,
        cache_scope: CacheScope = "shared",
        offload: OffLoop | None = None,
        quotas: Quotas | None = None,
        degraded: DegradedSettings | None = None,
        lexicon: Lexicon | None = None,
        drafts: PlacementDrafts | None = None,
    ) -> None:
        self._reader = reader
        self._log = log_
        self._blobs = blobs
        self.limits = limits
        self._producer = producer
        self._admission = admission
        self._cache_scope = cache_scope
        self._offload = offload  # where large submissions are validated (producers.requests.validate_all)
        self._quotas = quotas  # per-key live jobs, per-tenant quotas (producers.quotas)
        self._degraded = degraded  # what degraded mode makes of a new synthesis (None: it is never degraded)
        self._lexicon = lexicon  # the server's pronunciations (producers.lexicon; None: there is none)
        self._drafts = drafts  # placement proposed before the lookup, upserted by it (None: placed at publish)

    async def submit(self, submission: Submission) -> Submitted:
        requests = await self._validate(submission)
        asked = list(requests)  # degraded mode may rewrite some of requests: a document records what was asked
        keys = [self._key_of(submission, i) for i in range(len(requests))]
        fingerprints = [request.fingerprint() for request in requests]
        answered, draft, live, placed = await self._answer_and_look_up(submission, requests, keys, fingerprints)
        try:
            new = await self._new_jobs(submission, requests, keys, fingerprints, answered, live)
        except Rejected:
            self._release(draft, draft.fingerprints if draft is not None else ())  # not its partitions' work
            raise
        if new.degraded and draft is not None:  # placed again, by their new fingerprints
            self._release(draft, set(draft.fingerprints) - {e.fingerprint for e in new.queued})
        record = submission.record(asked) if submission.record is not None else None
        try:
            await self._log.publish(new.queued, new.completions, record, client_key(submission.key), placed)
        except Exception:
            if self._quotas is not None:
                await self._quotas.forget(new.admitted)
            raise
        answers = self._answers(len(requests), answered, new.queued, new.cached, new.completions)
        for answer in answers:
            SUBMISSIONS.labels(answer.answer.value).inc()
        SUBMISSIONS_DEGRADED.inc(len(new.degraded))
        return Submitted(answers, submission.key, requests)

    async def _validate(self, submission: Submission) -> list[SynthesisRequest]:
        engines = await self._reader.engines()
        scope = submission.principal.tenant if self._cache_scope == "tenant" else None
        items = submission.items
        lexicon = await self._lexicon.entries() if self._lexicon is not None else None
        bodies = [item.request for item in items]
        checked = await validate_all(bodies, self.limits, engines, self._offload, lexicon)
        requests, invalid = [], []
        for index, outcome in enumerate(checked):
            if isinstance(outcome, Refused):
                if len(items) == 1 or outcome.status == 503:  # one request, or none can be taken: say it as it is
                    raise Rejected(outcome.detail, outcome.status, param=outcome.param)
                invalid.append(InvalidItem(index, outcome.status, outcome.detail))
            else:
                requests.append(outcome if scope is None else outcome.model_copy(update={"cache_scope": scope}))
        if invalid:
            raise InvalidItems(invalid, len(submission.items))
        return requests

    @staticmethod
    def _key_of(submission: Submission, index: int) -> str | None:
        """The key that names item ``index``'s job (``None``: its id is fixed, a document's part)."""
        if submission.items[index].job_id is not None:
            return None
        return submission.key if len(submission.items) == 1 else item_key(submission.key, index)

    async def _answer_and_look_up(
        self, submission: Submission, requests: list[SynthesisRequest], keys: list[str | None], fingerprints: list[str]
    ) -> tuple[dict[int, Answered], PlacementDraft | None, dict[str, LiveResult], dict[str, int]]:
        """The items answered by the jobs their keys named (:meth:`_known`), the live results and placements of
        the others: with balanced placement, one round trip, the keys' lookup in the same statement (step 1)."""
        named = {key: i for i, key in enumerate(keys) if key is not None} if submission.client_sent_key else {}
        fixed = any(item.job_id is not None for item in submission.items)
        if not named or fixed or self._drafts is None:
            answered = await self._known(submission, keys, fingerprints)
            pending = [i for i in range(len(requests)) if i not in answered]
            draft = await self._draft(submission, requests, keys, fingerprints, pending)
            live, placed, _ = await self._look_up([fingerprints[i] for i in pending], draft)
            return answered, draft, live, placed
        draft = await self._draft(submission, requests, keys, fingerprints, list(range(len(requests))))
        live, placed, by_key = await self._look_up(fingerprints, draft, list(named))
        try:
            answered = self._answered(by_key, named, fingerprints)
        except Rejected:
            self._release(draft, draft.fingerprints if draft is not None else ())
            raise
        # An item its key answers is no new work: what placement counted for it is given back.
        new = {fingerprints[i] for i in range(len(requests)) if i not in answered}
        self._release(draft, {fingerprints[i] for i in answered} - new)
        return answered, draft, live, placed

    async def _known(
        self, submission: Submission, keys: list[str | None], fingerprints: list[str]
    ) -> dict[int, Answered]:
        """The items the client's key named before: by the key, that job answers them (409 if it was another
        request); by a fixed id (a document's part), the job the projection shows already is not sent again,
        so that a retry completes a submission the log took in part."""
        if not submission.client_sent_key:
            return {}
        named = {key: i for i, key in enumerate(keys) if key is not None}
        fixed = {item.job_id: i for i, item in enumerate(submission.items) if item.job_id is not None}
        try:
            by_key = await self._reader.jobs_by_keys(list(named)) if named else {}
            by_id = await self._reader.jobs_by_ids(list(fixed)) if fixed else {}
        except ProjectionUnavailable as exc:
            log.warning("submitting without the projection", error=str(exc))
            return {}
        answered = self._answered(by_key, named, fingerprints)
        for job_id, job in by_id.items():
            answered[fixed[job_id]] = Answered(fixed[job_id], job_id, job.fingerprint, Answer.KNOWN, job)
        return answered

    @staticmethod
    def _answered(by_key: dict[str, JobRecord], named: dict[str, int], fingerprints: list[str]) -> dict[int, Answered]:
        """The items the jobs their keys named answer (409 where a key named another request's job)."""
        answered = {}
        for key, job in by_key.items():
            index = named[key]
            if fingerprints[index] not in (job.fingerprint, job.requested_fingerprint):
                raise Rejected(
                    "this Idempotency-Key was used for another request; send a new key with a new request", 409
                )
            answered[index] = Answered(index, job.job_id, job.fingerprint, Answer.KNOWN, job)
        return answered

    async def _new_jobs(
        self,
        submission: Submission,
        requests: list[SynthesisRequest],
        keys: list[str | None],
        fingerprints: list[str],
        answered: dict[int, Answered],
        live: dict[str, LiveResult],
    ) -> _NewJobs:
        """Degrade, answer from the cache, admit and judge the limits of what needs a new job (steps 2 to 3)."""
        degraded = await self._degrade(requests, fingerprints, answered, live)
        if degraded:
            live |= await self._live_results([fingerprints[i] for i in degraded])
        cached = await self._cached(fingerprints, live, answered) if submission.from_cache else {}
        queued: list[JobQueued] = []
        completions: dict[int, JobCompleted] = {}
        for i, item in enumerate(submission.items):
            if i in answered:
                continue
            event = self._queued(requests[i], item, keys[i], submission.principal, degraded.get(i))
            if i in cached:
                completions[len(queued)] = cache_hit(event, cached[i])
            queued.append(event)
        await self._admit(queued, live)
        admitted = await self._judge_limits(submission.principal, queued, completions)
        return _NewJobs(queued, completions, degraded, cached, admitted)

    def _release(self, draft: PlacementDraft | None, fingerprints: Collection[str]) -> None:
        if draft is not None and self._drafts is not None:
            self._drafts.release(draft, fingerprints)

    async def _draft(
        self,
        submission: Submission,
        requests: list[SynthesisRequest],
        keys: list[str | None],
        fingerprints: list[str],
        pending: list[int],
    ) -> PlacementDraft | None:
        """Partitions proposed for the items that may become new jobs, for the lookup to place them by."""
        if self._drafts is None or not pending:
            return None
        entries = [
            (_job_id(submission.items[i], keys[i], fingerprints[i]), fingerprints[i], requests[i]) for i in pending
        ]
        return await self._drafts.propose(entries)

    async def _look_up(
        self, fingerprints: list[str], draft: PlacementDraft | None, keys: list[str] | None = None
    ) -> tuple[dict[str, LiveResult], dict[str, int], dict[str, JobRecord]]:
        """The live results of ``fingerprints`` and, with a draft, the partition of each and the jobs ``keys``
        named: one round trip."""
        if draft is None or self._drafts is None:
            return await self._live_results(fingerprints), {}, {}
        try:
            live, placed, known = await self._reader.cached_results_placed(
                list(draft.fingerprints), list(draft.proposed), draft.ttl_s, draft.partitions, keys
            )
        except ProjectionUnavailable as exc:  # placed at publish instead (by what this API knows, else by key)
            log.warning("submitting without the projection", error=str(exc))
            self._drafts.release(draft, draft.fingerprints)
            return {}, {}, {}
        self._drafts.kept(draft, placed)
        return live, placed, known

    async def _live_results(self, fingerprints: list[str]) -> dict[str, LiveResult]:
        """Of ``fingerprints``, those with a live result (none while PostgreSQL is down)."""
        if not fingerprints:
            return {}
        try:
            return await self._reader.cached_results(fingerprints)
        except ProjectionUnavailable as exc:
            log.warning("submitting without the result cache", error=str(exc))
            return {}

    async def _degrade(
        self,
        requests: list[SynthesisRequest],
        fingerprints: list[str],
        answered: dict[int, Answered],
        live: dict[str, LiveResult],
    ) -> dict[int, DegradedFrom]:
        """While degraded mode is on, rewrite (in place) the requests that need a new synthesis to the degraded
        settings, with their fingerprints; returns what was changed, by item. Not rewritten: an item answered
        already, or whose audio is cached or in flight at the quality asked for (that costs nothing)."""
        if self._degraded is None or self._admission is None:
            return {}
        pending = [i for i, fp in enumerate(fingerprints) if i not in answered and fp not in live]
        if not pending or (why := await self._admission.degraded()) is None:
            return {}
        try:
            flying = await self._reader.in_flight([fingerprints[i] for i in pending])
        except ProjectionUnavailable:
            return {}  # nothing is degraded unjudged (admission takes it at full quality, too)
        changed = {}
        for i in pending:
            if fingerprints[i] in flying or (rewritten := degrade(requests[i], self._degraded, why)) is None:
                continue
            requests[i], changed[i] = rewritten
            fingerprints[i] = requests[i].fingerprint()
        return changed

    async def _cached(
        self, fingerprints: list[str], live: dict[str, LiveResult], answered: dict[int, Answered]
    ) -> dict[int, LiveResult]:
        """The items a live result answers, once its blobs are marked used (the sweeper then keeps them for the
        retention; a result whose blobs are already gone is synthesized afresh)."""
        if not live:
            return {}

        def touched() -> set[str]:
            return {fp for fp, result in live.items() if self._blobs.touch(list(result.refs))}

        kept = await asyncio.to_thread(touched)
        return {i: live[fp] for i, fp in enumerate(fingerprints) if i not in answered and fp in kept}

    async def _admit(self, queued: list[JobQueued], live: dict[str, LiveResult]) -> None:
        """Ask admission for the work the new jobs bring: each fingerprint once (duplicates coalesce onto one
        synthesis), and none whose result is live (it is completed from the cache)."""
        if self._admission is None:
            return
        work = {e.fingerprint: work_chars(e.payload.request) for e in queued if e.fingerprint not in live}
        if work:
            await self._admission.admit(work, queued[0].payload.tenant)

    async def _judge_limits(
        self, principal: Principal, queued: list[JobQueued], completions: dict[int, JobCompleted]
    ) -> list[uuid.UUID]:
        """The key's and the tenant's limits, for the new jobs together (a batch or document whole)."""
        if self._quotas is None:
            return []
        jobs = [
            Admitted(e.job_id, len(e.payload.request.text), i not in completions, expected_audio_ms(e.payload.request))
            for i, e in enumerate(queued)
        ]
        return await self._quotas.admit(principal, jobs)

    def _queued(
        self,
        request: SynthesisRequest,
        item: Item,
        key: str | None,
        principal: Principal,
        degraded_from: DegradedFrom | None = None,
    ) -> JobQueued:
        job_id = _job_id(item, key, request.fingerprint())
        now = utc_now()
        payload = JobQueuedPayload(
            request=request,
            idempotency_key=key,
            submitted_at=now,
            priority=item.priority,
            tenant=principal.tenant,
            key_id=principal.key_id,
            traceparent=trace.traceparent if (trace := tracing.current()) is not None else None,
            degraded_from=degraded_from,
            document_id=item.document_id,
        )
        return job_event(JobQueued, job_id, request.fingerprint(), 0, self._producer, payload, at=now)

    @staticmethod
    def _answers(
        count: int,
        answered: dict[int, Answered],
        queued: list[JobQueued],
        cached: dict[int, LiveResult],
        completions: dict[int, JobCompleted],
    ) -> list[Answered]:
        new = iter(enumerate(queued))
        answers = []
        for i in range(count):
            if i in answered:
                answers.append(answered[i])
                continue
            n, event = next(new)
            degraded_from = event.payload.degraded_from
            completion = completions.get(n)
            if completion is None:
                answers.append(Answered(i, event.job_id, event.fingerprint, Answer.QUEUED, degraded_from=degraded_from))
                continue
            answers.append(
                Answered(
                    i, event.job_id, event.fingerprint, Answer.CACHED, source=cached[i],
                    degraded_from=degraded_from, published=(event, completion),
                )
            )  # fmt: skip
        return answers


def _job_id(item: Item, key: str | None, fingerprint: str) -> uuid.UUID:
    """The id of the job ``item`` becomes: its fixed one, else named by its key and fingerprint."""
    return item.job_id or job_id_for(key or "", fingerprint)
