"""Operator surfaces are operators' (issue 26, item 6), on real processes with keys: the dashboard's page
shows figures only for an operator's key given in its fragment, /metrics has a port of its own, and the
cache-only switch and cache purges have admin routes that do what `voxlog admin` and `voxlog cache` do."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import httpx

from tests.support.apps import bearer, create_key, start_pipeline, wait_for_job
from tests.support.browser import figures
from tests.support.stack import free_port

AUTH = {
    "VOXLOG_AUTH": "on",
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_SYNTH_MS": "5",
    "VOXLOG_LAG_INTERVAL_S": "0.5",
}


async def until_switch(ops: httpx.AsyncClient, enabled: bool, within_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    seen: Any = None
    while time.monotonic() < deadline:
        seen = (await ops.get("/v1/admin/cache-only")).json()
        if seen.get("switches", {}).get("operator", {}).get("enabled") is enabled:
            return dict(seen)
        await asyncio.sleep(0.2)
    raise AssertionError(f"the operator's switch never showed enabled={enabled}: {seen}")


async def until_refused(client: httpx.AsyncClient, voice: str, within_s: float = 30.0) -> httpx.Response:
    """Submit new texts (each its own synthesis, so none coalesces onto an earlier one) until one is refused."""
    deadline = time.monotonic() + within_s
    for take in itertools.count():
        answer = await client.post("/v1/jobs", json={"text": f"Something new, take {take}.", "voice": voice})
        if answer.status_code != 202 or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def test_the_dashboard_metrics_and_the_operators_switches_need_their_scopes(apps):
    metrics_port = free_port()
    app, voices = await start_pipeline(apps, **AUTH)
    # The API again, with its metrics on a port of its own (the projector and the worker have theirs).
    app.stop("api")
    app.start("api", ["api"], {"VOXLOG_METRICS_PORT": str(metrics_port)})
    await app.wait_ready()
    operator = await create_key(app, "ops", "read,operator")
    tenant = await create_key(app, "acme", "submit,read")
    admin = await create_key(app, "ops", "submit,read,admin")

    # The page: no figures without a key, nor with a tenant's; all of them with an operator's in the fragment.
    refused = await figures(f"{app.api}/dashboard")
    assert (refused.ready, refused.refused) == (False, "401")
    assert "operator scope" in refused.texts["error"]
    tenants = await figures(f"{app.api}/dashboard#key={tenant}")
    assert (tenants.ready, tenants.refused) == (False, "403")
    shown = await figures(f"{app.api}/dashboard#key={operator}")
    assert shown.ready, shown.texts
    assert shown.refused == ""
    assert app.synth_group(await app.engine()) in shown.groups
    assert shown.workers == ["w0"]

    # /metrics: the operator's on the API's port, anyone's who reaches its own port (Prometheus's).
    async with httpx.AsyncClient(timeout=30) as anyone:
        assert (await anyone.get(f"{app.api}/metrics")).status_code == 401
        assert (await anyone.get(f"{app.api}/metrics", headers=bearer(tenant))).status_code == 403
        own_port = await anyone.get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert own_port.status_code == 200
        assert "voxlog_http_requests_total" in own_port.text, "the API's own figures, on the port of its own"
        assert (await anyone.get(f"{app.api}/metrics", headers=bearer(operator))).status_code == 200

    async with (
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=bearer(admin)) as ops,
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=bearer(tenant)) as client,
    ):
        assert (await client.post("/v1/admin/cache-only", json={"enabled": True})).status_code == 403
        text = {"text": "Kept in the cache.", "voice": voices[0]}
        first = await client.post("/v1/jobs", json=text)
        assert first.status_code == 202, first.text
        assert (await wait_for_job(client, first.json()["job_id"]))["state"] == "completed"

        # Cache-only over HTTP: recorded on the log, followed once projected; the cached request still answers.
        switched = await ops.post("/v1/admin/cache-only", json={"enabled": True, "reason": "GPU maintenance"})
        assert switched.status_code == 202, switched.text
        status = await until_switch(ops, True)
        assert status["cache_only"] is True
        assert status["switches"]["operator"]["reason"] == "GPU maintenance"
        # Each API reads the switch again within a second of its last reading (producers.admission).
        refused_new = await until_refused(client, voices[0])
        assert refused_new.status_code == 503, refused_new.text
        assert "GPU maintenance" in refused_new.json()["detail"]
        assert (await client.post("/v1/jobs", json=text)).status_code == 200, "from the cache, in cache-only mode"
        assert (await ops.post("/v1/admin/cache-only", json={"enabled": False})).status_code == 202
        status = await until_switch(ops, False)
        assert status["switches"]["operator"]["reason"].startswith("set over HTTP by key ")

        # A purge over HTTP evicts the result: the same request is then a synthesis again.
        purged = await ops.post("/v1/admin/cache/purge", json={"all": True})
        assert purged.status_code == 200, purged.text
        assert purged.json()["evicted"] >= 1
        deadline = time.monotonic() + 60
        # 200: still served from the cache; 503: this API has not read the switch's end yet (within a second).
        while (again := await client.post("/v1/jobs", json=text)).status_code in (200, 503):
            assert time.monotonic() < deadline, f"the purged result was never synthesized again: {again.text}"
            await asyncio.sleep(0.3)
        assert again.status_code == 202, again.text
