"""Every process exports its metrics: the API's requests, the projector's view of the log, the worker's engine."""

from __future__ import annotations

import httpx

from foundation.kafka_groups import wait_group_stable
from foundation.metrics import parse_totals
from infra.processes import free_port
from tests.support.apps import wait_for_job

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "5"}


async def scrape(url: str) -> tuple[str, dict[str, float]]:
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(url)).text
    return text, parse_totals(text)


async def test_the_api_projector_and_worker_export_what_they_see(apps):
    app = apps(**BENCH)
    ports = {"projector": free_port(), "worker-0": free_port()}
    app.start("projector", ["projector"], {"VOXLOG_METRICS_PORT": str(ports["projector"])})
    app.start("worker-0", ["worker"], {"VOXLOG_WORKER_ID": "w0", "VOXLOG_METRICS_PORT": str(ports["worker-0"])})
    app.start("api", ["api"])
    await app.wait_ready()
    engine = await app.engine()
    await wait_group_stable(app.kafka, app.synth_group(engine), 1, 120)
    voice = engine["voices"][0]
    async with httpx.AsyncClient(base_url=app.api, timeout=30) as client:
        first = (await client.post("/v1/jobs", json={"text": "Counted once.", "voice": voice})).json()
        await wait_for_job(client, first["job_id"])
        again = await client.post("/v1/jobs", json={"text": "Counted once.", "voice": voice})
        assert again.status_code == 200, "served from the cache at once"
        second = (await client.post("/v1/jobs", json={"text": "Counted twice.", "voice": voice})).json()
        await wait_for_job(client, second["job_id"])
        bad = await client.post("/v1/jobs", json={"text": "", "voice": voice})
        assert bad.status_code in (400, 422)

    api_text, _ = await scrape(f"{app.api}/metrics")
    assert (
        'voxlog_http_requests_total{app_name="voxlog-api",method="POST",path="/v1/jobs",status_code="202"} 2.0'
        in api_text
    )
    assert 'method="GET",path="/v1/jobs/{job_id}",status_code="200"' in api_text, "by route, not by path"
    assert f'status_code="{bad.status_code}"' in api_text
    assert "voxlog_http_request_duration_seconds_bucket" in api_text
    assert 'voxlog_submissions_total{answer="queued"} 2.0' in api_text
    assert 'voxlog_submissions_total{answer="cached"} 1.0' in api_text, "answered from the cache, with no job"

    projector_text, projector = await scrape(f"http://127.0.0.1:{ports['projector']}/metrics")
    assert 'voxlog_jobs_completed_total{source="synthesis"} 2.0' in projector_text
    # The cache hit is a job of its own too (JobQueued and JobCompleted from the cache): three queued.
    assert 'voxlog_job_events_total{outcome="applied",type="JobQueued"} 3.0' in projector_text
    assert 'voxlog_jobs_completed_total{source="cache"} 1.0' in projector_text
    assert 'voxlog_job_phase_seconds_count{phase="visible"} 3.0' in projector_text
    assert projector["voxlog_projector_batch_records_count"] >= 1
    assert projector["voxlog_projector_batch_records_sum"] >= 8, "two jobs' four events at least"

    worker_text, worker = await scrape(f"http://127.0.0.1:{ports['worker-0']}/metrics")
    assert 'voxlog_job_phase_seconds_count{phase="queued"} 2.0' in worker_text
    assert 'voxlog_job_phase_seconds_count{phase="first_segment"} 2.0' in worker_text
    assert worker["voxlog_real_time_factor_count"] >= 2
    assert "voxlog_engine_queue_depth 0.0" in worker_text
    # The sizes it runs with: a CPU's, one segment a forward, no padded-id bound, four claims held.
    assert 'voxlog_worker_forward_limit{limit="segments"} 1.0' in worker_text
    assert 'voxlog_worker_forward_limit{limit="padded_ids"} 0.0' in worker_text
    assert 'voxlog_worker_forward_limit{limit="held_claims"} 4.0' in worker_text
