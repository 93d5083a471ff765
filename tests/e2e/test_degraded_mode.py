"""Degraded mode on real processes (issue 30, item 3): switched by the operator and by the sweeper, new syntheses
become degraded jobs (their status, their audit and their audio say so), what is cached at full quality is
still answered at full quality, and once the mode is off new jobs are at full quality again."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import httpx
import soundfile as sf

from contracts import ServiceModeSet, decode_node_event
from tests.e2e.test_backpressure import flood_texts, start, until
from tests.support.apps import AppStack, wait_for_job
from tests.support.cli import voxlog
from tests.support.kafka import read_to_end

DEGRADED = {"speed": 1.0, "sample_rate": 24000}


def degraded_status(app: AppStack) -> dict[str, Any]:
    done = voxlog(app.env, "admin", "degraded", "status", "--json", timeout_s=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


async def test_degraded_mode_follows_the_operator_and_the_backlog(apps, topics):
    app, voice, cached = await start(
        apps, sweeper=True, VOXLOG_DEGRADE_BACKLOG_S="3", VOXLOG_SWEEP_INTERVAL_S="0.5", VOXLOG_MAX_BACKLOG_S="0"
    )
    probe = iter(flood_texts(400, "probe"))
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:

        async def new_job() -> dict[str, Any]:
            """A new synthesis, as its 202 says it was taken (without waiting behind the backlog)."""
            answer = await client.post("/v1/jobs", json={"text": next(probe), "voice": voice})
            assert answer.status_code == 202, answer.text
            return dict(answer.json())

        async def degraded_by(source: str) -> bool:
            job = await new_job()
            return job["degraded"] is not None and job["degraded"]["reason"].startswith(source)

        async def full_quality() -> bool:
            return (await new_job())["degraded"] is None

        switched = await asyncio.to_thread(
            voxlog, app.env, "admin", "degraded", "on", "--reason", "launch day", timeout_s=60
        )
        assert switched.returncode == 0, switched.stdout + switched.stderr
        await until("the API to follow the operator's switch", lambda: degraded_by("operator: launch day"))
        assert (await asyncio.to_thread(degraded_status, app))["degraded"] is True

        # A new synthesis is a degraded job: its status says what was changed, its audio is at the lower rate.
        answer = await client.post("/v1/jobs", json={"text": "A new sentence while degraded.", "voice": voice})
        assert answer.status_code == 202, answer.text
        job = await wait_for_job(client, answer.json()["job_id"])
        assert job["state"] == "completed", job
        assert job["degraded"] == {**DEGRADED, "reason": "operator: launch day"}
        assert (job["request"]["speed"], job["request"]["sample_rate"]) == (1.15, 16000)
        audio = await client.get(f"/v1/jobs/{job['job_id']}/audio")
        assert audio.status_code == 200
        assert sf.info(io.BytesIO(audio.content)).samplerate == 16000
        report = await asyncio.to_thread(voxlog, app.env, "audit", job["job_id"], timeout_s=120)
        assert report.returncode == 0, report.stdout + report.stderr
        [queued_line] = [line for line in report.stdout.splitlines() if " JobQueued " in line]
        assert "degraded (speed 1 -> 1.15, 24000 -> 16000 Hz (operator: launch day))" in queued_line, report.stdout

        # What is cached at full quality is answered at full quality, at once.
        hit = await client.post("/v1/jobs", json={"text": cached, "voice": voice})
        assert hit.status_code == 200, hit.text
        assert (hit.json()["state"], hit.json()["degraded"]) == ("completed", None)
        assert hit.json()["request"]["sample_rate"] == 24000

        # The OpenAI route degrades too, and still answers in the container and rate it was asked for.
        speech = await client.post(
            "/v1/audio/speech",
            json={"model": "tts-1", "input": "Spoken while degraded.", "voice": voice, "response_format": "wav",
                  "stream": False},
        )  # fmt: skip
        assert speech.status_code == 200, speech.text
        assert sf.info(io.BytesIO(speech.content)).samplerate == 24000
        spoken = (await client.get(f"/v1/jobs/{speech.headers['X-Voxlog-Job-Id']}")).json()
        assert spoken["degraded"] == {**DEGRADED, "reason": "operator: launch day"}

        off = await asyncio.to_thread(voxlog, app.env, "admin", "degraded", "off", timeout_s=60)
        assert off.returncode == 0, off.stdout + off.stderr
        await until("new jobs to be at full quality again", full_quality)

        # A flood puts the backlog over the sweeper's threshold: it degrades what comes next, and stops once drained.
        flood = await asyncio.gather(
            *(client.post("/v1/jobs", json={"text": t, "voice": voice}) for t in flood_texts(80, "b"))
        )
        assert {a.status_code for a in flood} == {202}
        await until("the sweeper to switch degraded mode on", lambda: degraded_by("backlog: the backlog is"))
        jobs = await asyncio.gather(*(wait_for_job(client, a.json()["job_id"], 240) for a in flood))
        assert {j["state"] for j in jobs} == {"completed"}, "no accepted job is lost"
        await until("the sweeper to switch degraded mode off as the backlog drained", full_quality, within_s=120)

    records = await read_to_end(app.kafka, app.env["VOXLOG_CONTROL_TOPIC"])
    switches = [decode_node_event(r.value) for r in records if r.value and b'"ServiceModeSet"' in r.value]
    seen = {(e.payload.mode, e.payload.source, e.payload.enabled) for e in switches if isinstance(e, ServiceModeSet)}
    assert {
        ("degraded", "operator", True),
        ("degraded", "operator", False),
        ("degraded", "backlog", True),
        ("degraded", "backlog", False),
    } <= seen
    assert not any(mode == "cache_only" for mode, _, _ in seen), "degrading is not refusing"
