"""Priorities inside a worker: interactive jobs first, batch jobs in the gaps, and never starved.

Records of a partition arrive in log order, so a batch of documents submitted
first would hold every short request behind it. Instead, a queued job of
priority ``batch`` is set aside when its record is read: its record is
deferred (no commit passes it, as for a retry: a new owner reads it again)
and the job waits here, in arrival order, while the worker goes on with the
records behind it. The worker takes a batch job when it has no interactive
record in hand, and after every ``interactive_per_batch`` interactive jobs in
a row, so that a steady stream of interactive work still leaves batch work
one turn in ``interactive_per_batch + 1``.

At most ``lookahead`` batch jobs wait here: past that the worker works them
off before reading further, which bounds its memory and how far ahead of its
committed offsets it reads.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka.structs import TopicPartition


@dataclass(frozen=True)
class SetAside:
    tp: TopicPartition
    offset: int
    job_id: uuid.UUID


class BatchQueue:
    def __init__(self, interactive_per_batch: int, lookahead: int) -> None:
        self.interactive_per_batch = interactive_per_batch
        self.lookahead = lookahead
        self._waiting: deque[SetAside] = deque()
        self._interactive_in_a_row = 0

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def full(self) -> bool:
        return len(self._waiting) >= self.lookahead

    def set_aside(self, tp: TopicPartition, offset: int, job_id: uuid.UUID) -> None:
        self._waiting.append(SetAside(tp, offset, job_id))

    def put_back(self, entry: SetAside) -> None:
        """A batch job taken but not done (the log refused its claim): first in line again."""
        self._waiting.appendleft(entry)

    def interactive_done(self) -> None:
        self._interactive_in_a_row += 1

    def next_batch(self, interactive_waiting: bool) -> SetAside | None:
        """The batch job to take now, if it is batch work's turn (see the module docstring)."""
        if not self._waiting:
            return None
        turn = self._interactive_in_a_row >= self.interactive_per_batch
        if interactive_waiting and not turn and not self.full:
            return None
        self._interactive_in_a_row = 0
        return self._waiting.popleft()

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        self._waiting = deque(entry for entry in self._waiting if entry.tp not in gone)
