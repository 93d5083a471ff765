"""What the API needs from the outside, as protocols; the composition root hands it the adapters."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from contracts import DocumentSubmitted, JobCancelled, JobQueued, ServiceMode, SynthesisRequest
from foundation.errors import BrokerUnavailable
from producers.errors import LogUnreadable

T = TypeVar("T")


class OffLoop(Protocol):
    """Where work too heavy for the event loop runs: in a process of its own under budgets
    (:class:`foundation.offload.Offload`), raising ``foundation.offload.OverBudget`` past one; ``cpu_s``: this
    call's CPU seconds, fewer than the offload's own (``None``: its own)."""

    async def run(self, work: Callable[..., T], *args: Any, cpu_s: int | None = None) -> T: ...


class JobLog(Protocol):
    """The jobs topic, as the API writes it.

    ``publish`` returns once the event is acknowledged (acks=all) and raises
    ``foundation.errors.BrokerUnavailable`` when it cannot be, so that nothing
    half-recorded is ever answered with 202. ``check`` raises the same when
    the log is unreachable (readiness).
    """

    async def publish(self, event: JobQueued | JobCancelled, partition: int | None = None) -> object:
        """``partition``: the job's (``producers.placement`` places a new job); ``None``: its fingerprint's."""
        ...

    async def publish_all(
        self, events: Sequence[JobQueued | JobCancelled], partitions: Sequence[int | None] | None = None
    ) -> object:
        """Publish ``events`` together (each to its partition in ``partitions``) and return once every one is
        acknowledged; ``BrokerUnavailable`` when any is not (the others may be recorded)."""
        ...

    async def partition_count(self) -> int:
        """How many partitions the jobs topic has; ``BrokerUnavailable`` when the log cannot tell."""
        ...

    async def check(self) -> None: ...


class Placement(Protocol):
    """Where new jobs go (``producers.placement``): a partition of the jobs topic for each ``JobQueued``, or
    ``None`` for its fingerprint's own. Never raises: a placement that cannot be had is ``None``."""

    async def place(self, jobs: Sequence[JobQueued]) -> list[int | None]: ...


@dataclass(frozen=True)
class PlacementDraft:
    """New fingerprints' partitions as an API proposes them, before PostgreSQL keeps each or names the one it
    has (the submission's live-result lookup carries the upsert: ``ProjectionReader.cached_results_placed``)."""

    fingerprints: tuple[str, ...]  # distinct
    proposed: tuple[int, ...]  # in the same order
    partitions: int  # the jobs topic's
    ttl_s: float  # how long a placement lives from its last use
    reserved: object  # the placement's own record of the work it counted for them


class PlacementDrafts(Protocol):
    """Placement in two steps (``producers.placement.BalancedPlacement``): propose, with the work counted at
    once, then keep PostgreSQL's answer, or release what is not published."""

    async def propose(self, entries: Sequence[tuple[uuid.UUID, str, SynthesisRequest]]) -> PlacementDraft | None:
        """A draft for the new jobs ``entries`` (job id, fingerprint, request); ``None``: place them at publish."""
        ...

    def kept(self, draft: PlacementDraft, placed_in: Mapping[str, int]) -> None:
        """PostgreSQL's answer: each fingerprint's partition."""
        ...

    def release(self, draft: PlacementDraft, fingerprints: Collection[str]) -> None:
        """The draft's ``fingerprints`` are not published (refused, or placed again after a rewrite)."""
        ...


class DocumentLog(Protocol):
    """Where documents are recorded (the compacted control topic); ``BrokerUnavailable`` as :class:`JobLog`."""

    async def publish(self, event: DocumentSubmitted) -> object: ...


class LagView(Protocol):
    """Consumer lag as last sampled: the document ``voxlog lag --json`` prints."""

    def latest(self) -> dict[str, Any]: ...


class JobAudit(Protocol):
    """Jobs as the log tells them (not the projection).

    ``since`` is when the job was submitted, as the projection has it: the log is read from where the projection
    says the job begins, and a job it cannot place is searched for only among the records appended from a margin
    before then, never from the start of every partition. Both raise ``foundation.errors.BrokerUnavailable`` when
    the log cannot be read in time.
    """

    async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
        """Every event of the job with its place in the log and what the projection did with it (None: none)."""
        ...

    async def job_as_of(
        self, job_id: uuid.UUID, moment: datetime, since: datetime | None = None
    ) -> dict[str, Any] | None:
        """The job's ``jobs`` row and segments as they stood at ``moment`` (None: not submitted yet)."""
        ...


class LogAudit:
    """The audit as the API reads it: a log that cannot be read is :class:`LogUnreadable` (a 503 that says the
    log cannot be read), not the broker error of whatever read it."""

    def __init__(self, audit: JobAudit) -> None:
        self._audit = audit

    async def events(self, job_id: uuid.UUID, since: datetime | None = None) -> dict[str, Any] | None:
        try:
            return await self._audit.events(job_id, since)
        except BrokerUnavailable as exc:
            raise LogUnreadable(str(exc)) from exc

    async def job_as_of(
        self, job_id: uuid.UUID, moment: datetime, since: datetime | None = None
    ) -> dict[str, Any] | None:
        try:
            return await self._audit.job_as_of(job_id, moment, since)
        except BrokerUnavailable as exc:
            raise LogUnreadable(str(exc)) from exc


class Waiter(Protocol):
    async def wait(self) -> None:
        """Return once the job may have changed: notified, or after a poll interval."""
        ...


class JobChangeFeed(Protocol):
    """Tells a reader when a job's projection changed, so that it reads again at once instead of polling."""

    def watch(self, job_id: uuid.UUID) -> AbstractContextManager[Waiter]: ...


class _Interval:
    def __init__(self, seconds: float) -> None:
        self._seconds = seconds

    async def wait(self) -> None:
        await asyncio.sleep(self._seconds)


class Polling:
    """A feed that knows nothing: every wait is one poll interval (for deployments without notifications)."""

    def __init__(self, poll_s: float = 0.1) -> None:
        self._interval = _Interval(poll_s)

    @contextlib.contextmanager
    def watch(self, job_id: uuid.UUID) -> Iterator[Waiter]:
        yield self._interval


class Operations(Protocol):
    """The operator's actions behind the admin routes (the same as ``voxlog admin`` and ``voxlog cache
    purge``): switches and evictions are events on the log (``BrokerUnavailable`` when not taken), the
    status is the projection's (``ProjectionUnavailable`` while PostgreSQL cannot be read)."""

    async def set_mode(self, mode: ServiceMode, enabled: bool, reason: str) -> None: ...

    async def mode(self, mode: ServiceMode) -> dict[str, Any]:
        """``mode`` itself (true: either switch is on), ``switches`` by source, and the ``backlog`` they are
        judged by."""
        ...

    async def purge_cache(self, older_than_s: float | None) -> tuple[int, int]:
        """Evict the results completed more than ``older_than_s`` ago (``None``: all): how many, their bytes."""
        ...

    async def set_pronunciation(self, word: str, phonemes: str, reason: str) -> None:
        """Record a lexicon entry (``word`` and ``phonemes`` checked: :mod:`contracts.pronunciations`)."""
        ...

    async def remove_pronunciation(self, word: str, reason: str) -> bool:
        """Record the removal of ``word`` from the lexicon; ``False`` (nothing recorded) when it has no entry."""
        ...

    async def lexicon(self) -> list[dict[str, Any]]:
        """The lexicon as projected: ``word``, ``phonemes``, ``reason``, ``set_at``, by word."""
        ...
