"""(g) Replay: the live projector and `voxlog replay` on the same log, events per second.

A log of completed jobs (queued, claimed, completed with its one segment: three events
each) is written straight to a fresh topic. The live projector then applies
it from offset 0, timed until its stored offsets reach the log's end; then
the replay rebuilds the same projection into a fresh schema. The baseline has
no counterpart: a job table keeps no history to rebuild from.

Then the same log is applied again, each time into a fresh schema, by 1, 2
and 4 projector replicas that split the partitions in a consumer group
(``VOXLOG_PROJECTOR_GROUP``, projections.shards). None applies a record
before the group is stable with every replica: the bench holds the schema's
``projection_offsets`` locked until then, so their takeovers wait. The whole
log is timed from that moment until the stored offsets reach its end.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from datetime import timedelta
from typing import Any, Final

import asyncpg

from bench.errors import BenchError
from bench.scenarios import Context
from contracts import (
    AudioRef,
    JobClaimed,
    JobClaimedPayload,
    JobCompleted,
    JobCompletedPayload,
    JobEvent,
    JobQueued,
    JobQueuedPayload,
    Producer,
    SegmentProducedPayload,
    SynthesisRequest,
    TextSpan,
    encode_event,
    event_headers,
    job_event,
    record_key,
    utc_now,
)
from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import wait_group_stable
from foundation.settings import TopicSettings
from infra.apps import AppProcesses, AppSpec
from infra.processes import free_port
from projections.migrations import drop_schema, migrate_database
from projections.replay import replay_into
from projections.replay_read import Limit
from voxlog.devstack import isolated_env
from voxlog.topics import ensure_topics, topic_specs

PRODUCER = Producer(service="bench", instance="replay")
REPLICAS: Final = (1, 2, 4)


def job_events(i: int) -> list[JobEvent]:
    request = SynthesisRequest(
        text=f"Replayed job {i}.", voice="bench_tone", speed=1.0, lang="en-us", engine="bench-sleep",
        model_version="sleep-0ms", format="wav", sample_rate=24000,
    )  # fmt: skip
    job, fp, now, sha = uuid.uuid4(), request.fingerprint(), utc_now(), f"{i:064x}"
    claim = JobClaimedPayload(
        worker_id="w", device="cpu", engine="bench-sleep", model_version="sleep-0ms", host="bench"
    )
    segment = SegmentProducedPayload(
        index=0, span=TextSpan(start=0, end=len(request.text), text=request.text),
        audio=AudioRef(sha256=sha, uri=f"file:///blobs/{sha}.wav"), duration_ms=1000, sample_rate=24000,
        byte_length=48044,
    )  # fmt: skip
    queued = JobQueuedPayload(request=request, submitted_at=now)
    # As a worker records a one-segment job: its segment rides in its completion (JobCompleted 3).
    completed = JobCompletedPayload(segment_count=1, total_duration_ms=1000, segment=segment)
    return [
        job_event(JobQueued, job, fp, 0, PRODUCER, queued, at=now),
        job_event(JobClaimed, job, fp, 1, PRODUCER, claim, at=now),
        job_event(JobCompleted, job, fp, 1, PRODUCER, completed, at=now),
    ]


async def _publish(kafka: KafkaAccess, topic: str, jobs: int) -> int:
    producer = kafka.producer(acks="all", linger_ms=5, max_batch_size=256 * 1024)
    await producer.start()
    try:
        sent = [
            await producer.send(topic, encode_event(e), key=record_key(e), headers=event_headers(e))
            for i in range(jobs)
            for e in job_events(i)
        ]
        await asyncio.gather(*sent)
        return len(sent)
    finally:
        await producer.stop()


async def replay_speed(ctx: Context) -> dict[str, Any]:
    jobs = ctx.profile.replay_jobs
    tag = f"rp_{uuid.uuid4().hex[:10]}"
    topics = TopicSettings(jobs_topic=f"{tag}.jobs", control_topic=f"{tag}.control", dlq_topic=f"{tag}.dlq")
    await ensure_topics(ctx.kafka, topic_specs(topics))
    await migrate_database(ctx.database_url, tag)
    ctx.say(f"(g) replay: writing {jobs} jobs ({4 * jobs} events) to the log")
    events = await _publish(ctx.kafka, topics.jobs_topic, jobs)
    home = ctx.home / tag
    processes = AppProcesses(home)
    env = isolated_env(ctx.kafka, ctx.database_url, tag, topics, home, free_port())
    ctx.say("(g) replay: the live projector applies it")
    processes.start(
        AppSpec("projector", [sys.executable, "-m", "voxlog.cli", "--log-level", "WARNING", "projector"], env)
    )
    try:
        # Timed from its first applied batch: the process's start (imports, connections) is not projection.
        first, started = await _until_applied(ctx.database_url, tag, f"projector-{tag}", 1, within_s=120)
        _, finished = await _until_applied(ctx.database_url, tag, f"projector-{tag}", events, within_s=600)
        live_s, live_events = finished - started, events - first
    finally:
        processes.stop("projector", timeout=30)
    ctx.say(f"    {live_events / live_s:,.0f} events/s")
    ctx.say("(g) replay: voxlog replay rebuilds it")
    conn = await asyncpg.connect(ctx.database_url)
    try:
        stats = await replay_into(
            conn, f"{tag}_replay", ctx.kafka, (topics.jobs_topic, topics.control_topic), timedelta(minutes=10),
            Limit(), lambda done, total, elapsed: None,
        )  # fmt: skip
    finally:
        await conn.close()
        if ctx.drop_data:
            await drop_schema(ctx.database_url, tag)
            await drop_schema(ctx.database_url, f"{tag}_replay")
    ctx.say(f"    {stats.events_per_s:,.0f} events/s")
    shards = []
    for replicas in REPLICAS:
        ctx.say(f"(g) replay: {replicas} projector replica(s) in one group apply it")
        shards.append(await _sharded(ctx, topics, events, f"{tag}_x{replicas}", replicas))
        rate = shards[-1]["events_per_s"]
        ctx.say(f"    {rate:,.0f} events/s" if rate is not None else "    applied before the group was stable")
    return {
        "shards": shards,
        "jobs": jobs,
        "events": events,
        "live_s": live_s,
        "live_events_per_s": live_events / live_s,
        "replay_s": stats.read_s + stats.write_s,
        "replay_read_s": stats.read_s,
        "replay_write_s": stats.write_s,
        "replay_events_per_s": stats.events_per_s,
    }


async def _sharded(ctx: Context, topics: TopicSettings, events: int, schema: str, replicas: int) -> dict[str, Any]:
    """The log applied by ``replicas`` projector processes of one group, into a fresh schema."""
    await migrate_database(ctx.database_url, schema)
    home = ctx.home / schema
    processes = AppProcesses(home)
    group, name = f"projector-{schema}", f"projector-{schema}"
    env = {
        **isolated_env(ctx.kafka, ctx.database_url, schema, topics, home, free_port()),
        "VOXLOG_PROJECTOR_GROUP": group,
    }
    argv = [sys.executable, "-m", "voxlog.cli", "--log-level", "WARNING", "projector"]
    names = [f"projector-{i}" for i in range(replicas)]
    holder = await asyncpg.connect(ctx.database_url, server_settings={"search_path": schema})
    try:
        hold = holder.transaction()
        await hold.start()
        # Every replica's takeover waits for this lock: none applies a record before all have their share.
        await holder.execute("LOCK TABLE projection_offsets IN ACCESS EXCLUSIVE MODE")
        for replica in names:
            processes.start(AppSpec(replica, argv, env))
        await wait_group_stable(ctx.kafka, group, replicas, within_s=120)
        started = time.monotonic()
        await hold.commit()
        before = await _applied(ctx.database_url, schema, name)
        _, finished = await _until_applied(ctx.database_url, schema, name, events, within_s=600)
    finally:
        await holder.close()
        for replica in names:
            processes.stop(replica, timeout=30)
        if ctx.drop_data:
            await drop_schema(ctx.database_url, schema)
    timed = events - before
    return {
        "replicas": replicas,
        "events": timed,
        "seconds": finished - started,
        "events_per_s": timed / (finished - started) if timed else None,
    }


async def _applied(url: str, schema: str, projector: str) -> int:
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    try:
        return int(await conn.fetchval(_APPLIED, projector))
    finally:
        await conn.close()


_APPLIED = "SELECT coalesce(sum(next_offset), 0) FROM projection_offsets WHERE consumer = $1 AND topic LIKE '%.jobs'"


async def _until_applied(url: str, schema: str, projector: str, events: int, within_s: float) -> tuple[int, float]:
    """Once the projector has applied at least ``events`` records: how many, and when."""
    conn = await asyncpg.connect(url, server_settings={"search_path": schema})
    try:
        deadline = time.monotonic() + within_s
        while True:
            applied = await conn.fetchval(_APPLIED, projector)
            if applied >= events:
                return int(applied), time.monotonic()
            if time.monotonic() > deadline:
                raise BenchError(f"the projector applied {applied} of {events} events in {within_s:.0f}s")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
