"""`voxlog dev status` and `dev down` go by the processes the dev stack started (voxlog.devstack, infra.apps).

The processes here are stand-ins (a sleeping interpreter under each name the dev stack uses): the subject is
which of them status shows and down stops, not what they run.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from foundation.settings import DevSettings
from infra.apps import AppProcesses, AppSpec
from infra.processes import free_port, pid_alive
from voxlog import devstack
from voxlog.devstack import app_specs, app_statuses, dev_stack, stop_apps

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.delenv("VOXLOG_DEV_WORKERS", raising=False)

    ports = {"dev_kafka_port": free_port(), "dev_postgres_port": free_port()}  # nothing answers there

    def make(**fields: object) -> DevSettings:
        return DevSettings(dev_home=tmp_path, **ports, **fields)

    yield make
    apps = AppProcesses(tmp_path)  # whatever a failed test left running
    for spec in apps.recorded():
        apps.stop(spec.name, timeout=5)


def start_stand_ins(settings: DevSettings) -> AppProcesses:
    apps = AppProcesses(settings.dev_home)
    for spec in app_specs(settings, dev_stack(settings)):
        apps.start(AppSpec(spec.name, SLEEPER))
    return apps


def test_regression_dev_down_without_the_variable_left_worker_1_running(settings):
    """`voxlog dev up` with VOXLOG_DEV_WORKERS=2, then `voxlog dev down` without it, left worker-1 running."""
    start_stand_ins(settings(dev_workers=2))
    one = settings()  # the variable unset: one worker, as far as the configuration knows
    statuses = asyncio.run(devstack.status(one))[2:]  # after kafka and postgres (down here)
    assert [s.name for s in statuses] == ["projector", "sweeper", "worker-0", "worker-1", "api"]
    pids = {s.name: s.pid for s in statuses}
    assert all(s.up for s in statuses)
    devstack.down(one, purge=False)
    assert [name for name, pid in pids.items() if pid is not None and pid_alive(pid)] == []
    after = asyncio.run(app_statuses(one))
    assert {s.name: s.up for s in after} == dict.fromkeys(pids, False), "what was started is shown, down"


def test_before_anything_started_status_shows_what_up_would_start(settings):
    statuses = asyncio.run(app_statuses(settings(dev_workers=2)))
    assert [(s.name, s.up) for s in statuses] == [
        ("projector", False),
        ("sweeper", False),
        ("worker-0", False),
        ("worker-1", False),
        ("api", False),
    ]


def test_up_forgets_what_stopped_and_keeps_what_runs(settings):
    two = settings(dev_workers=2)
    apps = start_stand_ins(two)
    apps.stop("worker-1")
    apps.stop("api")
    apps.forget_stopped()
    assert [spec.name for spec in apps.recorded()] == ["projector", "sweeper", "worker-0"]
    stop_apps(two)
    assert [(s.name, s.up) for s in asyncio.run(app_statuses(two))] == [
        ("projector", False),
        ("sweeper", False),
        ("worker-0", False),
    ], "stopped, still known until the next up"
