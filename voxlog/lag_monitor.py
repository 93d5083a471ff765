"""Consumer lag sampled on a schedule: the groups' latest evaluation, and the Prometheus gauges that export it.

``voxlog lag`` samples in the foreground; the API runs a :class:`LagMonitor` in the
background and serves its latest evaluation at ``/v1/lag`` (the document
``voxlog lag --json`` prints) and as gauges at ``/metrics``.

The application's layer of the four lag modules: it joins the Kafka reader (:mod:`foundation.kafka_lag`)
and the projector's positions in PostgreSQL to the rules (:mod:`foundation.lag_rules`), for the API and for
the command (:mod:`voxlog.lag_cli`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import asyncpg
import structlog

from foundation.db import DATABASE_OUTAGES
from foundation.errors import BrokerUnavailable
from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import synth_group
from foundation.kafka_lag import LagReader
from foundation.lag_rules import GroupLag, Sample, Status, as_json, evaluate
from foundation.metrics import (
    CONSUMER_GROUP_DRAIN_SECONDS,
    CONSUMER_GROUP_LAG_RECORDS,
    CONSUMER_GROUP_LAG_SECONDS,
    CONSUMER_GROUP_STATUS,
    CONSUMER_LAG_RECORDS,
    CONSUMER_LAG_SECONDS,
)
from foundation.outages import Outage
from projections.positions import owed_by_model, projector_positions

log = structlog.get_logger("voxlog.lag")

PROJECTOR_PREFIX = "projector:"
STALL_AFTER_S: Final = 120.0
"""A group with lag none of whose partitions moved for this long is STALL: longer than a long job (a synthesis
group commits after each), so that a worker busy with one is not taken for a stopped one."""


@dataclass(frozen=True)
class Consumers:
    """Whose lag to sample: the synthesis groups (by name prefix) and one projector (by its offsets' key)."""

    topic: str
    synth_group: str
    projector_name: str
    dlq_topic: str


async def sample_all(reader: LagReader, pool: asyncpg.Pool, consumers: Consumers) -> list[Sample]:
    """One sample of every synthesis group, with the jobs it owes, and of the projector (the projector, and
    what the groups owe, left out while PostgreSQL is down)."""
    samples = [await reader.group_sample(group) for group in await reader.groups(consumers.synth_group + ".")]
    try:
        owed = await owed_by_model(pool)
        positions = await projector_positions(pool, consumers.projector_name, consumers.topic)
    except DATABASE_OUTAGES:
        return samples
    by_group = {synth_group(consumers.synth_group, *model): jobs for model, jobs in owed.items()}
    samples = [dataclasses.replace(sample, owed=by_group.get(sample.group, 0)) for sample in samples]
    return [*samples, await reader.sample(PROJECTOR_PREFIX + consumers.projector_name, positions, None)]


async def dead_letters(reader: LagReader, topic: str) -> int | None:
    """The dead-letter topic's size; None when it cannot be read (lag is shown without it)."""
    try:
        return await reader.records_in(topic)
    except BrokerUnavailable as exc:
        log.warning("the dead-letter topic cannot be read", error=str(exc))
        return None


class Windows:
    """The recent samples of each group, as long as the rules need them (half again the stall time)."""

    def __init__(self, stall_after_s: float) -> None:
        self._stall_after_s = stall_after_s
        self._keep_s = stall_after_s * 1.5
        self._samples: dict[str, deque[Sample]] = {}

    def add(self, samples: list[Sample]) -> list[GroupLag]:
        for sample in samples:
            window = self._samples.setdefault(sample.group, deque())
            window.append(sample)
            while window[-1].at_s - window[0].at_s > self._keep_s and len(window) > 2:
                window.popleft()
        current = {s.group for s in samples}
        for gone in set(self._samples) - current:
            del self._samples[gone]
        return [evaluate(list(w), self._stall_after_s) for _, w in sorted(self._samples.items())]


def document(lags: list[GroupLag], dead_letters: int | None, error: str | None = None) -> dict[str, Any]:
    """What ``/v1/lag`` answers and ``voxlog lag --json`` prints."""
    return {
        "at": datetime.now(UTC).isoformat(),
        "groups": [as_json(g) for g in lags],
        "dead_letters": dead_letters,
        "error": error,
    }


def export(lags: list[GroupLag]) -> None:
    """The evaluation as gauges (a group or partition that is gone keeps its last value until it returns)."""
    for g in lags:
        CONSUMER_GROUP_LAG_RECORDS.labels(g.group).set(g.records)
        CONSUMER_GROUP_LAG_SECONDS.labels(g.group).set(g.seconds)
        CONSUMER_GROUP_DRAIN_SECONDS.labels(g.group).set(math.nan if g.drain_s is None else g.drain_s)
        for status in Status:
            CONSUMER_GROUP_STATUS.labels(g.group, status.value).set(1 if g.status is status else 0)
        for p in g.partitions:
            CONSUMER_LAG_RECORDS.labels(g.group, str(p.partition)).set(p.records)
            CONSUMER_LAG_SECONDS.labels(g.group, str(p.partition)).set(p.seconds)


class LagMonitor:
    """Samples every ``interval_s`` until ``stop``; ``latest`` is the last evaluation (``producers.ports.LagView``)."""

    def __init__(
        self, kafka: KafkaAccess, pool: asyncpg.Pool, consumers: Consumers, interval_s: float, stall_after_s: float
    ) -> None:
        self._kafka = kafka
        self._pool = pool
        self._consumers = consumers
        self._interval_s = interval_s
        self._windows = Windows(stall_after_s)
        self._latest = document([], None, "no sample yet")

    def latest(self) -> dict[str, Any]:
        return self._latest

    async def run(self, stop: asyncio.Event) -> None:
        outage = Outage("Kafka (consumer lag)")
        while not stop.is_set():
            try:
                async with LagReader(self._kafka, self._consumers.topic) as reader:
                    while not stop.is_set():
                        lags = self._windows.add(await sample_all(reader, self._pool, self._consumers))
                        dead = await dead_letters(reader, self._consumers.dlq_topic)
                        outage.recovered()
                        export(lags)
                        self._latest = document(lags, dead)
                        await _pause(stop, self._interval_s)
            except BrokerUnavailable as exc:
                outage.failed(exc)
                self._latest = {**self._latest, "error": f"Kafka: {exc}"}
                await _pause(stop, outage.wait_s(self._interval_s))


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):  # the interval passed without a stop
        await asyncio.wait_for(stop.wait(), seconds)
