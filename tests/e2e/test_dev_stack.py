"""`voxlog dev up|status|down` as a user runs them, the stack's API key, and the broker's durability across
SIGKILL."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import httpx

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
        "VOXLOG_API_PORT": str(free_port()),  # the API `voxlog dev up` starts
        "VOXLOG_DEV_WORKERS": "0",  # the pipeline has its own tests; here the broker is the subject
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # where `dev up` saves its key, not the user's
    }
    env.pop("VOXLOG_API_KEY", None)
    env.pop("VOXLOG_AUTH", None)  # the stack as a user gets it: keys required
    kafka = KafkaAccess(f"127.0.0.1:{kafka_port}")
    try:
        up = voxlog(env, "dev", "up")
        assert up.returncode == 0, up.stderr
        assert "voxlog.jobs.v1 (created)" in up.stdout
        status = voxlog(env, "dev", "status")
        assert status.returncode == 0, status.stdout
        states = {line.split()[0]: line.split()[1] for line in status.stdout.splitlines()}
        assert states == {"kafka": "up", "postgres": "up", "projector": "up", "sweeper": "up", "api": "up"}
        key = (tmp_path / "config" / "voxlog" / "api-key").read_text().strip()
        key_id, secret = key[4:16], key[17:]  # vxl_<id>_<secret>
        assert secret not in up.stdout, "the key's secret is never printed (issue 40, item 8)"
        assert f"{key_id} (new, in {tmp_path / 'config' / 'voxlog' / 'api-key'};" in up.stdout
        assert (tmp_path / "config" / "voxlog" / "api-key").stat().st_mode & 0o077 == 0
        api = f"http://127.0.0.1:{env['VOXLOG_API_PORT']}"
        async with httpx.AsyncClient(base_url=api, timeout=30) as client:
            assert (await client.get("/v1/voices")).status_code == 401
            assert (await client.get("/v1/voices", headers={"Authorization": f"Bearer {key}"})).is_success

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
        assert key.split("_")[1] in again.stdout  # the saved key is kept while the projection knows it
        assert (tmp_path / "config" / "voxlog" / "api-key").read_text().strip() == key

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


async def test_regression_dev_down_without_the_variable_stops_the_workers_up_started(stack, tmp_path):
    """`voxlog dev up` with VOXLOG_DEV_WORKERS=2, then `voxlog dev down` without the variable, left worker-1
    running: status and down went by the variable, not by what runs."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("VOXLOG_")},
        "VOXLOG_DEV_HOME": str(tmp_path / "stack"),
        "VOXLOG_DEV_KAFKA_PORT": str(free_port()),
        "VOXLOG_DEV_KAFKA_CONTROLLER_PORT": str(free_port()),
        "VOXLOG_DATABASE_URL": stack.database_url,
        "VOXLOG_DATABASE_SCHEMA": schema,
        "VOXLOG_API_PORT": str(free_port()),
        "VOXLOG_ENGINE": "bench-sleep",  # the workers' model is not the subject
        "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    }
    without = {key: value for key, value in env.items() if key != "VOXLOG_DEV_WORKERS"}
    try:
        up = voxlog({**env, "VOXLOG_DEV_WORKERS": "2"}, "dev", "up")
        assert up.returncode == 0, up.stdout + up.stderr
        status = voxlog(without, "dev", "status")
        assert status.returncode == 0, status.stdout
        rows = {line.split()[0]: line.split() for line in status.stdout.splitlines()}
        assert (rows["worker-0"][1], rows["worker-1"][1]) == ("up", "up"), status.stdout
        workers = [int(rows[name][rows[name].index("pid") + 1]) for name in ("worker-0", "worker-1")]
        down = voxlog(without, "dev", "down")
        assert down.returncode == 0, down.stderr
        assert [pid for pid in workers if not wait_gone(pid, 30)] == [], "every worker up started is stopped"
        after = voxlog(without, "dev", "status")
        states = {line.split()[0]: line.split()[1] for line in after.stdout.splitlines()}
        assert (states["worker-0"], states["worker-1"], states["api"]) == ("down", "down", "down")
    finally:
        voxlog({**env, "VOXLOG_DEV_WORKERS": "2"}, "dev", "down")
        await drop_schema(stack.database_url, schema)
