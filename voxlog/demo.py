"""`voxlog demo`: submit a text through the API, wait for it, write the WAV (on :mod:`voxlog.client`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Final

from producers.views import JobView
from voxlog.client import Client
from voxlog.client_key import client_key
from voxlog.errors import VoxlogError

DEMO_TEXT = (
    "Welcome to voxlog. Every step of this job was an event on Kafka, "
    "and this audio was served from a Postgres projection."
)
_ANNOUNCE_PACE_S: Final = 0.5


def first_voice(client: Client, within_s: float) -> str:
    """A voice of the first engine a worker announced (waiting for one to announce itself: workers announce
    on start-up, so this wait is for a process to start, read at a steady pace)."""
    deadline = time.monotonic() + within_s
    while True:
        engines = client.voices()["engines"]
        if engines and engines[0]["voices"]:
            return str(engines[0]["voices"][0])
        if time.monotonic() >= deadline:
            raise VoxlogError("no worker announced any voice; is `voxlog worker` running?")
        time.sleep(_ANNOUNCE_PACE_S)


def run_demo(api: str, text: str, voice: str | None, out: Path, within_s: float = 300.0) -> JobView:
    with Client(api, api_key=client_key(), timeout_s=30.0) as client:
        chosen = voice or first_voice(client, within_s)
        job = client.wait(client.submit_job(text, chosen).job_id, timeout_s=within_s)
        if job.state.value != "completed":
            error = job.error.message if job.error else None
            raise VoxlogError(f"job {job.job_id} ended {job.state.value}: {error or 'no reason given'}")
        client.download(f"/v1/jobs/{job.job_id}/audio", out)
        return job
