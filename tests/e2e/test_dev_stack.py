"""`voxlog dev up|status|down` as a user runs them, and the broker's durability across SIGKILL."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

from contracts import decode_event
from foundation.kafka import KafkaEventPublisher
from foundation.kafka_access import KafkaAccess
from infra.processes import wait_gone
from projections.migrations import drop_schema
from tests.support.cli import voxlog
from tests.support.events import one_of_each
from tests.support.kafka import read_topic
from tests.support.stack import free_port

ROOT = Path(__file__).resolve().parents[2]


async def test_killed_broker_comes_back_with_every_record(stack, tmp_path):
    kafka_port = free_port()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    env = {
        **os.environ,
        "VOXLOG_DEV_HOME": str(tmp_path / "stack"),
        "VOXLOG_DEV_KAFKA_PORT": str(kafka_port),
        "VOXLOG_DEV_KAFKA_CONTROLLER_PORT": str(free_port()),
        "VOXLOG_DATABASE_URL": stack.database_url,  # an existing server: no second cluster
        "VOXLOG_DATABASE_SCHEMA": schema,
        "VOXLOG_DEV_API_PORT": str(free_port()),
        "VOXLOG_DEV_WORKERS": "0",  # the pipeline has its own tests; here the broker is the subject
    }
    kafka = KafkaAccess(f"127.0.0.1:{kafka_port}")
    try:
        up = voxlog(env, "dev", "up")
        assert up.returncode == 0, up.stderr
        assert "voxlog.jobs.v1 (created)" in up.stdout
        status = voxlog(env, "dev", "status")
        assert status.returncode == 0, status.stdout
        states = {line.split()[0]: line.split()[1] for line in status.stdout.splitlines()}
        assert states == {"kafka": "up", "postgres": "up", "projector": "up", "sweeper": "up", "api": "up"}

        events = [event for i in range(30) for event in one_of_each(f"Durable sentence {i}.")]
        async with KafkaEventPublisher(kafka, "voxlog.jobs.v1") as publisher:
            positions = {event.event_id: await publisher.publish(event) for event in events}

        pid = int((tmp_path / "stack" / "kafka" / "broker.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 30)
        down = voxlog(env, "dev", "status")
        assert down.returncode == 1
        assert down.stdout.splitlines()[0].split()[:2] == ["kafka", "down"]

        again = voxlog(env, "dev", "up")
        assert again.returncode == 0, again.stderr
        assert "voxlog.jobs.v1 (exists)" in again.stdout

        records = await read_topic(kafka, "voxlog.jobs.v1", expected=len(events), within_s=60)
        assert len(records) == len(events)
        read_back = {decode_event(r.value).event_id: (r.partition, r.offset) for r in records}
        assert read_back == {eid: (p.partition, p.offset) for eid, p in positions.items()}
    finally:
        stopped = voxlog(env, "dev", "down")
        await drop_schema(stack.database_url, schema)
    assert stopped.returncode == 0, stopped.stderr
    after = voxlog(env, "dev", "status")
    assert after.returncode == 1
    assert {line.split()[0]: line.split()[1] for line in after.stdout.splitlines()}["api"] == "down"
