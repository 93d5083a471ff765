"""Consumer lag: how far each consumer is behind the log, in records and in seconds, and a status per group.

A *sample* is what Kafka says at one moment: for each partition the
consumer's position (a group's committed offset; the projector keeps its own in
PostgreSQL), the log's start and end offsets, and the timestamp of the oldest
record not yet consumed. A window of recent samples gives the rate at which the
consumer moves, the time it needs to drain, and a status, after the rules of
LinkedIn's Burrow:

- ``STOP``: the group has no members: nobody reads it, whatever its lag.
- ``OK`` whenever the group's lag touched zero within the window (Burrow's
  first rule: a consumer that caught up in the window is keeping up).
- ``STALL``: the group has lag and no partition's position moved for at least
  ``stall_after_s`` (members are there, but they do not get through the
  records; a synthesis group commits after each job, so this is longer than a
  long job).
- ``WARN``: the group's lag grew across the window, sample after sample, while
  it moves, and a record written before the window began is still unconsumed
  (it is slower than the producers) — unless the jobs it owes did not grow
  (below). A lag of a few records that grew while every older record was
  consumed is a consumer that batches and keeps up.
- ``OK``: otherwise (a lag that holds or shrinks).

A synthesis group's lag counts records, and its own workers add to it: every
job they act on appends its claim, segments and completion to the topic the
group reads, while a worker that holds several claims and reads jobs ahead
commits only up to the first job it has not finished (a crash must leave that
job to be read again). So a healthy worker draining a backlog sees its lag in
records grow. What says whether a group keeps up is the jobs it owes (queued,
claimed, or released for a retry, from the projection: ``Sample.owed``): a lag
that grew while those did not is the group's own events, ``OK``; the rule falls
back to the records where the projection could not be read.

The group is judged as a whole, not partition by partition: a worker serves
its partitions one job at a time, so a partition waiting behind the others
while the group moves is an ordinary backlog, not a stalled consumer (judged
one by one, every backlog longer than ``stall_after_s`` was a STALL, and the
alert rules page on STALL). The rules look at a window of at least two samples; with one, only ``STOP`` and
``OK`` can be told, and ``STALL`` needs a window of ``stall_after_s`` or more.
The projector is not a Kafka group: it has no members to count, so it is never
``STOP``.

This is the bottom of four lag modules, the rules alone: samples in, a status out, no I/O.
:mod:`foundation.kafka_lag` reads the samples from Kafka, :mod:`voxlog.lag_monitor` takes them on a
schedule (the API's ``/v1/lag`` and gauges) and :mod:`voxlog.lag_cli` is ``voxlog lag``.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "OK"
    WARN = "WARN"
    STALL = "STALL"
    STOP = "STOP"


@dataclass(frozen=True)
class PartitionPosition:
    partition: int
    position: int | None  # None: nothing committed, so the consumer will start at the log's start
    start: int  # the log's first offset
    end: int  # the offset the next record will get
    oldest_ms: int | None = None  # timestamp of the record at the position, when there is one

    @property
    def at(self) -> int:
        return self.start if self.position is None else max(self.position, self.start)

    @property
    def records(self) -> int:
        return max(self.end - self.at, 0)


@dataclass(frozen=True)
class Sample:
    at_s: float  # wall clock, seconds since the epoch
    group: str
    topic: str
    members: int | None  # None: not a Kafka group (the projector)
    partitions: tuple[PartitionPosition, ...]
    owed: int | None = None  # the live jobs it is to synthesize (None: unknown, or not a synthesis group)


@dataclass(frozen=True)
class PartitionLag:
    partition: int
    position: int
    end: int
    records: int
    seconds: float  # age of the oldest record not consumed; 0 without lag
    per_s: float | None  # records consumed per second over the window (None: one sample)
    drain_s: float | None  # time to consume the lag at that rate (None: unknown, or never at rate 0)


@dataclass(frozen=True)
class GroupLag:
    group: str
    topic: str
    members: int | None
    status: Status
    reason: str
    partitions: tuple[PartitionLag, ...]
    window_s: float

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def seconds(self) -> float:
        return max((p.seconds for p in self.partitions), default=0.0)

    @property
    def per_s(self) -> float | None:
        rates = [p.per_s for p in self.partitions if p.per_s is not None]
        return sum(rates) if rates else None

    @property
    def drain_s(self) -> float | None:
        if self.records == 0:
            return 0.0
        if self.status is Status.STOP:
            return None
        rate = self.per_s
        return self.records / rate if rate else None


def evaluate(window: Sequence[Sample], stall_after_s: float = 60.0) -> GroupLag:
    """The lag and status of one group from its samples, oldest first (at least one)."""
    first, last = window[0], window[-1]
    span = last.at_s - first.at_s
    history = {
        p.partition: [seen for sample in window for seen in sample.partitions if seen.partition == p.partition]
        for p in last.partitions
    }
    partitions = tuple(_partition(p, history[p.partition], span, last.at_s) for p in last.partitions)
    status, reason = _status(window, history, span >= stall_after_s)
    if status is Status.STOP:  # nobody consumes: whatever the rate was, the lag never drains
        partitions = tuple(dataclasses.replace(p, drain_s=None) if p.records else p for p in partitions)
    return GroupLag(last.group, last.topic, last.members, status, reason, partitions, span)


def _partition(p: PartitionPosition, seen: list[PartitionPosition], span: float, now_s: float) -> PartitionLag:
    per_s = (p.at - seen[0].at) / span if span > 0 and len(seen) > 1 else None
    seconds = max(now_s - p.oldest_ms / 1000, 0.0) if p.records and p.oldest_ms is not None else 0.0
    if p.records == 0:
        drain: float | None = 0.0
    else:
        drain = p.records / per_s if per_s else None
    return PartitionLag(p.partition, p.at, p.end, p.records, seconds, per_s, drain)


def _status(
    window: Sequence[Sample], history: dict[int, list[PartitionPosition]], long_enough: bool
) -> tuple[Status, str]:
    """The group's status, judged on the group as a whole (see the module's docstring)."""
    last = window[-1]
    if last.members == 0:
        return Status.STOP, "the group has no members"
    if len(window) < 2:
        return Status.OK, "one sample: only STOP can be told yet"
    lags = [sum(p.records for p in sample.partitions if p.partition in history) for sample in window]
    if not lags[-1]:
        return Status.OK, "no lag"
    if min(lags) == 0:
        return Status.OK, "lag touched zero within the window"
    lagging = [n for n, seen in history.items() if seen[-1].records]
    moved = any(len({p.at for p in seen}) > 1 for seen in history.values())
    if not moved and long_enough:
        return (
            Status.STALL,
            f"partition(s) {_list(lagging)} have lag and did not move across the window, nor did the rest of the group",
        )
    if _grows(lags):
        owed = [sample.owed for sample in window]
        if owed[0] is not None and owed[-1] is not None and owed[-1] <= owed[0]:
            return Status.OK, f"lag grew by the group's own events: the jobs it owes went from {owed[0]} to {owed[-1]}"
        if _kept_up_with_the_windows_start(window):
            return Status.OK, "lag grew, but every record older than the window was consumed"
        grew = [n for n, seen in history.items() if seen[-1].records > seen[0].records]
        return Status.WARN, f"lag grew across the window on partition(s) {_list(grew)}"
    return Status.OK, "lag holds or shrinks"


def _kept_up_with_the_windows_start(window: Sequence[Sample]) -> bool:
    """Whether the oldest record still unconsumed at the window's end was written after the window began.

    A consumer that batches (the projector) or commits per job sees a few records of lag come and go while it
    keeps up; one that falls behind leaves records unconsumed for longer and longer. Unknown ages (a timestamp
    that could not be read) do not count as kept up."""
    began_ms = window[0].at_s * 1000
    lagging = [p.oldest_ms for p in window[-1].partitions if p.records]
    return all(oldest is not None and oldest > began_ms for oldest in lagging)


def _grows(lags: list[int]) -> bool:
    return lags[-1] > lags[0] and all(b >= a for a, b in itertools.pairwise(lags))


def _list(partitions: list[int]) -> str:
    shown = ", ".join(map(str, sorted(partitions)[:8]))
    return shown + (f" and {len(partitions) - 8} more" if len(partitions) > 8 else "")


def as_json(lag: GroupLag) -> dict[str, Any]:
    """What ``voxlog lag --json`` prints for a group (and what a dashboard reads)."""
    return {
        "group": lag.group,
        "topic": lag.topic,
        "members": lag.members,
        "status": lag.status.value,
        "reason": lag.reason,
        "records": lag.records,
        "seconds": round(lag.seconds, 3),
        "per_s": None if lag.per_s is None else round(lag.per_s, 3),
        "drain_s": None if lag.drain_s is None else round(lag.drain_s, 3),
        "window_s": round(lag.window_s, 3),
        "partitions": [
            {
                "partition": p.partition,
                "position": p.position,
                "end": p.end,
                "records": p.records,
                "seconds": round(p.seconds, 3),
                "per_s": None if p.per_s is None else round(p.per_s, 3),
                "drain_s": None if p.drain_s is None else round(p.drain_s, 3),
            }
            for p in lag.partitions
        ],
    }
