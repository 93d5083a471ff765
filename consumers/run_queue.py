"""The jobs waiting on a worker for a claim, taken by the policy, not in log order.

Records of a partition arrive in log order, so a long job read first would
hold every short request behind it, and a tenant's flood every other
tenant's work. Instead every job the worker is to act on (a new job, a
retry that is due, a job a dead owner left claimed) waits here: its record
is deferred (no commit passes it, so a new owner reads it again) while the
worker reads on. When the worker has room for another claim it takes the
job :class:`consumers.scheduling.Policy` puts first: interactive before
batch (one batch job after ``interactive_per_batch`` interactive ones), the
tenant that used the engine least, the shortest interactive job, the
earliest batch job. A job whose fingerprint is held already waits until that
claim ends: it is then answered from its result (coalescing) instead of
being synthesized twice.

At most ``lookahead`` jobs wait here: past that the worker stops reading
ahead, which bounds its memory and how far its reads run past its commits.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Literal

from aiokafka.structs import TopicPartition

from consumers.scheduling import Contender, Policy
from contracts import Priority
from contracts.scheduling import MAX_QUEUE_SHOWN, QueueCount, QueuedJob

Due = Literal["queued", "retry", "redo"]
"""Why the job is acted on: it is new (or its owner died mid-job), a release's retry is due, or its
completion was refused and whatever is left of it is to be done."""


@dataclass
class Waiting:
    tp: TopicPartition
    offset: int
    job: Contender
    due: Due = "queued"
    failed_attempt: int = 0
    read_turn: int = 0  # the engine's turn count when the worker read it: what it waited behind counts from here
    read_at: float = field(default_factory=time.monotonic)

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.job_id


class RunQueue:
    def __init__(self, policy: Policy, lookahead: int) -> None:
        self.policy = policy
        self.lookahead = lookahead
        self._interactive: dict[str, list[Waiting]] = {}  # by tenant
        self._batch: dict[str, deque[Waiting]] = {}  # by tenant, in the order read
        self._count = 0
        self.interactive_in_a_row = 0

    def __len__(self) -> int:
        return self._count

    @property
    def full(self) -> bool:
        return self._count >= self.lookahead

    def add(self, entry: Waiting) -> None:
        tenant = entry.job.tenant
        if entry.job.priority == "interactive":
            self._interactive.setdefault(tenant, []).append(entry)
        else:
            self._batch.setdefault(tenant, deque()).append(entry)
        self._count += 1

    def put_back(self, entry: Waiting) -> None:
        """A job taken but not acted on: waiting again, first of its tenant's batch jobs."""
        if entry.job.priority == "batch":
            self._batch.setdefault(entry.job.tenant, deque()).appendleft(entry)
            self._count += 1
        else:
            self.add(entry)

    def take(self, held: Container[str], allow_batch: bool = True) -> Waiting | None:
        """The job to claim next, if any may be: none whose fingerprint is in ``held``, and no batch job
        unless ``allow_batch``."""
        now = time.monotonic()
        firsts: dict[uuid.UUID, Waiting] = {}
        for entries in self._interactive.values():
            best = min(
                (e for e in entries if e.job.fingerprint not in held),
                key=lambda e: (e.job.size_class(now, self.policy.aging_s), e.job.seq),
                default=None,
            )
            if best is not None:
                firsts[best.job_id] = best
        if allow_batch:
            for queue in self._batch.values():
                first = next((e for e in queue if e.job.fingerprint not in held), None)
                if first is not None:
                    firsts[first.job_id] = first
        chosen = self.policy.pick((e.job for e in firsts.values()), self.interactive_in_a_row, now)
        if chosen is None:
            return None
        entry = firsts[chosen.job_id]
        self._remove(entry)
        interactive = entry.job.priority == "interactive"
        self.interactive_in_a_row = self.interactive_in_a_row + 1 if interactive else 0
        return entry

    def _remove(self, entry: Waiting) -> None:
        tenant = entry.job.tenant
        if entry.job.priority == "interactive":
            entries = self._interactive[tenant]
            entries.remove(entry)
            if not entries:
                del self._interactive[tenant]
        else:
            queue = self._batch[tenant]
            queue.remove(entry)
            if not queue:
                del self._batch[tenant]
        self._count -= 1

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        for tenant, entries in list(self._interactive.items()):
            kept = [e for e in entries if e.tp not in gone]
            self._count -= len(entries) - len(kept)
            self._interactive[tenant] = kept
            if not kept:
                del self._interactive[tenant]
        for tenant, queue in list(self._batch.items()):
            kept_batch = deque(e for e in queue if e.tp not in gone)
            self._count -= len(queue) - len(kept_batch)
            self._batch[tenant] = kept_batch
            if not kept_batch:
                del self._batch[tenant]

    def entries(self) -> list[Waiting]:
        return [e for entries in self._interactive.values() for e in entries] + [
            e for queue in self._batch.values() for e in queue
        ]

    def shown(self, limit: int = MAX_QUEUE_SHOWN) -> tuple[QueuedJob, ...]:
        """The first ``limit`` waiting jobs in about the order the worker would take them: interactive ones by
        the policy's order, then batch ones by their tenant's share and arrival."""
        now = time.monotonic()
        interactive = sorted(
            (e for entries in self._interactive.values() for e in entries),
            key=lambda e: self.policy.order_key(e.job, now),
        )
        batch = sorted(
            (e for queue in self._batch.values() for e in queue),
            key=lambda e: (self.policy.shares.used(e.job.tenant, now), e.job.seq),
        )
        return tuple(
            QueuedJob(job_id=e.job_id, tenant=e.job.tenant, priority=e.job.priority, text_chars=e.job.remaining_chars)
            for e in [*interactive, *batch][:limit]
        )

    def counts(self) -> tuple[QueueCount, ...]:
        totals: dict[tuple[str, Priority], list[int]] = {}
        for entry in self.entries():
            total = totals.setdefault((entry.job.tenant, entry.job.priority), [0, 0])
            total[0] += 1
            total[1] += entry.job.remaining_chars
        return tuple(
            QueueCount(tenant=tenant, priority=priority, jobs=jobs, text_chars=chars)
            for (tenant, priority), (jobs, chars) in sorted(totals.items())
        )
