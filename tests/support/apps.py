"""voxlog's processes (projector, workers, api) as subprocesses of a test, stopped by it."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from foundation.kafka_access import KafkaAccess
from foundation.kafka_groups import synth_group, wait_group_stable
from infra.apps import AppProcesses, AppSpec
from infra.processes import tail
from tests.support.cli import voxlog
from tests.support.engines import BENCH_ENGINE
from tests.support.stack import free_port
from voxlog.devstack import isolated_env

# voxlog's CLI, its benchmark engine paced by the test's VOXLOG_BENCH_* (no settings of voxlog's: bench.paced).
CLI = [sys.executable, "-m", "bench.paced"]


@dataclass
class AppStack:
    home: Path
    env: dict[str, str]
    api_port: int
    kafka: KafkaAccess  # how the processes (VOXLOG_KAFKA_* in env) and the test reach the broker
    processes: AppProcesses = field(init=False)
    specs: dict[str, AppSpec] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)  # an operator's key, when the API needs keys

    def __post_init__(self) -> None:
        self.processes = AppProcesses(self.home)

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def start(
        self,
        name: str,
        command: list[str],
        extra_env: Mapping[str, str] | None = None,
        program: Sequence[str] = CLI,
    ) -> None:
        """Start ``program`` ``command`` (the CLI's, or a test's entry point standing in for it, ``program``
        alone: tests.support.gated_api)."""
        env = {**self.env, **(extra_env or {})}
        # The command may start with options; a second API serves on the port its environment names.
        api = "api" in command or program != CLI
        ready = f"http://127.0.0.1:{env['VOXLOG_API_PORT']}/readyz" if api else None
        spec = AppSpec(name, [*program, *command], env, ready_url=ready)
        self.specs[name] = spec
        self.processes.start(spec)

    def start_api(self, name: str, port: int, extra_env: Mapping[str, str] | None = None) -> str:
        """Another API instance on ``port`` (ready when its own /readyz answers); its base URL."""
        url = f"http://127.0.0.1:{port}"
        spec = AppSpec(
            name,
            [*CLI, "api"],
            {**self.env, "VOXLOG_API_PORT": str(port), **(extra_env or {})},
            ready_url=f"{url}/readyz",
        )
        self.specs[name] = spec
        self.processes.start(spec)
        return url

    async def wait_ready(self, within_s: float = 120.0) -> None:
        for spec in self.specs.values():
            await self.processes.wait_ready(spec, within_s)

    def stop(self, name: str) -> None:
        self.processes.stop(name, timeout=30)

    def stop_all(self) -> None:
        for name in reversed(list(self.specs)):
            self.processes.stop(name, timeout=30)

    def log(self, name: str) -> str:
        return tail(self.processes.log_file(name), 60)

    async def voices(self, within_s: float = 120.0) -> list[str]:
        """The voices once a worker's announcement is projected."""
        return list((await self.engine(within_s))["voices"])

    async def engine(self, within_s: float = 120.0) -> dict[str, Any]:
        """The first engine a worker announced (name, model version, voices), once it is projected."""
        deadline = time.monotonic() + within_s
        async with httpx.AsyncClient(base_url=self.api, headers=self.headers) as client:
            while time.monotonic() < deadline:
                response = await client.get("/v1/voices")  # 503 while the projection is unreachable
                engines = response.json()["engines"] if response.status_code == 200 else []
                if engines and engines[0]["voices"]:
                    return dict(engines[0])
                await asyncio.sleep(0.3)
        raise AssertionError(f"no worker announced itself; worker log:\n{self.log('worker-0')}")

    def synth_group(self, engine: dict[str, Any]) -> str:
        return synth_group(self.env["VOXLOG_SYNTH_GROUP"], engine["engine"], engine["model_version"])


def app_env(stack: Any, topics: Any, schema: str, home: Path, api_port: int, **extra: str) -> dict[str, str]:
    return {
        **isolated_env(topics.kafka, stack.database_url, schema, topics.settings, home, api_port),
        **BENCH_ENGINE,  # whatever the caller's environment says; a real-model test passes engines.REAL_MODEL
        **extra,
    }


async def until(what: str, check: Callable[[], Awaitable[Any]], within_s: float = 90.0) -> Any:
    """Await ``check`` every 0.2 s until what it gives is true, and return that; fail once ``within_s`` passed."""
    deadline = time.monotonic() + within_s
    while not (found := await check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {within_s}s"
        await asyncio.sleep(0.2)
    return found


async def wait_for_job(client: httpx.AsyncClient, job_id: str, within_s: float = 120.0) -> dict[str, Any]:
    """Poll the API until the job ended: completed, failed or cancelled."""
    return await wait_ended(client, f"/v1/jobs/{job_id}", within_s)


async def wait_ended(client: httpx.AsyncClient, path: str, within_s: float = 120.0) -> dict[str, Any]:
    """Poll ``path`` (a job or a document) until its state is completed, failed or cancelled."""
    deadline = time.monotonic() + within_s
    last: Any = None
    while time.monotonic() < deadline:
        response = await client.get(path)
        if response.status_code == 200:
            last = response.json()
            if last["state"] in {"completed", "failed", "cancelled"}:
                return dict(last)
        await asyncio.sleep(0.25)
    raise AssertionError(f"{path} did not finish within {within_s}s; last seen: {last}")


def new_app_stack(stack: Any, topics: Any, schema: str, home: Path, **extra: str) -> AppStack:
    port = free_port()
    return AppStack(home, app_env(stack, topics, schema, home, port, **extra), port, topics.kafka)


async def wait_http(url: str, within_s: float = 60.0) -> None:
    """Wait until ``url`` answers 200 (a process has started serving)."""
    deadline = time.monotonic() + within_s
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() < deadline:
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {within_s}s")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def create_key(app: AppStack, tenant: str, scopes: str = "submit,read") -> str:
    """A key made as an operator makes one (`voxlog keys create`), once the projection knows it."""
    made = await asyncio.to_thread(voxlog, app.env, "keys", "create", "--tenant", tenant, "--scopes", scopes)
    assert made.returncode == 0, made.stdout + made.stderr
    token = made.stdout.splitlines()[0].strip()
    await until_key(app, token.split("_")[1], lambda row: row is not None, "projected")
    return token


async def key_row(app: AppStack, key_id: str) -> asyncpg.Record | None:
    conn = await asyncpg.connect(
        app.env["VOXLOG_DATABASE_URL"], server_settings={"search_path": app.env["VOXLOG_DATABASE_SCHEMA"]}
    )
    try:
        return await conn.fetchrow("SELECT * FROM api_keys WHERE key_id = $1", key_id)
    finally:
        await conn.close()


async def until_key(
    app: AppStack, key_id: str, check: Callable[[asyncpg.Record | None], bool], what: str, within_s: float = 60.0
) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if check(await key_row(app, key_id)):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"key {key_id} was not {what} within {within_s}s; projector log:\n{app.log('projector')}")


async def start_pipeline(
    make: Any, workers: int = 1, api_program: Sequence[str] | None = None, **env: str
) -> tuple[AppStack, list[str]]:
    """A projector, ``workers`` workers and the API on this test's topics; returns them and the voices.
    ``api_program``: an entry point run instead of `voxlog api` (tests.support.gated_api)."""
    app: AppStack = make(**env)
    app.start("projector", ["projector"])
    for i in range(workers):
        app.start(f"worker-{i}", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": f"w{i}"})
    if api_program is None:
        app.start("api", ["api"])
    else:
        app.start("api", [], program=api_program)
    await app.wait_ready()
    if env.get("VOXLOG_AUTH") == "on":  # the test's own operator, to ask the API what it needs to know
        app.headers = bearer(await create_key(app, "ops", "submit,read,admin,operator"))
    engine = await app.engine()
    if workers:  # every worker is a member with its partitions before any job is submitted
        group = app.synth_group(engine)
        await wait_group_stable(app.kafka, group, workers, 180)
    return app, list(engine["voices"])
