"""Background processes with a readiness URL (voxlog's api, worker and projector for the dev stack and tests).

Each process started is recorded under the home (``run/<name>.json``: its name, command and readiness
URL, beside its pid file), so that what runs can be told and stopped from the records alone, whatever
the configuration says now: ``voxlog dev up`` with ``VOXLOG_DEV_WORKERS=2`` and then ``dev down``
without the variable left ``worker-1`` running when ``down`` stopped what the configuration named.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infra.errors import InfraError
from infra.processes import read_pid, start_background, stop_pid, tail
from infra.status import ServiceStatus


@dataclass(frozen=True)
class AppSpec:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str] = field(default_factory=dict)
    ready_url: str | None = None  # answered with 200 once the process is ready


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

    def _record_file(self, name: str) -> Path:
        return self.home / "run" / f"{name}.json"

    def log_file(self, name: str) -> Path:
        return self.home / "logs" / f"{name}.log"

    def pid(self, name: str) -> int | None:
        return read_pid(self._pid_file(name))

    def start(self, spec: AppSpec) -> int:
        running = self.pid(spec.name)
        if running is not None:
            return running
        self._pid_file(spec.name).parent.mkdir(parents=True, exist_ok=True)
        pid = start_background(
            spec.argv, log_file=self.log_file(spec.name), pid_file=self._pid_file(spec.name), env=spec.env
        )
        record = {"name": spec.name, "argv": list(spec.argv), "ready_url": spec.ready_url}
        self._record_file(spec.name).write_text(json.dumps(record) + "\n")
        return pid

    def recorded(self) -> list[AppSpec]:
        """Every process started here and not forgotten since, running or not, in the order started (the
        environment is not recorded). A pid file without a record (an older voxlog's) counts too."""
        run = self.home / "run"
        names = {path.stem: path for path in sorted(run.glob("*.pid"))} if run.is_dir() else {}
        names |= {path.stem: path for path in sorted(run.glob("*.json"))} if run.is_dir() else {}
        specs = []
        for name, path in sorted(names.items(), key=lambda item: item[1].stat().st_mtime_ns):
            record = json.loads(path.read_text()) if path.suffix == ".json" else {"argv": []}
            specs.append(AppSpec(name, record["argv"], ready_url=record.get("ready_url")))
        return specs

    def forget_stopped(self) -> None:
        """Drop the records of processes that no longer run (what runs stays known, whatever starts next)."""
        for spec in self.recorded():
            if self.pid(spec.name) is None:
                self._pid_file(spec.name).unlink(missing_ok=True)
                self._record_file(spec.name).unlink(missing_ok=True)

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
        """Stop ``name`` if it runs; its record stays (it is shown as down until forgotten)."""
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
