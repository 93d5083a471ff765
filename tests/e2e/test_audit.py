"""`voxlog audit`, GET /v1/jobs/{id}/events and ?as_of=: a job's history and past states read from the log."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import time
import uuid
from datetime import datetime, timedelta

import httpx

from contracts import decode_event
from foundation.kafka import KafkaEventPublisher
from infra.processes import free_port, wait_gone
from projections.audit import DELIVERIES_SOURCE
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import voxlog
from tests.support.events import late_work_of_a_dead_attempt
from tests.support.kafka import read_to_end

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "700"}
TEXT = "One sentence here. Another one there. A third to close. And a fourth for luck."


async def wait_until(what: str, check, within_s: float = 120.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, f"{what} did not happen within {within_s}s"
        await asyncio.sleep(0.1)


async def test_the_audit_of_a_job_killed_mid_synthesis_shows_both_attempts_and_the_fenced_late_events(apps, topics):
    app, voices = await start_pipeline(apps, **BENCH)
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        job_id = (await client.post("/v1/jobs", json={"text": TEXT, "voice": voices[0]})).json()["job_id"]

        async def mid_synthesis() -> bool:
            job = (await client.get(f"/v1/jobs/{job_id}")).json()
            return job.get("state") == "claimed" and len(job.get("segments", [])) >= 1

        await wait_until("a segment of attempt 1", mid_synthesis)
        pid = app.processes.pid("worker-0")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 30)
        app.start("worker-1", ["worker", "--device", "cpu"], {"VOXLOG_WORKER_ID": "w1"})
        job = await wait_for_job(client, job_id, 180)
        assert (job["state"], job["attempt"]) == ("completed", 2)

        # The dead attempt's late work arrives after all, as from a worker cut off by a network partition:
        # its next segment, its completion, and a copy of its claim delivered twice.
        records = await read_to_end(topics.kafka, topics.jobs)
        events = [decode_event(r.value) for r in records]
        # Where the API placed the job: the zombie writes there, as the worker it was did.
        [partition] = {r.partition for r, e in zip(records, events, strict=True) if str(e.job_id) == job_id}
        late = late_work_of_a_dead_attempt(events, uuid.UUID(job_id), index=99)
        async with KafkaEventPublisher(topics.kafka, topics.jobs) as publisher:
            for event in late:
                await publisher.publish(event, partition=partition)

        async def all_projected() -> bool:
            body = (await client.get(f"/v1/jobs/{job_id}/events")).json()
            return len(body.get("events", [])) == len([e for e in events if str(e.job_id) == job_id]) + 3

        await wait_until("the late events in the log", all_projected)
        history = (await client.get(f"/v1/jobs/{job_id}/events")).json()
        unchanged = (await client.get(f"/v1/jobs/{job_id}")).json()
        first_claim_at = next(e for e in history["events"] if e["type"] == "JobClaimed")["appended_at"]
        then = (await client.get(f"/v1/jobs/{job_id}", params={"as_of": first_claim_at})).json()
        queued_at = datetime.fromisoformat(history["events"][0]["appended_at"])
        before = await client.get(
            f"/v1/jobs/{job_id}", params={"as_of": (queued_at - timedelta(seconds=1)).isoformat()}
        )
        unknown = await client.get("/v1/jobs/00000000-0000-4000-8000-000000000000/events")

    assert (unchanged["state"], unchanged["attempt"], unchanged["segment_count"]) == (
        "completed",
        2,
        job["segment_count"],
    )
    assert [(a["attempt"], a["worker_id"]) for a in history["attempts"]] == [(1, "w0"), (2, "w1")]
    assert history["attempts"][0]["ended_by"] == "taken over by attempt 2"
    assert history["attempts"][0]["fenced_events"] == 2
    assert history["attempts"][1]["ended_by"] == "completed"
    assert {a["host"] for a in history["attempts"]} == {socket.gethostname()}, "JobClaimed v2 names the host"
    fenced = [(e["type"], e["attempt"], e["reason"]) for e in history["events"] if e["outcome"] == "fenced"]
    assert fenced == [
        ("SegmentProduced", 1, "terminal: job already completed"),
        ("JobCompleted", 1, "terminal: job already completed"),
    ]
    duplicates = [e for e in history["events"] if e["outcome"] == "duplicate"]
    assert [(e["type"], e["attempt"]) for e in duplicates] == [("JobClaimed", 1)]
    offsets = [(e["partition"], e["offset"]) for e in history["events"]]
    assert offsets == sorted(offsets), "in log order"
    assert len({p for p, _ in offsets}) == 1, "a fingerprint's events share one partition"
    claims = [e for e in history["events"] if e["type"] == "JobClaimed" and e["outcome"] == "applied"]
    assert [(c["producer"]["instance"], c["producer"]["engine"]) for c in claims] == [
        ("w0", "bench-sleep"),
        ("w1", "bench-sleep"),
    ]
    states = [s["state"] for s in history["time_in_state"]]
    assert states == ["queued", "claimed", "claimed", "completed"]
    assert all(s["seconds"] is not None and s["seconds"] >= 0 for s in history["time_in_state"])

    assert (then["state"], then["attempt"], then["worker_id"]) == ("claimed", 1, "w0"), "what the log said then"
    assert then["as_of"].startswith(first_claim_at[:19])
    assert before.status_code == 404
    assert "as of" in before.json()["detail"]
    assert unknown.status_code == 404

    report = await asyncio.to_thread(voxlog, app.env, "audit", job_id)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "fenced: terminal: job already completed" in report.stdout
    assert "taken over by attempt 2" in report.stdout
    assert "duplicate: repeats" in report.stdout
    assert re.fullmatch(r"[0-9a-f]{32}", history["trace_id"]), history["trace_id"]
    assert f"trace {history['trace_id']}" in report.stdout
    as_json = await asyncio.to_thread(voxlog, app.env, "audit", job_id, "--json")
    cli = json.loads(as_json.stdout)
    # Its webhook deliveries (it has none: no endpoint here) are the projection's, and said so; the rest is the log's.
    assert cli.pop("webhook_deliveries") == {"source": DELIVERIES_SOURCE, "deliveries": []}
    assert cli == history, "the CLI and the API tell the same history"
    unreachable = {**app.env, "VOXLOG_DATABASE_URL": f"postgresql://voxlog@127.0.0.1:{free_port()}/voxlog"}
    without_db = await asyncio.to_thread(voxlog, unreachable, "audit", job_id, "--json")
    assert without_db.returncode == 0, without_db.stderr
    cli = json.loads(without_db.stdout)
    assert cli.pop("webhook_deliveries")["deliveries"] is None, "PostgreSQL down: its deliveries are unknown"
    assert cli == history, "PostgreSQL down: every partition is read instead"
    listing = await asyncio.to_thread(voxlog, app.env, "audit", "--fingerprint", history["fingerprint"])
    assert listing.returncode == 0, listing.stderr
    assert job_id in listing.stdout
    assert "1 job(s)" in listing.stdout
