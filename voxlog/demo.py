"""`voxlog demo`: submit a text through the API, wait for it, write the WAV."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

import httpx

from contracts import TERMINAL_STATES
from voxlog.client_key import client_headers
from voxlog.errors import VoxlogError

ENDED: Final = frozenset(state.value for state in TERMINAL_STATES)

DEMO_TEXT = (
    "Welcome to voxlog. Every step of this job was an event on Kafka, "
    "and this audio was served from a Postgres projection."
)


def first_voice(client: httpx.Client, within_s: float) -> str:
    """A voice of the first engine a worker announced (waiting for one to announce itself)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        engines = client.get("/v1/voices").json()["engines"]
        if engines and engines[0]["voices"]:
            return str(engines[0]["voices"][0])
        time.sleep(0.5)
    raise VoxlogError("no worker announced any voice; is `voxlog worker` running?")


def run_demo(api: str, text: str, voice: str | None, out: Path, within_s: float = 300.0) -> dict[str, Any]:
    with httpx.Client(base_url=api, timeout=30, headers=client_headers()) as client:
        chosen = voice or first_voice(client, within_s)
        submitted = client.post("/v1/jobs", json={"text": text, "voice": chosen})
        if submitted.status_code not in (200, 202):
            raise VoxlogError(f"submission refused ({submitted.status_code}): {submitted.text}")
        job_id = submitted.json()["job_id"]
        deadline = time.monotonic() + within_s
        job: dict[str, Any] = {}
        while time.monotonic() < deadline:
            response = client.get(f"/v1/jobs/{job_id}")
            if response.status_code == 200:
                job = response.json()
                if job["state"] in ENDED:
                    break
            time.sleep(0.3)
        if job.get("state") != "completed":
            raise VoxlogError(f"job {job_id} did not complete within {within_s:.0f}s: {job or 'not projected'}")
        audio = client.get(f"/v1/jobs/{job_id}/audio")
        audio.raise_for_status()
        out.write_bytes(audio.content)
        return job
