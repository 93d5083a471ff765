"""infra/prometheus and infra/grafana checked with Debian's real Prometheus against running voxlog processes.

promtool validates the config and the rules and runs the rules' unit tests; then a Prometheus server
scrapes a pipeline (a job completed, one served from the cache, one failed, a poison record dead-lettered)
and the canary (`voxlog check --every`), and must know every metric that an alert or a dashboard panel names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest
import yaml

from contracts import utc_now
from contracts.scheduling import QueueCount
from foundation.kafka import KafkaEventPublisher
from foundation.kafka_groups import wait_group_stable
from infra.processes import free_port
from tests.support.apps import wait_for_job
from tests.support.events import heartbeat

INFRA = Path(__file__).resolve().parents[2] / "infra"
PROMETHEUS = INFRA / "prometheus"
DASHBOARD = INFRA / "grafana" / "voxlog.json"
BENCH = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_BENCH_FAULT": "fail:doomed",
    "VOXLOG_MAX_ATTEMPTS": "2",
    "VOXLOG_RETRY_BASE_DELAY_S": "0.1",
    "VOXLOG_LAG_INTERVAL_S": "0.5",
}
METRIC = re.compile(r"\b(voxlog_[a-z0-9_]+|up)\b")


def named_metrics() -> set[str]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    exprs += [target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"]]
    return {name for expr in exprs for name in METRIC.findall(expr)}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], cwd=PROMETHEUS, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize(
    "args",
    [("check", "config", "prometheus.yml"), ("check", "rules", "alerts.yml"), ("test", "rules", "alerts_test.yml")],
)
def test_promtool_accepts_the_config_and_the_rules_and_their_unit_tests_pass(args):
    done = promtool(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


async def _every_process_is_ready(ports: dict[str, int]) -> None:
    """What the chart's readiness probes ask (docs/deployment.md): each process's /readyz on its metrics port."""
    async with httpx.AsyncClient(timeout=5) as probes:
        for name, metrics_port in ports.items():
            deadline = time.monotonic() + 30
            while (answer := await probes.get(f"http://127.0.0.1:{metrics_port}/readyz")).status_code != 200:
                assert time.monotonic() < deadline, f"{name}: {answer.status_code} {answer.text}"
                await asyncio.sleep(0.2)
            assert answer.json() == {"ready": True, "waiting_for": []}, name


async def test_prometheus_scraping_voxlog_knows_every_metric_the_alerts_and_the_dashboard_name(apps, topics, tmp_path):
    app = apps(**BENCH)
    ports = {name: free_port() for name in ("projector", "worker-0", "sweeper-0")}
    for name, command in (("projector", "projector"), ("worker-0", "worker"), ("sweeper-0", "sweeper")):
        app.start(name, [command], {"VOXLOG_METRICS_PORT": str(ports[name]), "VOXLOG_WORKER_ID": "w0"})
    app.start("api", ["api"])
    await app.wait_ready()
    engine = await app.engine()
    await wait_group_stable(app.kafka, app.synth_group(engine), 1, 120)
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        voice = engine["voices"][0]
        for text in ("Scraped once.", "Scraped once.", "A doomed request."):
            response = await client.post("/v1/jobs", json={"text": text, "voice": voice})
            if response.status_code == 202:
                await wait_for_job(client, response.json()["job_id"])
    await _every_process_is_ready(ports)
    producer = topics.kafka.producer()
    await producer.start()
    try:
        await producer.send_and_wait(topics.jobs, b"{not an event", key=b"poison")
    finally:
        await producer.stop()

    # The canary, exporting its results (with bench-sleep's tone it fails the speech checks: failures are
    # exported too).
    ports["canary"] = free_port()
    every = ["--every", "1", "--timeout", "10", "--no-asr", "--metrics-port", str(ports["canary"])]
    app.start("canary", ["check", "--api", app.api, *every])

    port = free_port()
    api_port = app.api.rsplit(":", 1)[1]
    jobs = {"voxlog-api": api_port, **{f"voxlog-{n.split('-')[0]}": str(p) for n, p in ports.items()}}
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(PROMETHEUS / "alerts.yml")],
        "scrape_configs": [
            {"job_name": j, "static_configs": [{"targets": [f"127.0.0.1:{p}"]}]} for j, p in jobs.items()
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    server = await asyncio.create_subprocess_exec(
        shutil.which("prometheus") or "prometheus",
        f"--config.file={tmp_path / 'prometheus.yml'}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wanted = named_metrics()
    missing: set[str] = set()
    # A worker that lists jobs waiting on it (NodeHeartbeat version 2), heard every second: the API exports
    # its queue (voxlog_worker_queue_jobs) only while some worker has one.
    waiting = (QueueCount(tenant="default", priority="batch", jobs=3, text_chars=90),)
    nodes = KafkaEventPublisher(topics.kafka, topics.settings.control_topic)
    await nodes.start()

    async def beating() -> None:
        while True:
            await nodes.publish(heartbeat("w-queued", sent=utc_now(), queue_counts=waiting))
            await asyncio.sleep(1.0)

    heartbeats = asyncio.create_task(beating())
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as prom:
            deadline = time.monotonic() + 90
            while True:
                try:
                    ready = (await prom.get("/-/ready")).status_code == 200
                except httpx.TransportError:
                    ready = False
                targets, known = [], set()
                if ready:
                    targets = (await prom.get("/api/v1/targets")).json()["data"]["activeTargets"]
                    known = set((await prom.get("/api/v1/label/__name__/values")).json()["data"])
                up = {t["labels"]["job"] for t in targets if t["health"] == "up"}
                missing = wanted - known
                if up == set(jobs) and not missing:
                    break
                assert time.monotonic() < deadline, f"targets up: {sorted(up)}; never exported: {sorted(missing)}"
                await asyncio.sleep(0.5)
            rules = (await prom.get("/api/v1/rules")).json()["data"]["groups"][0]["rules"]
    finally:
        heartbeats.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeats
        await nodes.stop()
        server.terminate()
        await asyncio.wait_for(server.wait(), 30)
    assert {rule["name"] for rule in rules} >= {
        "VoxlogConsumerLagHigh",
        "VoxlogConsumerStalled",
        "VoxlogNoWorker",
        "VoxlogCanaryFailing",
        "VoxlogCanaryStale",
    }
    assert {"voxlog_canary_up", "voxlog_canary_phase_seconds"} <= wanted, "the rules and the dashboard read the canary"
    assert all(rule["health"] == "ok" for rule in rules), rules
    assert "voxlog_dead_letters_total" in wanted, "the names come from the files, and the files name this one"
