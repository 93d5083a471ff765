"""Archive, then replay: the archive and the topic together equal the topic alone, even once the topic let go."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from aiokafka.admin import RecordsToDelete
from aiokafka.structs import TopicPartition

from contracts import JobEvent, encode_event, event_headers, record_key, utc_now
from foundation.kafka_access import KafkaAccess
from projections.archive import MANIFEST
from projections.archive_export import archive_before
from projections.migrations import drop_schema
from projections.rebuild import compare
from projections.replay import replay_into
from projections.replay_read import Limit, ReplayError
from tests.support.job_logs import _Builder

TTL = timedelta(minutes=10)


def jobs(first: int, count: int) -> list[JobEvent]:
    events: list[JobEvent] = []
    for n in range(first, first + count):
        job = _Builder(uuid.UUID(int=1000 + n), request_text=f"Archived job {n % 7}.")
        events += [job.queued(), job.claimed(1), job.segment(1, 0)]
        events += [job.released(1), job.claimed(2), job.segment(2, 0)] if n % 5 == 0 else []
        events.append(job.completed(events[-1].attempt, 1))
    return events


async def publish(kafka: KafkaAccess, topic: str, events: list[JobEvent], poison: bool = False) -> None:
    producer = kafka.producer(acks="all")
    await producer.start()
    try:
        for e in events:
            await producer.send_and_wait(topic, encode_event(e), key=record_key(e), headers=event_headers(e))
        if poison:  # a record no decoder reads: the archive keeps its bytes, replay skips it as the projector did
            await producer.send_and_wait(topic, b"\xff{not json", key=b"poison")
    finally:
        await producer.stop()


@pytest_asyncio.fixture
async def schemas(stack) -> AsyncIterator[Callable[[], str]]:
    made: list[str] = []

    def fresh() -> str:
        made.append(f"a_{uuid.uuid4().hex[:14]}")
        return made[-1]

    yield fresh
    for name in made:
        await drop_schema(stack.database_url, name)


async def test_archive_then_replay_equals_replay_from_the_topic_alone_and_refuses_a_damaged_archive(
    stack, topics, schemas, tmp_path
):
    kafka, names = topics.kafka, (topics.jobs, topics.settings.control_topic)
    early, late = jobs(0, 20), jobs(20, 20)
    await publish(kafka, topics.jobs, early, poison=True)
    moment = utc_now()
    await publish(kafka, topics.jobs, late)
    archive = tmp_path / "archive"
    first = await archive_before(kafka, topics.jobs, archive, moment)
    conn = await asyncpg.connect(stack.database_url)

    async def replay(archived: Path | None) -> str:
        name = schemas()
        await replay_into(conn, name, kafka, names, TTL, Limit(), lambda *_: None, archive=archived)
        return name

    try:
        assert len(early) < first.records < len(early) + 1 + len(late), "the records before the moment, not after"
        from_topic = await replay(None)
        assert await compare(conn, from_topic, await replay(archive), ("replay", "replay")) == []

        # Retention lets go of everything archived: the topic alone is now incomplete, the archive makes it whole.
        admin = kafka.admin()
        await admin.start()
        try:
            ends = {TopicPartition(topics.jobs, p): RecordsToDelete(end) for p, end in first.ends.items()}
            await admin.delete_records(ends, timeout_ms=10_000)
        finally:
            await admin.close()
        assert await compare(conn, from_topic, await replay(None), ("replay", "replay")) != []
        assert await compare(conn, from_topic, await replay(archive), ("replay", "replay")) == []

        later = await archive_before(kafka, topics.jobs, archive, utc_now())
        assert later.records > 0, "a second run adds what came after the first"
        assert await compare(conn, from_topic, await replay(archive), ("replay", "replay")) == []

        damaged = tmp_path / "damaged"
        shutil.copytree(archive, damaged)
        victim = damaged / first.files[0].file
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        with pytest.raises(ReplayError, match=f"{first.files[0].file} does not match its checksum"):
            await replay(damaged)

        gapped = tmp_path / "gapped"
        shutil.copytree(archive, gapped)
        manifest = json.loads((gapped / MANIFEST).read_text())
        manifest["files"] = [f for f in manifest["files"] if f["file"] != first.files[0].file]
        (gapped / MANIFEST).write_text(json.dumps(manifest))
        with pytest.raises(ReplayError, match="are neither in the archive nor in the topic"):
            await replay(gapped)
    finally:
        await conn.close()
