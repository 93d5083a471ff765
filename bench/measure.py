"""Talking to a deployment the way its users do (HTTP), and reading when things became visible.

"Visible" is the commit time of the row the API reads (Postgres's
``track_commit_timestamp``): before it no reader can see the row, after it
every one can. That is measured the same way for both systems and costs no
polling load while a scenario runs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import asyncpg
import httpx
import numpy as np

from bench.deploy import Deployment
from bench.errors import BenchError
from contracts import TERMINAL_STATES

TERMINAL: Final = tuple(state.value for state in TERMINAL_STATES)

_VOXLOG_TIMINGS: Final = (
    "SELECT j.job_id, j.state, j.submitted_at, j.claimed_at, j.completed_at,"
    " pg_xact_commit_timestamp(j.xmin) AS visible_at, s.produced_at,"
    " pg_xact_commit_timestamp(s.xmin) AS first_segment_at"
    " FROM jobs j LEFT JOIN segments s ON s.job_id = coalesce(j.source_job_id, j.job_id) AND s.segment_index = 0"
    " WHERE j.job_id = ANY($1::uuid[])"
)
_BASELINE_TIMINGS: Final = (
    "SELECT j.job_id, coalesce(s.state, j.state) AS state, j.submitted_at,"
    " coalesce(s.claimed_at, j.claimed_at) AS claimed_at, coalesce(s.completed_at, j.completed_at) AS completed_at,"
    " greatest(pg_xact_commit_timestamp(j.xmin), pg_xact_commit_timestamp(s.xmin)) AS visible_at, g.produced_at,"
    " greatest(pg_xact_commit_timestamp(j.xmin), pg_xact_commit_timestamp(g.xmin)) AS first_segment_at"
    " FROM bl_jobs j LEFT JOIN bl_jobs s ON s.job_id = j.source_job_id"
    " LEFT JOIN bl_segments g ON g.job_id = coalesce(j.source_job_id, j.job_id) AND g.segment_index = 0"
    " WHERE j.job_id = ANY($1::uuid[])"
)
_VOXLOG_DONE: Final = "SELECT count(*) FROM jobs WHERE job_id = ANY($1::uuid[]) AND state = ANY($2::text[])"
_BASELINE_DONE: Final = (
    "SELECT count(*) FROM bl_jobs j LEFT JOIN bl_jobs s ON s.job_id = j.source_job_id"
    " WHERE j.job_id = ANY($1::uuid[]) AND coalesce(s.state, j.state) = ANY($2::text[])"
)


@dataclass(frozen=True)
class Submission:
    text: str
    job_id: str
    submitted: float  # epoch seconds, just before the request was sent
    accepted: float  # epoch seconds, when the answer arrived


@dataclass(frozen=True)
class JobTiming:
    """One submission's milestones in epoch seconds; ``visible`` is when the API could first show it done.

    ``recorded`` is when the system wrote the job down (voxlog: the API built
    ``JobQueued``; baseline: the row's insert), ``accepted`` when the client had
    the answer, ``produced`` when the worker had the first segment's audio.
    """

    submitted: float
    recorded: float
    accepted: float
    claimed: float | None
    produced: float | None
    first_segment: float | None
    completed: float | None
    visible: float
    state: str


def summarize(values: Sequence[float]) -> dict[str, float]:
    """Median, p99 (linear interpolation) and friends, of seconds, reported in milliseconds."""
    if not values:
        return {"n": 0}
    ms = np.asarray(values, dtype=float) * 1000
    return {
        "n": len(ms),
        "median_ms": float(np.median(ms)),
        "p99_ms": float(np.percentile(ms, 99)),
        "mean_ms": float(ms.mean()),
        "min_ms": float(ms.min()),
        "max_ms": float(ms.max()),
    }


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class Client:
    """A deployment's user: submits over HTTP, waits on the tables the API reads."""

    def __init__(self, deployment: Deployment, engine: str, voice: str, concurrency: int = 32) -> None:
        self.d = deployment
        self.engine = engine
        self.voice = voice
        self.http = httpx.AsyncClient(
            base_url=deployment.api,
            timeout=120,
            # Idle connections are dropped before uvicorn's 5 s keep-alive timeout closes them under us.
            limits=httpx.Limits(
                max_connections=concurrency, max_keepalive_connections=concurrency, keepalive_expiry=2.0
            ),
        )
        self._gate = asyncio.Semaphore(concurrency)
        self._db: asyncpg.Connection | None = None
        self.voxlog = deployment.system == "voxlog"

    async def __aenter__(self) -> Client:
        self._db = await asyncpg.connect(self.d.database_url, server_settings={"search_path": self.d.tag})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.http.aclose()
        if self._db is not None:
            await self._db.close()

    @property
    def db(self) -> asyncpg.Connection:
        if self._db is None:
            raise BenchError("the client is not open")
        return self._db

    def body(self, text: str) -> dict[str, Any]:
        return {"text": text, "voice": self.voice, "engine": self.engine}

    async def submit(self, text: str) -> Submission:
        async with self._gate:
            submitted = time.time()
            response = await self.http.post("/v1/jobs" if self.voxlog else "/jobs", json=self.body(text))
            accepted = time.time()
        if response.status_code not in (200, 202):
            raise BenchError(f"{self.d.system} refused a submission: {response.status_code} {response.text}")
        return Submission(text, str(response.json()["job_id"]), submitted, accepted)

    async def submit_all(self, texts: Sequence[str]) -> list[Submission]:
        return list(await asyncio.gather(*(self.submit(t) for t in texts)))

    async def wait_done(self, job_ids: Sequence[str], within_s: float, poll_s: float = 0.05) -> None:
        """Until every job is completed or failed in the tables the API reads."""
        ids = sorted(set(job_ids))
        sql = _VOXLOG_DONE if self.voxlog else _BASELINE_DONE
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            if await self.db.fetchval(sql, ids, list(TERMINAL)) == len(ids):
                return
            await asyncio.sleep(poll_s)
        raise BenchError(f"{self.d.system}: {len(ids)} jobs not all done within {within_s:.0f}s")

    async def timings(self, submissions: Sequence[Submission]) -> list[JobTiming]:
        rows = await self.db.fetch(
            _VOXLOG_TIMINGS if self.voxlog else _BASELINE_TIMINGS, sorted({s.job_id for s in submissions})
        )
        by_id = {str(r["job_id"]): r for r in rows}
        out = []
        for s in submissions:
            r = by_id[s.job_id]
            visible = max(r["visible_at"].timestamp(), s.accepted)  # nobody sees it before the answer arrives
            first = _epoch(r["first_segment_at"])
            out.append(
                JobTiming(
                    s.submitted,
                    r["submitted_at"].timestamp(),
                    s.accepted,
                    _epoch(r["claimed_at"]),
                    _epoch(r["produced_at"]),
                    max(first, s.accepted) if first is not None else None,
                    _epoch(r["completed_at"]),
                    visible,
                    r["state"],
                )
            )
        return out

    async def confirm_via_api(self, job_ids: Sequence[str]) -> None:
        """Every job reads as completed through the HTTP API (not only in the table)."""

        async def one(job_id: str) -> str:
            async with self._gate:
                path = f"/v1/jobs/{job_id}" if self.voxlog else f"/jobs/{job_id}"
                return str((await self.http.get(path)).json()["state"])

        states = await asyncio.gather(*(one(j) for j in sorted(set(job_ids))))
        bad = [s for s in states if s != "completed"]
        if bad:
            raise BenchError(f"{self.d.system}: {len(bad)} jobs are not completed in the API: {sorted(set(bad))}")

    async def first_audio(self, text: str, *, default_request: bool = False) -> tuple[float, float]:
        """Seconds to the first audio byte, and to the end, of a streamed pcm response; with
        ``default_request``, of what the official ``openai`` client sends (mp3, no ``stream_format``)."""
        started = time.perf_counter()
        first: float | None = None
        if self.voxlog and default_request:
            body = {"model": self.engine, "input": text, "voice": self.voice}
            request = self.http.stream("POST", "/v1/audio/speech", json=body)
        elif self.voxlog:
            body = {"model": self.engine, "input": text, "voice": self.voice, "response_format": "pcm"}
            request = self.http.stream("POST", "/v1/audio/speech", json={**body, "stream_format": "audio"})
        else:
            request = self.http.stream("POST", "/speech", json={**self.body(text), "format": "pcm"})
        async with request as response:
            if response.status_code != 200:
                raise BenchError(f"{self.d.system} streaming answered {response.status_code}")
            async for chunk in response.aiter_bytes():
                if chunk and first is None:
                    first = time.perf_counter() - started
        if first is None:
            raise BenchError(f"{self.d.system} streamed no audio")
        return first, time.perf_counter() - started
