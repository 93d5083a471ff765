"""Share groups (KIP-932, "queues for Kafka") against a classic consumer group, on the real broker.

The measurements behind docs/adr/0001-work-distribution.md. On fresh topics of one broker (started
here as ``voxlog dev up`` configures it, unless ``--bootstrap`` names one) it measures:

- **balance**: 8 workers in separate processes, each "synthesizing" a record by sleeping 200 ms,
  over a backlog of 320 records keyed by random fingerprints. A classic consumer group (each
  member owns its partitions, commits after each record) against share groups (one record per
  poll, acknowledged explicitly), on topics of 16, 2 and 1 partitions, with the backlog written as
  the producer batches it or one record per batch (a share consumer acquires whole batches), and
  with mixed job lengths (every 10th takes 1 s: head-of-line blocking). Per-worker counts, wall
  time, and efficiency: the ideal time (the work / workers) over the wall time from the first
  record produced to the last done.
- **redelivery**: a share consumer acquires records and is SIGKILLed (its connection closes), or
  SIGSTOPped (it hangs, connection open, until its acquisition lock expires): when its records
  come back to another member, and with what delivery count; one of them is then RELEASEd (a
  retry) and comes back with the next count. The SIGSTOPped member is let go on afterwards and
  acknowledges the records it no longer holds: what a zombie is told.
- **per-record cost**: one consumer reading a backlog with zero processing: records/s, and CPU
  seconds per 1,000 records of the consumer process and of the broker, for a classic consumer and a
  share consumer, in bulk (polls of up to 500) and one record per poll (as a synthesis worker).

Prints a JSON summary and writes it to ``bench/results/share_groups-<date>.json``. Every wait has a
deadline; about 3 minutes on 2 cores. ``--only`` and ``--balance`` run parts of it. Needs the
``sharegroups`` extra (confluent-kafka >= 2.15).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing as mp
import os
import platform
import queue
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.context import SpawnProcess
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any, Final, Literal

try:
    import confluent_kafka
    from confluent_kafka import AcknowledgeType, Consumer, Message, Producer, ShareConsumer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )
except ImportError as exc:  # the optional extra is not installed
    raise SystemExit("bench.share_groups needs confluent-kafka>=2.15: pip install -e '.[sharegroups]'") from exc

ROOT: Final = Path(__file__).resolve().parent.parent
SPAWN: Final = mp.get_context("spawn")  # librdkafka's threads do not survive a fork: children start afresh
EventQueue = Any  # a multiprocessing Queue of tuples; its generic form is not subscriptable at runtime

Kind = Literal["share", "classic"]
PARTS: Final = ("balance", "redelivery", "cost")
DEFAULT_BALANCE: Final = (
    "classic:16:batched",
    "share:16:batched",
    "share:16:single",
    "share:2:single",
    "share:1:single",
    "classic:16:batched:mixed",
    "share:1:single:mixed",
)
LONG_EVERY: Final = 10
LONG_FACTOR: Final = 5.0


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to know; pickled into a spawned child."""

    bootstrap: str
    kind: Kind
    group: str
    topic: str
    work_s: float = 0.0
    long_every: int = 0  # mixed lengths: every long_every-th record (by id) takes long_s instead of work_s
    long_s: float = 0.0
    max_poll_records: int = 1
    release_first_redelivery: bool = False  # redelivery: RELEASE the first record delivered twice, once
    hold_s: float = 0.0  # redelivery: acquire, report, sit this long (SIGKILLed or SIGSTOPped meanwhile), then ack
    report_each: bool = True  # per-record cost: only per-poll reports, so that reporting costs no CPU per record

    def work_for(self, rid: int) -> float:
        return self.long_s if self.long_every and rid % self.long_every == 0 else self.work_s


# -- the worker processes -------------------------------------------------------------------------


def _client(spec: WorkerSpec) -> dict[str, Any]:
    return {"bootstrap.servers": spec.bootstrap, "group.id": spec.group, "log_level": 3}


def _polls(
    poll: Callable[[], Iterable[Message]], wid: int, events: EventQueue, stop: EventType, cpu0: float
) -> Iterator[tuple[list[Message], float]]:
    """Each non-empty poll's good records and when it returned, reported; until ``stop`` or the parent is gone."""
    parent, ready = os.getppid(), False
    while not stop.is_set() and os.getppid() == parent:  # an orphan stops too
        batch = poll()
        now = time.monotonic()
        if not ready:
            events.put(("ready", wid, now))
            ready = True
        records = [m for m in batch if m.error() is None]
        if records:
            events.put(("poll", wid, len(records), now, time.process_time() - cpu0))
            yield records, now


def share_worker(spec: WorkerSpec, wid: int, events: EventQueue, stop: EventType) -> None:
    """A member of share group ``spec.group``: takes records, works on each, acknowledges it."""
    consumer = ShareConsumer(
        {**_client(spec), "share.acknowledgement.mode": "explicit", "max.poll.records": spec.max_poll_records}
    )
    cpu0 = time.process_time()
    events.put(("subscribed", wid, time.monotonic(), 0.0))
    consumer.subscribe([spec.topic])
    released = False
    try:
        for records, now in _polls(lambda: consumer.poll(0.25), wid, events, stop, cpu0):
            if spec.hold_s:
                events.put(("held", wid, [_rid(m) for m in records], [m.delivery_count() for m in records], now))
                # The parent SIGKILLs or SIGSTOPs this process meanwhile. It must not wait on ``stop``: a
                # process killed inside Event.wait leaves the event's condition expecting it to wake.
                time.sleep(spec.hold_s)
                for m in records:  # a zombie's acknowledgement, once SIGCONT lets it go on
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                errors = consumer.commit_sync(10.0)
                events.put(
                    ("zombie", wid, {f"{tp.partition}": None if e is None else str(e) for tp, e in errors.items()})
                )
                return
            if not spec.report_each:
                for m in records:
                    consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                events.put(("cpu", wid, time.process_time() - cpu0, time.monotonic()))
                continue
            for m in records:
                started = time.monotonic()
                if spec.work_s:
                    time.sleep(spec.work_for(_rid(m)))
                if spec.release_first_redelivery and not released and (m.delivery_count() or 0) >= 2:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                    released = True
                    events.put(("released", wid, _rid(m), m.delivery_count(), time.monotonic()))
                    continue
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                done = time.monotonic()
                events.put(("done", wid, _rid(m), m.partition(), m.delivery_count(), started, done))
            events.put(("cpu", wid, time.process_time() - cpu0, time.monotonic()))
    finally:
        consumer.close()


def classic_worker(spec: WorkerSpec, wid: int, events: EventQueue, stop: EventType) -> None:
    """A member of classic consumer group ``spec.group``: owns its partitions, commits after each record."""
    consumer = Consumer({**_client(spec), "auto.offset.reset": "earliest", "enable.auto.commit": False})

    def assigned(_: Consumer, partitions: list[Any]) -> None:
        events.put(("assigned", wid, sorted(p.partition for p in partitions)))

    def revoked(_: Consumer, partitions: list[Any]) -> None:
        events.put(("assigned", wid, []))

    cpu0 = time.process_time()
    events.put(("subscribed", wid, time.monotonic(), 0.0))
    consumer.subscribe([spec.topic], on_assign=assigned, on_revoke=revoked)
    try:
        for records, _ in _polls(lambda: consumer.consume(spec.max_poll_records, 0.25), wid, events, stop, cpu0):
            if not spec.report_each:  # a bulk reader commits each batch
                consumer.commit(asynchronous=True)
                events.put(("cpu", wid, time.process_time() - cpu0, time.monotonic()))
                continue
            for m in records:  # a worker commits each job
                started = time.monotonic()
                if spec.work_s:
                    time.sleep(spec.work_for(_rid(m)))
                consumer.commit(message=m, asynchronous=True)
                events.put(("done", wid, _rid(m), m.partition(), None, started, time.monotonic()))
    finally:
        consumer.close()


def _rid(message: Message) -> int:
    value = message.value()
    return int(json.loads(value)["i"]) if isinstance(value, bytes) else -1


# -- the parent's side ----------------------------------------------------------------------------


@dataclass
class Pool:
    """Worker processes of one measurement and the queue they report on."""

    specs: list[WorkerSpec]
    events: EventQueue = field(default_factory=SPAWN.Queue)
    stop: EventType = field(default_factory=SPAWN.Event)
    procs: list[SpawnProcess] = field(default_factory=list)

    def start(self, first_wid: int = 0) -> None:
        for wid, spec in enumerate(self.specs, start=first_wid):
            target = share_worker if spec.kind == "share" else classic_worker
            proc = SPAWN.Process(target=target, args=(spec, wid, self.events, self.stop), daemon=True)
            proc.start()
            self.procs.append(proc)

    def next_event(self, deadline: float) -> tuple[Any, ...] | None:
        try:
            event: tuple[Any, ...] = self.events.get(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        except queue.Empty:
            return None
        return event

    def close(self, within_s: float = 20.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + within_s
        for proc in self.procs:
            proc.join(timeout=max(0.1, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=5)


@contextmanager
def pool(specs: list[WorkerSpec]) -> Iterator[Pool]:
    workers = Pool(specs)
    try:
        workers.start()
        yield workers
    finally:
        workers.close()


class Broker:
    """Admin, producer and (when started here) the broker's pid and log, for CPU and features."""

    def __init__(
        self, bootstrap: str, pid: int | None = None, log: Path | None = None, version: str | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.pid = pid
        self.log = log
        self.version = version
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})

    def cpu_s(self) -> float | None:
        if self.pid is None:
            return None
        from bench.cpu import process_seconds

        return process_seconds(self.pid)

    def create_topic(self, partitions: int, prefix: str) -> str:
        name = f"bench.{prefix}.{uuid.uuid4().hex[:8]}"
        futures = self.admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
        futures[name].result(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until metadata knows every partition with a leader
            meta = self.admin.list_topics(topic=name, timeout=5).topics.get(name)
            leaders = [] if meta is None or meta.error is not None else [p.leader for p in meta.partitions.values()]
            if len(leaders) == partitions and min(leaders) >= 0:
                return name
            time.sleep(0.2)
        raise RuntimeError(f"topic {name} has no leaders after 30 s")

    def set_group_config(self, group: str, values: dict[str, str]) -> dict[str, str]:
        """Set group-level configs (share.auto.offset.reset, share.record.lock.duration.ms): returns them read back."""
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in values.items()]
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
        for future in self.admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
        described = self.admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
        found = next(iter(described.values())).result(timeout=30)
        return {k: found[k].value for k in values}

    def produce(
        self, topic: str, ids: Sequence[int], value_bytes: int = 64, linger_ms: int = 5, one_per_batch: bool = False
    ) -> float:
        """Records keyed by random fingerprints, values ``{"i": id}``; returns when the first was handed over.

        A share consumer acquires whole record batches, whatever its max.poll.records (librdkafka's
        preview has no record-limit acquire mode): ``one_per_batch`` writes each record as a batch of its own.
        """
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "linger.ms": linger_ms, "acks": "all"}
        if one_per_batch:
            config |= {"linger.ms": 0, "batch.num.messages": 1}
        producer = Producer(config)
        pad = "x" * max(0, value_bytes - 16)
        started = time.monotonic()
        for i in ids:
            key = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
            producer.produce(topic, key=key, value=json.dumps({"i": i, "p": pad}).encode())
            producer.poll(0)
        if producer.flush(30) != 0:
            raise RuntimeError("the producer could not deliver every record within 30 s")
        return started

    def features(self) -> dict[str, int]:
        """Finalized feature levels from the broker's log (share.version among them), when it was started here."""
        if self.log is None or not self.log.exists():
            return {}
        found = re.findall(r"finalizedFeatures=\{([^}]*)\}", self.log.read_text(errors="replace"))
        return {k.strip(): int(v) for k, v in (kv.split("=") for kv in found[-1].split(","))} if found else {}

    def broker_config(self, names: Sequence[str]) -> dict[str, str]:
        described = self.admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        found = next(iter(described.values())).result(timeout=30)
        return {n: found[n].value for n in names if n in found}


def _wait_ready(workers: Pool, count: int, deadline: float, on_event: Callable[[tuple[Any, ...]], None]) -> None:
    ready: set[int] = set()
    while len(ready) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(ready)} of {count} workers polled before the deadline")
        event = workers.next_event(deadline)
        if event is None:
            continue
        if event[0] == "ready":
            ready.add(event[1])
        on_event(event)


@dataclass(frozen=True)
class BalanceRun:
    kind: Kind
    partitions: int
    one_per_batch: bool
    mixed: bool = False  # every LONG_EVERY-th job takes LONG_FACTOR times as long: head-of-line blocking

    @classmethod
    def parse(cls, text: str) -> BalanceRun:
        """``share:16:single[:mixed]``: kind, partitions, how the backlog is batched (``single`` or
        ``batched``), and whether job lengths are mixed."""
        kind, partitions, batching, *rest = text.split(":")
        if kind not in ("share", "classic") or batching not in ("single", "batched") or rest not in ([], ["mixed"]):
            raise ValueError(f"not KIND:PARTITIONS:single|batched[:mixed]: {text}")
        return cls("share" if kind == "share" else "classic", int(partitions), batching == "single", bool(rest))

    def __str__(self) -> str:
        batching = "single" if self.one_per_batch else "batched"
        return f"{self.kind}:{self.partitions}:{batching}" + (":mixed" if self.mixed else "")


def balance(  # noqa: C901 - listed in pyproject.toml
    broker: Broker, run: BalanceRun, records: int, workers: int, work_s: float, assignment_wait_s: float
) -> dict[str, Any]:
    """A backlog of ``records`` jobs of ``work_s`` each over ``workers`` processes; how evenly they share it."""
    kind, partitions = run.kind, run.partitions
    topic = broker.create_topic(partitions, f"balance-{kind}")
    group = f"bench-balance-{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        broker.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    long_every, long_s = (LONG_EVERY, work_s * LONG_FACTOR) if run.mixed else (0, 0.0)
    spec = WorkerSpec(broker.bootstrap, kind, group, topic, work_s, long_every=long_every, long_s=long_s)
    assignment: dict[int, list[int]] = {}
    done: dict[int, tuple[int, float]] = {}  # record id -> (worker, done at)
    counts: Counter[int] = Counter()
    busy: Counter[int] = Counter()
    repeats = 0
    poll_sizes: list[int] = []

    def note(event: tuple[Any, ...]) -> None:
        nonlocal repeats
        if event[0] == "assigned":
            assignment[event[1]] = event[2]
        elif event[0] == "poll":
            poll_sizes.append(event[2])
        elif event[0] == "done":
            _, wid, rid, _partition, _count, began, at = event
            counts[wid] += 1
            busy[wid] += at - began
            if rid in done:
                repeats += 1
            else:
                done[rid] = (wid, at)

    with pool([spec] * workers) as running:
        start_deadline = time.monotonic() + 90
        _wait_ready(running, workers, start_deadline, note)
        if kind == "classic":  # until every member owns its share: the final assignment, disjoint and complete
            while not _fully_assigned(assignment, workers, partitions):
                if time.monotonic() > start_deadline:
                    raise RuntimeError(f"the classic group never assigned every partition: {assignment}")
                if (event := running.next_event(start_deadline)) is not None:
                    note(event)
        else:  # a member learns its assignment on a heartbeat (share.heartbeat.interval.ms, 5 s)
            assigned_by = time.monotonic() + assignment_wait_s
            while time.monotonic() < assigned_by:
                if (event := running.next_event(assigned_by)) is not None:
                    note(event)
        started = broker.produce(topic, range(records), one_per_batch=run.one_per_batch)
        ideal_s = sum(spec.work_for(i) for i in range(records)) / workers
        deadline = started + ideal_s * 4 + 30
        while len(done) < records and time.monotonic() < deadline:
            if (event := running.next_event(deadline)) is not None:
                note(event)
    if len(done) < records:
        return {
            "kind": kind,
            "partitions": partitions,
            "error": f"{len(done)} of {records} done before the deadline",
            "per_worker": sorted(counts.values(), reverse=True),
            "processed_twice": repeats,
            "max_records_per_poll": max(poll_sizes, default=0),
        }
    wall = max(at for _, at in done.values()) - started
    order = sorted(range(workers), key=lambda w: (counts[w], busy[w]), reverse=True)
    shares = [counts[w] for w in order]
    out: dict[str, Any] = {
        "kind": kind,
        "partitions": partitions,
        "producer_batches": "one record each" if run.one_per_batch else "as the producer fills them (linger.ms=5)",
        "workers": workers,
        "records": records,
        "work_ms": work_s * 1000,
        "long_jobs": f"every {long_every}th takes {long_s * 1000:.0f} ms" if run.mixed else None,
        "wall_s": round(wall, 3),
        "ideal_s": round(ideal_s, 3),
        "efficiency": round(ideal_s / wall, 3),
        "per_worker": shares,
        "per_worker_busy_s": [round(busy[w], 1) for w in order],
        "busiest": shares[0],
        "even_share": records / workers,
        "processed_twice": repeats,
        "max_records_per_poll": max(poll_sizes, default=0),
    }
    if kind == "classic":
        out["partitions_per_worker"] = sorted((len(p) for p in assignment.values()), reverse=True)
    return out


def _fully_assigned(assignment: dict[int, list[int]], workers: int, partitions: int) -> bool:
    owned = [p for parts in assignment.values() for p in parts]
    return (
        len(assignment) == workers
        and all(assignment.values())
        and len(owned) == len(set(owned)) == min(partitions, len(owned))
        and set(owned) == set(range(partitions))
    )


def redelivery(  # noqa: C901 - listed in pyproject.toml
    broker: Broker, fault: Literal["kill", "stop"], records: int, lock_ms: int, assignment_wait_s: float
) -> dict[str, Any]:
    """A member that holds acquired records is SIGKILLed (its connection closes) or SIGSTOPped (it
    hangs with its connection open): when and how its records come back to another member. After a
    SIGSTOP, the member is let go on (SIGCONT) once they came back, and acknowledges them: a zombie."""
    topic = broker.create_topic(1, f"redelivery-{fault}")
    group = f"bench-redelivery-{fault}-{uuid.uuid4().hex[:8]}"
    in_force = broker.set_group_config(
        group, {"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": str(lock_ms)}
    )
    hold_s = lock_ms / 1000 + 5  # past the lock: a SIGSTOPped member acknowledges after it expired
    victim = Pool([WorkerSpec(broker.bootstrap, "share", group, topic, max_poll_records=records, hold_s=hold_s)])
    survivor = Pool([WorkerSpec(broker.bootstrap, "share", group, topic, release_first_redelivery=fault == "kill")])
    held: dict[int, int | None] = {}
    back: dict[int, tuple[int | None, float]] = {}
    released: tuple[int, int | None, float] | None = None
    again: dict[int, tuple[int | None, float]] = {}
    zombie: dict[str, str | None] | None = None
    acquired_at = faulted_at = 0.0
    try:
        victim.start(first_wid=0)
        deadline = time.monotonic() + 60
        _wait_ready(victim, 1, deadline, lambda _: None)
        broker.produce(topic, range(records), linger_ms=50)  # one batch: the victim acquires it in one poll
        while not held and time.monotonic() < deadline:
            event = victim.next_event(deadline)
            if event is not None and event[0] == "held":
                held = dict(zip(event[2], event[3], strict=True))
                acquired_at = event[4]
        if not held:
            return {"fault": fault, "error": "the victim acquired nothing within 60 s"}
        pid = victim.procs[0].pid
        assert pid is not None
        if fault == "stop":
            os.kill(pid, signal.SIGSTOP)
            faulted_at = time.monotonic()
        survivor.start(first_wid=1)
        _wait_ready(survivor, 1, time.monotonic() + 60, lambda _: None)
        time.sleep(assignment_wait_s)  # the survivor's assignment arrives on a heartbeat
        if fault == "kill":
            os.kill(pid, signal.SIGKILL)
            faulted_at = time.monotonic()

        def finished() -> bool:
            if len(back) < len(held):
                return False
            return fault == "stop" or (released is not None and released[0] in again)

        deadline = time.monotonic() + lock_ms / 1000 + 45
        while time.monotonic() < deadline and not finished():
            event = survivor.next_event(deadline)
            if event is None:
                continue
            if event[0] == "done" and event[2] in held:
                target = again if released and event[2] == released[0] else back
                target.setdefault(event[2], (event[4], event[6]))
            elif event[0] == "released":
                released = (event[2], event[3], event[4])
                back.setdefault(event[2], (event[3], event[4]))
        if fault == "stop":
            os.kill(pid, signal.SIGCONT)
            deadline = time.monotonic() + hold_s + 15
            while zombie is None and time.monotonic() < deadline:
                event = victim.next_event(deadline)
                if event is not None and event[0] == "zombie":
                    zombie = event[2]
    finally:
        for proc in victim.procs:
            if proc.is_alive() and proc.pid is not None:
                os.kill(proc.pid, signal.SIGKILL)
        victim.close(within_s=5)
        survivor.close()
    returned = [at for _, at in back.values()]
    out: dict[str, Any] = {
        "fault": "SIGKILL" if fault == "kill" else "SIGSTOP, then SIGCONT once the records came back",
        "lock_duration_ms_in_force": int(in_force["share.record.lock.duration.ms"]),
        "records_held": len(held),
        "delivery_counts_when_held": sorted({c or 0 for c in held.values()}),
        "records_back": len(back),
        "delivery_counts_when_back": sorted({c or 0 for c, _ in back.values()}),
        "fault_after_acquisition_s": round(faulted_at - acquired_at, 3),
        "back_after_acquisition_s": _spread([at - acquired_at for at in returned]),
        "back_after_fault_s": _spread([at - faulted_at for at in returned]),
    }
    if fault == "kill":
        out["release"] = (
            None
            if released is None or released[0] not in again
            else {
                "delivery_count_released": released[1],
                "delivery_count_after": again[released[0]][0],
                "back_after_release_ms": round((again[released[0]][1] - released[2]) * 1000, 1),
            }
        )
    else:
        out["zombie_acknowledgement"] = zombie
    return out


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "max": round(max(values), 3)}


def per_record_cost(
    broker: Broker, kind: Kind, records: int, max_poll_records: int, one_per_batch: bool
) -> dict[str, Any]:
    """One consumer reading a backlog of ``records`` with zero processing: how fast, and the CPU per 1,000
    records of the consumer process and of the broker, from its subscription to the last record handled
    (acknowledged, or its offset committed). Joining the group is in these figures; it is small next to them."""
    topic = broker.create_topic(16, f"cost-{kind}")
    group = f"bench-cost-{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "share":
        broker.set_group_config(group, {"share.auto.offset.reset": "earliest"})
    broker.produce(topic, range(records), value_bytes=200, linger_ms=20, one_per_batch=one_per_batch)
    read = polls = handled = 0
    subscribed: tuple[float, float | None] | None = None  # (at, broker CPU s)
    first_at: float | None = None
    last: tuple[float, float] = (0.0, 0.0)  # (at, consumer CPU s since its subscription)
    broker_cpu_end: float | None = None
    spec = WorkerSpec(broker.bootstrap, kind, group, topic, max_poll_records=max_poll_records, report_each=False)
    with pool([spec]) as running:
        deadline = time.monotonic() + 60 + records / 100
        while handled < records and time.monotonic() < deadline:
            event = running.next_event(deadline)
            if event is None:
                continue
            if event[0] == "subscribed":
                subscribed = (event[2], broker.cpu_s())
            elif event[0] == "poll":
                read += event[2]
                polls += 1
                first_at = event[3] if first_at is None else first_at
            elif event[0] == "cpu":  # the poll before it is handled: acknowledged, or committed
                last = (event[3], event[2])
                handled = read
        broker_cpu_end = broker.cpu_s()
    if subscribed is None or first_at is None or handled < records:
        return {"kind": kind, "error": f"{handled} of {records} records handled before the deadline"}
    wall = last[0] - subscribed[0]
    b0 = subscribed[1]
    return {
        "kind": kind,
        "max_poll_records": max_poll_records,
        "producer_batches": "one record each" if one_per_batch else "as the producer fills them (linger.ms=20)",
        "records": records,
        "polls": polls,
        "wall_s": round(wall, 3),
        "first_records_after_s": round(first_at - subscribed[0], 3),
        "records_per_s": round(records / wall, 1),
        "records_per_s_after_first": round(records / (last[0] - first_at), 1) if last[0] > first_at else None,
        "consumer_cpu_s_per_1000": round(last[1] / records * 1000, 4),
        "broker_cpu_s_per_1000": None
        if b0 is None or broker_cpu_end is None
        else round((broker_cpu_end - b0) / records * 1000, 4),
    }


# -- the run --------------------------------------------------------------------------------------


@contextmanager
def own_broker(say: Callable[[str], None]) -> Iterator[Broker]:
    """One Kafka broker as ``voxlog dev up`` configures it, on free ports, removed afterwards."""
    from foundation.settings import default_cache_root
    from infra.kafka_broker import KafkaBroker, KafkaBrokerConfig
    from infra.processes import free_port

    home = Path(tempfile.mkdtemp(prefix="voxlog-share-groups-"))
    kafka = KafkaBroker(
        KafkaBrokerConfig(
            home=home,
            port=free_port(),
            controller_port=free_port(),
            heap="512m",
            jar_cache=default_cache_root() / "kafka",
        )
    )
    try:
        say(f"starting Kafka under {home}")
        kafka.start()
        asyncio.run(kafka.wait_ready(120))
        jar = next(kafka.jars_dir().glob("kafka_*-*.jar"), None)
        version = jar.stem.rsplit("-", 1)[1] if jar is not None else None
        yield Broker(kafka.config.bootstrap_servers, kafka.pid(), kafka.log_file, version)
    finally:
        say("stopping Kafka")
        kafka.stop(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def run(broker: Broker, args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    results: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "kafka": broker.version,
        "confluent_kafka": confluent_kafka.__version__,
        "librdkafka": confluent_kafka.libversion()[0],
        "broker_features": broker.features(),
        "broker_share_config": broker.broker_config(
            [
                "group.share.record.lock.duration.ms",
                "group.share.min.record.lock.duration.ms",
                "group.share.delivery.count.limit",
                "group.share.heartbeat.interval.ms",
                "group.share.session.timeout.ms",
                "group.share.partition.max.record.locks",
                "group.coordinator.rebalance.protocols",
            ]
        ),
    }
    started = time.monotonic()
    results["balance"] = []
    for spec in args.balance if "balance" in args.only else ():
        say(f"balance: {spec}, {args.workers} workers, {args.records} records")
        found = balance(broker, spec, args.records, args.workers, args.work_ms / 1000, args.assignment_wait_s)
        say(f"    {json.dumps(found)}")
        results["balance"].append(found)
    results["redelivery"] = []
    for fault in ("kill", "stop") if "redelivery" in args.only else ():
        say(f"redelivery: {args.held} records held by a member, then {fault}")
        found = redelivery(broker, fault, args.held, args.lock_ms, args.assignment_wait_s)
        say(f"    {json.dumps(found)}")
        results["redelivery"].append(found)
    results["per_record_cost"] = []
    if "cost" in args.only and broker.pid is not None:  # what the broker burns doing nothing, to set the rest against
        before, at = broker.cpu_s() or 0.0, time.monotonic()
        time.sleep(5)
        results["broker_idle_cpu_s_per_s"] = round(((broker.cpu_s() or 0.0) - before) / (time.monotonic() - at), 4)
    costs: list[tuple[Kind, int, int, bool]] = [
        ("classic", args.cost_records, 500, False),
        ("share", args.cost_records, 500, False),
        ("classic", args.cost_records_single, 1, True),
        ("share", args.cost_records_single, 1, True),
    ]
    for kind, records, max_poll, single in costs if "cost" in args.only else ():
        say(f"per-record cost: {kind}, {records} records, up to {max_poll} per poll")
        found = per_record_cost(broker, kind, records, max_poll, single)
        idle = results.get("broker_idle_cpu_s_per_s")
        if idle is not None and found.get("broker_cpu_s_per_1000") is not None:
            spent = found["broker_cpu_s_per_1000"] * records / 1000 - idle * found["wall_s"]
            found["broker_cpu_s_per_1000_less_idle"] = round(spent / records * 1000, 4)
        say(f"    {json.dumps(found)}")
        results["per_record_cost"].append(found)
    results["duration_s"] = round(time.monotonic() - started, 1)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.share_groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="use this broker instead of starting one (no broker CPU then)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--records", type=int, default=320)
    parser.add_argument("--work-ms", type=float, default=200.0)
    parser.add_argument(
        "--balance",
        type=lambda s: [BalanceRun.parse(r) for r in s.split(",") if r],
        default=[BalanceRun.parse(r) for r in DEFAULT_BALANCE],
        help=f"comma-separated KIND:PARTITIONS:single|batched[:mixed] (default: {','.join(DEFAULT_BALANCE)})",
    )
    parser.add_argument("--assignment-wait-s", type=float, default=8.0, help="share members' wait for their assignment")
    parser.add_argument("--held", type=int, default=5, help="records the SIGKILLed (SIGSTOPped) member holds")
    parser.add_argument("--lock-ms", type=int, default=15000, help="share.record.lock.duration.ms of that group")
    parser.add_argument("--cost-records", type=int, default=20000)
    parser.add_argument("--cost-records-single", type=int, default=2000)
    parser.add_argument(
        "--only",
        type=lambda s: frozenset(s.split(",")),
        default=frozenset(PARTS),
        help=f"comma-separated parts to run, of {', '.join(PARTS)} (default: all)",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    began = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - began:6.1f}s] {message}", file=sys.stderr, flush=True)

    if args.bootstrap:
        results = run(Broker(args.bootstrap), args, say)
    else:
        with own_broker(say) as broker:
            results = run(broker, args, say)
    out = args.out or ROOT / "bench" / "results" / f"share_groups-{results['date'][:19].replace(':', '')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    say(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
