"""Jobs waiting for their retry, kept inside the worker so that none of them holds up another job.

A released job comes back after its backoff (``not_before`` in its
``JobReleased``). Sleeping until then would stall every partition the worker
owns; instead the job's record is deferred (its partition is not committed
past it) and its retry waits here, ordered by due time, while the worker
goes on with the records behind it. A revocation drops the retries of the
partitions it takes away: their next owner reads the same records again and
schedules the same retries from the same ``not_before``.
"""

from __future__ import annotations

import heapq
import itertools
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiokafka.structs import TopicPartition


@dataclass(order=True, frozen=True)
class DueRetry:
    due: float  # monotonic seconds
    seq: int
    tp: TopicPartition = field(compare=False)
    offset: int = field(compare=False)
    job_id: uuid.UUID = field(compare=False)
    failed_attempt: int = field(compare=False)
    redo: bool = field(default=False, compare=False)  # a completion the log refused: act on what is left


class RetryQueue:
    def __init__(self) -> None:
        self._heap: list[DueRetry] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(
        self,
        tp: TopicPartition,
        offset: int,
        job_id: uuid.UUID,
        failed_attempt: int,
        delay_s: float,
        *,
        redo: bool = False,
    ) -> DueRetry:
        due = time.monotonic() + max(0.0, delay_s)
        retry = DueRetry(due, next(self._seq), tp, offset, job_id, failed_attempt, redo)
        heapq.heappush(self._heap, retry)
        return retry

    def pop_due(self) -> DueRetry | None:
        if self._heap and self._heap[0].due <= time.monotonic():
            return heapq.heappop(self._heap)
        return None

    def redoing(self) -> bool:
        """Whether a job waits to be acted on again after an outage (not a release's backoff)."""
        return any(retry.redo for retry in self._heap)

    def seconds_to_next(self) -> float | None:
        return max(0.0, self._heap[0].due - time.monotonic()) if self._heap else None

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self._heap = [retry for retry in self._heap if retry.tp not in gone]
        heapq.heapify(self._heap)
