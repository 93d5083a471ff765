"""`voxlog cache stats` against a real pipeline: entries, bytes and reuse as the projection and blob store have them."""

from __future__ import annotations

import asyncio
import json

import httpx

from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import voxlog

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep"}


async def test_cache_stats_counts_entries_bytes_and_the_jobs_that_reused_a_result(apps, topics):
    app, voices = await start_pipeline(apps, workers=1, VOXLOG_BENCH_SYNTH_MS="300", **BENCH)
    texts = ["The first cached sentence.", "The second cached sentence.", "The third cached sentence."]
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        # The first text three times at once: one synthesis, and two jobs the worker completes with its result.
        answers = await asyncio.gather(
            *(client.post("/v1/jobs", json={"text": t, "voice": voices[0]}) for t in [texts[0]] * 3 + texts[1:])
        )
        assert [a.status_code for a in answers] == [202] * 5, [a.text for a in answers]
        jobs = await asyncio.gather(*(wait_for_job(client, a.json()["job_id"]) for a in answers))
        synthesized = [job for job in jobs if not job["cache_hit"]]
        # The stored WAVs, as the API serves them (a segment's audio is its blob, byte for byte).
        stored = [(await client.get(segment["audio"])).content for job in synthesized for segment in job["segments"]]
    assert [job["state"] for job in jobs] == ["completed"] * 5
    assert sum(job["cache_hit"] for job in jobs) == 2

    done = voxlog(app.env, "cache", "stats", "--json", timeout_s=120)
    assert done.returncode == 0, done.stderr + done.stdout
    stats = json.loads(done.stdout)
    assert (stats["entries"], stats["live_entries"]) == (3, 3)
    assert (stats["completed_jobs"], stats["reused_jobs"], stats["reuse_ratio"]) == (5, 2, 0.4)
    expected_bytes = sum(len(wav) for wav in stored)
    assert stats["entry_bytes"] == expected_bytes
    assert stats["blob_files"] >= 3
    assert stats["blob_bytes"] >= expected_bytes

    lines = voxlog(app.env, "cache", "stats", timeout_s=120)
    assert lines.returncode == 0, lines.stderr
    assert "3 live of 3" in lines.stdout


async def test_a_request_sharing_sentences_with_an_earlier_one_reuses_their_audio(apps, topics):
    app, voices = await start_pipeline(apps, workers=1, VOXLOG_BENCH_SYNTH_MS="50", **BENCH)
    shared = "A sentence both requests say. And a second one they share."
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        first = await client.post("/v1/jobs", json={"text": f"The first request opens. {shared}", "voice": voices[0]})
        done = await wait_for_job(client, first.json()["job_id"])
        second = await client.post("/v1/jobs", json={"text": f"The second one differs. {shared}", "voice": voices[0]})
        again = await wait_for_job(client, second.json()["job_id"])
        assert (done["segments_reused"], again["segments_reused"]) == (0, 2)
        assert [s["reused"] for s in again["segments"]] == [False, True, True]
        # The reused segments' audio is the first request's, byte for byte.
        for earlier, later in zip(done["segments"][1:], again["segments"][1:], strict=True):
            assert (await client.get(later["audio"])).content == (await client.get(earlier["audio"])).content
        whole = await client.get(f"/v1/jobs/{again['job_id']}/audio")
        assert whole.status_code == 200
