"""voxlog's own processes (api, worker, projector) run in the background for the dev stack."""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import InfraError
from infra.processes import read_pid, start_background, stop_pid, tail
from infra.status import ServiceStatus
from voxlog.settings import TopicSettings

SOURCE_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class AppSpec:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    ready_url: str | None = None  # answered with 200 once the process is ready


def isolated_env(
    bootstrap: str, database_url: str, schema: str, topics: TopicSettings, home: Path, api_port: int
) -> dict[str, str]:
    """The environment of voxlog processes that share a broker and a server but nothing else:
    their own schema, topics, consumer group, projector offsets, blob directory and API port."""
    return {
        **os.environ,
        # The processes run this checkout's code, whatever checkout the venv was installed from.
        "PYTHONPATH": str(SOURCE_ROOT),
        "VOXLOG_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "VOXLOG_DATABASE_URL": database_url,
        "VOXLOG_DATABASE_SCHEMA": schema,
        "VOXLOG_JOBS_TOPIC": topics.jobs_topic,
        "VOXLOG_NODES_TOPIC": topics.nodes_topic,
        "VOXLOG_DLQ_TOPIC": topics.dlq_topic,
        "VOXLOG_SYNTH_GROUP": f"synth-{schema}",
        "VOXLOG_PROJECTOR_NAME": f"projector-{schema}",
        "VOXLOG_BLOB_DIR": str(home / "blobs"),
        "VOXLOG_API_PORT": str(api_port),
    }


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback URLs we built
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class AppProcesses:
    def __init__(self, home: Path) -> None:
        self.home = home

    def _pid_file(self, name: str) -> Path:
        return self.home / "run" / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def pid(self, name: str) -> int | None:
        return read_pid(self._pid_file(name))

    def start(self, spec: AppSpec) -> int:
        running = self.pid(spec.name)
        if running is not None:
            return running
        self._pid_file(spec.name).parent.mkdir(parents=True, exist_ok=True)
        return start_background(
            spec.argv, log_file=self.log_file(spec.name), pid_file=self._pid_file(spec.name), env=spec.env
        )

    async def wait_ready(self, spec: AppSpec, within_s: float) -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if self.pid(spec.name) is None:
                raise InfraError(f"{spec.name} exited; its log ends with:\n{tail(self.log_file(spec.name))}")
            if spec.ready_url is None or await asyncio.to_thread(http_ok, spec.ready_url):
                return
            await asyncio.sleep(0.5)
        raise InfraError(f"{spec.name} was not ready within {within_s:.0f}s; log:\n{tail(self.log_file(spec.name))}")

    def stop(self, name: str, timeout: float = 30.0) -> None:
        pid = self.pid(name)
        if pid is not None:
            stop_pid(pid, timeout=timeout, name=name)
        self._pid_file(name).unlink(missing_ok=True)

    async def status(self, spec: AppSpec) -> ServiceStatus:
        pid = self.pid(spec.name)
        endpoint = spec.ready_url or "-"
        if pid is None:
            return ServiceStatus(spec.name, up=False, endpoint=endpoint, detail="not running")
        ready = spec.ready_url is None or await asyncio.to_thread(http_ok, spec.ready_url)
        return ServiceStatus(spec.name, up=ready, endpoint=endpoint, pid=pid, detail="ready" if ready else "starting")
