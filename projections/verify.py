"""``voxlog verify``: the invariants of voxlog, checked over the log, the projection and the blob store.

1. The projection is a fold of the log: every job's state and attempt in
   ``jobs`` are what ``contracts.job_state.fold`` makes of the log's events,
   and every job queued in the log is in the projection.
2. At most one effective completion per job: of a job's ``JobCompleted``
   events, at most one is applied by the fold (the rest are fenced).
3. A completed job has its audio: segments contiguous from 0 up to its
   segment count (the source job's, for a cache hit), and every blob exists
   with the sha256 its event recorded.
4. No fenced audio is served: every segment row belongs to its job's current
   attempt.
5. With ``settled``, every job is terminal: nothing is stuck or lost in flight.

The log is read up to its end offsets as they were when the check began, and
the projection is first given time to catch up with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import asyncpg
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from contracts import TERMINAL_STATES, DecodeError, JobCompleted, JobEvent, JobState, JobStatus, decode_event
from contracts.job_state import Fenced, transition
from foundation.errors import BrokerUnavailable
from foundation.kafka import wait_for_partitions
from foundation.kafka_access import KafkaAccess
from projections.errors import ProjectionError

MAX_EXAMPLES = 10


class VerifyError(ProjectionError):
    """The log or the projection could not be read for verification."""


@dataclass
class Check:
    name: str
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.name}"
        shown = "; ".join(self.violations[:MAX_EXAMPLES])
        more = f" (and {len(self.violations) - MAX_EXAMPLES} more)" if len(self.violations) > MAX_EXAMPLES else ""
        return f"FAIL  {self.name}: {len(self.violations)} violation(s): {shown}{more}"


@dataclass
class Report:
    records: int
    jobs: int
    states: Counter[str]
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    def lines(self) -> list[str]:
        states = ", ".join(f"{count} {state}" for state, count in sorted(self.states.items()))
        return [f"{self.records} records, {self.jobs} jobs ({states or 'none'})", *(c.line() for c in self.checks)]


async def read_log(kafka: KafkaAccess, topic: str) -> list[JobEvent]:
    """Every decodable job event of ``topic``, up to its end offsets now, in each partition's order."""
    consumer = kafka.consumer(enable_auto_commit=False, group_id=None)
    await kafka.start(consumer, f"cannot read {topic}")
    try:
        partitions = await _partitions(consumer, topic)
        consumer.assign(partitions)
        beginnings, ends = await consumer.beginning_offsets(partitions), await consumer.end_offsets(partitions)
        pending = {tp for tp in partitions if beginnings[tp] < ends[tp]}
        for tp in pending:
            consumer.seek(tp, beginnings[tp])
        events: list[JobEvent] = []
        while pending:
            batch = await consumer.getmany(*pending, timeout_ms=1000)
            for tp, records in batch.items():
                for record in records:
                    # An undecodable record is in the DLQ; it never reached the projection either.
                    if record.offset < ends[tp]:
                        with contextlib.suppress(DecodeError):
                            events.append(decode_event(record.value))
            pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
        return events
    finally:
        await consumer.stop()


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> list[TopicPartition]:
    try:
        return await wait_for_partitions(consumer, topic, within_s=10)
    except BrokerUnavailable as exc:
        raise VerifyError(str(exc)) from exc


async def wait_caught_up(
    conn: asyncpg.Connection, kafka: KafkaAccess, topic: str, projector: str, within_s: float
) -> bool:
    """Whether the projector applied the log up to its current end within ``within_s``."""
    consumer = kafka.consumer(enable_auto_commit=False, group_id=None)
    await kafka.start(consumer, f"cannot read {topic}")
    try:
        ends = await consumer.end_offsets(await _partitions(consumer, topic))
    finally:
        await consumer.stop()
    deadline = time.monotonic() + within_s
    while True:
        rows = await conn.fetch(
            "SELECT partition, next_offset FROM projection_offsets WHERE consumer = $1 AND topic = $2",
            projector,
            topic,
        )
        applied = {r["partition"]: r["next_offset"] for r in rows}
        if all(applied.get(tp.partition, 0) >= end for tp, end in ends.items() if end > 0):
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.5)


async def verify(
    kafka: KafkaAccess,
    topic: str,
    url: str,
    schema: str,
    projector: str,
    *,
    settled: bool = False,
    wait_s: float = 60.0,
) -> Report:
    try:
        conn = await asyncpg.connect(url, server_settings={"search_path": schema}, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise VerifyError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        caught_up = await wait_caught_up(conn, kafka, topic, projector, wait_s)
        events = await read_log(kafka, topic)
        jobs = {r["job_id"]: r for r in await conn.fetch("SELECT * FROM jobs")}
        segments = await conn.fetch("SELECT job_id, segment_index, attempt, audio_sha256, audio_uri FROM segments")
    finally:
        await conn.close()
    lag = Check("the projection has applied the log")
    if not caught_up:
        lag.violations.append(f"projector {projector!r} is behind the log's end after {wait_s:.0f}s")
    fold_check, completions = _fold_checks(events, jobs)
    checks = [
        lag,
        fold_check,
        completions,
        await asyncio.to_thread(_audio_check, jobs, segments),
        _fenced_audio_check(jobs, segments),
    ]
    if settled:
        live = Check("every job is terminal")
        live.violations = [
            f"{job_id} is {row['state']}" for job_id, row in jobs.items() if row["state"] not in _TERMINAL
        ]
        checks.append(live)
    states = Counter(str(row["state"]) for row in jobs.values())
    return Report(len(events), len(jobs), states, checks)


_TERMINAL = {state.value for state in TERMINAL_STATES}


def _fold_checks(events: list[JobEvent], jobs: dict[uuid.UUID, asyncpg.Record]) -> tuple[Check, Check]:
    folded: dict[uuid.UUID, JobStatus] = {}
    applied_completions: Counter[uuid.UUID] = Counter()
    for event in events:
        outcome = transition(folded.get(event.job_id), event)
        if isinstance(outcome, Fenced):
            continue
        folded[event.job_id] = outcome
        if isinstance(event, JobCompleted):
            applied_completions[event.job_id] += 1
    fold = Check("the projection is a fold of the log")
    for job_id, status in folded.items():
        row = jobs.get(job_id)
        if row is None:
            fold.violations.append(f"{job_id} is in the log ({status.state}) but not in the projection")
        elif (row["state"], row["attempt"]) != (status.state.value, status.attempt):
            fold.violations.append(
                f"{job_id}: projection {row['state']}/{row['attempt']}, log {status.state}/{status.attempt}"
            )
    fold.violations += [f"{job_id} is in the projection but not in the log" for job_id in jobs.keys() - folded.keys()]
    once = Check("at most one effective completion per job")
    once.violations = [f"{job_id} completed {n} times" for job_id, n in applied_completions.items() if n > 1]
    return fold, once


def _audio_check(jobs: dict[uuid.UUID, asyncpg.Record], segments: list[asyncpg.Record]) -> Check:
    check = Check("completed jobs have all their audio, every blob with its sha256")
    by_job: dict[uuid.UUID, list[asyncpg.Record]] = {}
    for row in segments:
        by_job.setdefault(row["job_id"], []).append(row)
    digests: dict[str, str | None] = {}
    for job_id, job in jobs.items():
        if job["state"] != JobState.COMPLETED.value:
            continue
        source = job["source_job_id"] or job_id
        rows = sorted(by_job.get(source, []), key=lambda r: r["segment_index"])
        indexes = [r["segment_index"] for r in rows]
        if indexes != list(range(job["segment_count"] or 0)):
            check.violations.append(f"{job_id}: segments {indexes}, expected 0..{(job['segment_count'] or 0) - 1}")
            continue
        for row in rows:
            path = Path(unquote(urlparse(row["audio_uri"]).path))
            if str(path) not in digests:
                digests[str(path)] = _sha256(path)
            if digests[str(path)] != row["audio_sha256"]:
                check.violations.append(f"{job_id} segment {row['segment_index']}: blob missing or altered ({path})")
    return check


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _fenced_audio_check(jobs: dict[uuid.UUID, asyncpg.Record], segments: list[asyncpg.Record]) -> Check:
    check = Check("no segment of a fenced attempt is served")
    for row in segments:
        job = jobs.get(row["job_id"])
        if job is not None and row["attempt"] != job["attempt"]:
            check.violations.append(
                f"{row['job_id']} segment {row['segment_index']} is of attempt {row['attempt']}, "
                f"the job's is {job['attempt']}"
            )
    return check
