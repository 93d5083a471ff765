"""Credentials for the infrastructure (issue 26, item 7), on a broker and a PostgreSQL cluster of their own.

The certificates (a CA, the servers', a client's) are made by openssl for this module, the SCRAM logins
are added when the broker's storage is formatted, every password is drawn anew
(tests.support.credentials). The broker's only client listener is SASL_SSL and asks for a client
certificate besides the login; PostgreSQL takes TCP over TLS only, with a password. So the pipeline
completing a job (projector, worker, sweeper and API as processes, then the CLI tools) shows that
every client they make logs in; nothing could have connected in the clear.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio

from foundation.kafka import KafkaEventPublisher
from foundation.kafka_access import KafkaAccessRefused
from foundation.kafka_groups import wait_group_stable
from foundation.settings import TopicSettings
from infra.processes import free_port
from projections.migrations import migrate_database
from tests.integration.conftest import Topics
from tests.support.apps import AppStack, new_app_stack, wait_for_job
from tests.support.cli import voxlog
from tests.support.credentials import make_ca
from tests.support.stack import PrivateStack
from voxlog.topics import ensure_topics, topic_specs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "20"}
DEBUG = ["--log-level", "DEBUG"]  # what an operator turns on to look closer: it must not print secrets either
# Sent with every request as a client's API key would be; when the API checks keys (issue 26), the keys it is
# configured with join SECRETS below.
API_KEY = "vxk_test_d1c3b0b5e7a94f0e8c2a"
WRONG_PASSWORD = "not-the-password-6a1f"
WITH_METRICS = ("projector", "worker-0", "sweeper")


@dataclass
class Run:
    """The pipeline of this module, and what its processes and CLI runs printed."""

    stack: PrivateStack
    app: AppStack
    job: dict[str, Any]
    metrics_ports: dict[str, int]

    def secrets(self) -> list[str]:
        assert self.stack.credentials is not None
        return [*self.stack.credentials.secrets(), API_KEY, WRONG_PASSWORD]


@pytest_asyncio.fixture(scope="module")
async def secure() -> AsyncIterator[PrivateStack]:
    stack = PrivateStack(secure=True)
    try:
        await stack.up()
        yield stack
    finally:
        stack.down()


@pytest_asyncio.fixture(scope="module")
async def pipeline(secure: PrivateStack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Run]:
    topics = Topics(secure.kafka, TopicSettings(jobs_partitions=4))
    await ensure_topics(secure.kafka, topic_specs(topics.settings))
    await migrate_database(secure.database_url, "voxlog")
    home = tmp_path_factory.mktemp("apps")
    app = new_app_stack(secure, topics, "voxlog", home, **BENCH)
    ports = {name: free_port() for name in WITH_METRICS}
    password_file = home / "kafka-password"  # as a mounted Kubernetes secret: the worker reads it there
    password_file.write_text(app.env["VOXLOG_KAFKA_SASL_PASSWORD"] + "\n")
    by_file = {"VOXLOG_KAFKA_SASL_PASSWORD": "", "VOXLOG_KAFKA_SASL_PASSWORD_FILE": str(password_file)}
    app.start("projector", [*DEBUG, "projector"], {"VOXLOG_METRICS_PORT": str(ports["projector"])})
    worker = {"VOXLOG_WORKER_ID": "w0", "VOXLOG_METRICS_PORT": str(ports["worker-0"]), **by_file}
    app.start("worker-0", [*DEBUG, "worker", "--device", "cpu"], worker)
    app.start("sweeper", [*DEBUG, "sweeper"], {"VOXLOG_METRICS_PORT": str(ports["sweeper"])})
    app.start("api", [*DEBUG, "api"])
    try:
        await app.wait_ready(180)
        engine = await app.engine(180)
        await wait_group_stable(app.kafka, app.synth_group(engine), 1, 180)
        async with httpx.AsyncClient(base_url=app.api, timeout=30, headers=_api_key()) as client:
            response = await client.post("/v1/jobs", json={"text": "Spoken over TLS.", "voice": engine["voices"][0]})
            assert response.status_code == 202, response.text
            job = await wait_for_job(client, response.json()["job_id"], 180)
        yield Run(secure, app, job, ports)
    finally:
        app.stop_all()


@pytest.fixture(scope="module")
def cli(pipeline: Run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, CompletedProcess[str]]:
    """The CLI tools run as an operator runs them, with the processes' settings: exit code and output each."""
    job_id = pipeline.job["job_id"]
    archive = tmp_path_factory.mktemp("archive")
    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "topics": (["topics"], {"VOXLOG_JOBS_PARTITIONS": "4"}),
        "verify": (["verify", "--wait", "60"], {}),
        "lag": (["lag", "--once", "--json", "--interval", "0.5"], {}),
        "audit": (["audit", job_id, "--json"], {}),
        "archive": (["archive", "--before", "2999-01-01T00:00:00", "--to", str(archive)], {}),
        "replay": (["replay", "--verify", "--into", "voxlog_replayed"], {}),
        "topics, wrong password": (["topics"], {"VOXLOG_KAFKA_SASL_PASSWORD": WRONG_PASSWORD}),
    }
    return {
        name: voxlog({**pipeline.app.env, **env}, *DEBUG, *args, timeout_s=180)
        for name, (args, env) in commands.items()
    }


def _api_key() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}", "X-API-Key": API_KEY}


async def _lag_sampled(client: httpx.AsyncClient, within_s: float = 60.0) -> dict[str, Any]:
    """/v1/lag once the API's lag reader (an admin client and two consumers) has sampled the groups."""
    deadline = time.monotonic() + within_s
    while True:
        lag = (await client.get("/v1/lag")).json()
        if lag["groups"] and lag["error"] is None:
            return dict(lag)
        assert time.monotonic() < deadline, f"no lag sample through SASL_SSL: {lag}"
        await asyncio.sleep(0.5)


async def test_a_job_goes_through_a_sasl_ssl_broker_and_postgres_over_tls(pipeline: Run):
    assert pipeline.job["state"] == "completed", pipeline.job
    job_id = pipeline.job["job_id"]
    async with httpx.AsyncClient(base_url=pipeline.app.api, timeout=30, headers=_api_key()) as client:
        audio = await client.get(f"/v1/jobs/{job_id}/audio")
        assert audio.status_code == 200, audio.text
        assert audio.content[:4] == b"RIFF"
        history = await client.get(f"/v1/jobs/{job_id}/events")  # the audit reads the log with its own consumer
        assert history.status_code == 200, history.text
        assert history.json()["state"] == "completed"
        await _lag_sampled(client)
    conn = await asyncpg.connect(pipeline.stack.database_url)
    try:
        rows = await conn.fetch(
            "SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)"
            " WHERE a.usename = 'voxlog' AND a.backend_type = 'client backend'"
        )
    finally:
        await conn.close()
    assert rows, "the processes hold connections"
    assert all(row["ssl"] for row in rows), rows
    for name in pipeline.app.specs:
        assert pipeline.app.processes.pid(name) is not None, f"{name} exited:\n{pipeline.app.log(name)}"


def test_the_cli_tools_log_in_through_the_same_settings(cli: dict[str, CompletedProcess[str]]):
    assert cli["lag"].returncode in (0, 1), cli["lag"].stderr[-2000:]  # 1: a group is behind, not an error
    ran = {name: done for name, done in cli.items() if name not in ("lag", "topics, wrong password")}
    assert {name: done.stderr[-2000:] for name, done in ran.items() if done.returncode} == {}
    assert cli["topics"].stdout.split() == [
        "voxlog.jobs.v1:", "exists", "voxlog.jobs.dlq:", "exists", "voxlog.control.v1:", "exists"
    ]  # fmt: skip
    assert json.loads(cli["audit"].stdout)["state"] == "completed"
    assert {g["group"] for g in json.loads(cli["lag"].stdout)["groups"]}, "lag read the groups"


async def test_a_client_with_a_wrong_password_is_refused_with_a_clear_error(
    pipeline: Run, cli: dict[str, CompletedProcess[str]]
):
    stack = pipeline.stack
    assert stack.credentials is not None
    wrong = stack.credentials.kafka(stack.bootstrap_servers, password=WRONG_PASSWORD)
    with pytest.raises(KafkaAccessRefused, match="SaslAuthenticationFailed") as refused:
        await KafkaEventPublisher(wrong, topic="voxlog.jobs.v1").start()
    assert "SASL_SSL, SCRAM-SHA-512 as 'voxlog'" in str(refused.value), "who was refused, where"

    no_certificate = stack.credentials.kafka(stack.bootstrap_servers, client_cert=False)
    assert "the TLS handshake failed" in (await no_certificate.refusal() or "")

    refused_cli = cli["topics, wrong password"]
    assert refused_cli.returncode == 2, refused_cli.stderr[-2000:]
    assert "voxlog: cannot create the topics: Kafka at" in refused_cli.stderr
    assert "refused this client: [Error 58] SaslAuthenticationFailed" in refused_cli.stderr


async def test_postgres_takes_verify_full_against_the_test_ca(secure: PrivateStack):
    url = secure.database_url
    assert "sslmode=verify-full" in url
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") is True
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("why", "says"),
    [
        ("without the CA", "root.crt"),
        ("against another CA", "certificate verify failed"),
        ("without TLS", "no encryption"),
        ("with a wrong password", "password authentication failed"),
    ],
)
async def test_postgres_refuses_a_client(secure: PrivateStack, tmp_path: Path, why: str, says: str):
    assert secure.credentials is not None
    base = secure.database_url.split("?")[0]
    url = {
        "without the CA": base + "?sslmode=verify-full",
        "against another CA": base + f"?sslmode=verify-full&sslrootcert={make_ca(tmp_path)}",
        "without TLS": base + "?sslmode=disable",
        "with a wrong password": secure.database_url.replace(secure.credentials.postgres_password, WRONG_PASSWORD),
    }[why]
    with pytest.raises(Exception, match=says):  # asyncpg's errors or ssl's: what they say is the point
        await asyncpg.connect(url, timeout=10)


async def test_no_secret_appears_in_any_process_log_or_metrics(pipeline: Run, cli: dict[str, CompletedProcess[str]]):
    """The Kafka passwords, the database URL's password and the API key, grepped for in what every process
    wrote: the services' logs (at DEBUG), their /metrics, and the CLI runs' output, a refused login's included."""
    texts = {f"{name} log": pipeline.app.processes.log_file(name).read_text() for name in pipeline.app.specs}
    async with httpx.AsyncClient(timeout=10) as client:
        texts["api /metrics"] = (await client.get(f"{pipeline.app.api}/metrics")).text
        for name, port in pipeline.metrics_ports.items():
            texts[f"{name} /metrics"] = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    texts |= {f"voxlog {name}": done.stdout + done.stderr for name, done in cli.items()}
    assert all(texts.values()), [name for name, text in texts.items() if not text]
    assert "voxlog_sweeper_sweeps_total" in texts["sweeper /metrics"], "a sweeper that acts (its lock over TLS)"
    leaks = {name: [s for s in pipeline.secrets() if s in text] for name, text in texts.items()}
    assert {name: found for name, found in leaks.items() if found} == {}
