"""Scenario (o), duplicates under a Zipf load (issue 41, item 3: "duplicates cost no claim").

A realistic load repeats a few texts often and many rarely: ``zipf_requests`` requests drawn with a fixed seed
from ``zipf_texts`` distinct one-sentence texts, the text of rank k with weight 1/k (a Zipf law), sent by
20 concurrent clients to one worker of the real ``kokoro-onnx`` engine, with the worker's default settings (its
segment cache on, as in production). Twice, each time on fresh deployments: all the requests sent at once (a
backlog; a duplicate is read long after its text's synthesis), and in turn (each client sends its next request once
its last is done, as users waiting for their audio do; a duplicate then comes while its text is being synthesized or
just after). Each distinct text needs one synthesis; every other request should be
answered from it, and the ideal is one claim per synthesis with the engine busy all the time. The engine alone,
called in a tight loop in this process over the distinct texts drawn, is the time the work takes with no service
around it.

Measured per system: submissions, distinct texts drawn, syntheses (segments the engine rendered), segments the
worker took from its segment cache, claims (voxlog: ``JobClaimed`` events of the run's jobs; the baseline: its
jobs' attempts, as (d) counts them), completions answered from a cached result (voxlog: ``JobCompleted`` with
``cache_hit``; the baseline: jobs coalesced onto another at insert), the wall time from the first submission to
the last job visible, the engine's busy share of it (its synthesis counter over the wall time), the cores the
worker process used, and CPU per job by process.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Literal

import httpx

from bench.cpu import per_job_ms, wait_quiet
from bench.deploy import Deployment
from bench.errors import BenchError
from bench.measure import TERMINAL, Client, JobTiming, Submission
from bench.reference import EngineLoop
from bench.scenarios import DONE_WITHIN_S, SYSTEMS, Context, _backlog, _voice, _wall
from foundation.metrics import parse_totals

ENGINE: Final = "kokoro-onnx"
SEED: Final = 41  # the number: the same draw in every run, so that runs compare
EXPONENT: Final = 1.0
# No backlog limit: what is measured is what duplicates cost, not admission (the baseline has none). With the
# limit (600 s) voxlog answered 429 to one of the 1,000 requests sent at once: it estimated 601 s of synthesis
# ahead, where the engine alone takes about 190 s for all 144 distinct texts drawn.
DEPLOY_ENV: Final = {"VOXLOG_SEGMENT_CACHE": "true", "VOXLOG_MAX_BACKLOG_S": "0"}
Arrival = Literal["at_once", "in_turn"]
# How the requests come: all sent at once (a backlog), or each client sending its next once its last is done.
ARRIVALS: Final[tuple[Arrival, ...]] = ("at_once", "in_turn")

_VOXLOG_CLAIMS: Final = "SELECT count(*) FROM job_events WHERE type = 'JobClaimed' AND job_id = ANY($1::uuid[])"
_VOXLOG_FROM_CACHE: Final = "SELECT count(*) FROM jobs WHERE cache_hit AND job_id = ANY($1::uuid[])"
_VOXLOG_EVENTS: Final = "SELECT type, count(*) AS n FROM job_events WHERE job_id = ANY($1::uuid[]) GROUP BY type"
# Jobs claimed more than once: a claim given back (released, retried) is another claim, not a duplicate's.
_VOXLOG_RECLAIMED: Final = (
    "SELECT count(*) FROM (SELECT job_id FROM job_events WHERE type = 'JobClaimed' AND job_id = ANY($1::uuid[])"
    " GROUP BY job_id HAVING count(*) > 1) AS again"
)
# Which of the given jobs are done, as bench.measure's Client.wait_done counts them.
_VOXLOG_DONE: Final = "SELECT job_id FROM jobs WHERE job_id = ANY($1::uuid[]) AND state = ANY($2::text[])"
_BASELINE_DONE: Final = (
    "SELECT j.job_id FROM bl_jobs j LEFT JOIN bl_jobs s ON s.job_id = j.source_job_id"
    " WHERE j.job_id = ANY($1::uuid[]) AND coalesce(s.state, j.state) = ANY($2::text[])"
)
_BASELINE_CLAIMS: Final = "SELECT coalesce(sum(attempts), 0) FROM bl_jobs WHERE job_id = ANY($1::uuid[])"
_BASELINE_FROM_CACHE: Final = (
    "SELECT count(*) FROM bl_jobs WHERE source_job_id IS NOT NULL AND job_id = ANY($1::uuid[])"
)


def zipf_draw(requests: int, texts: int, seed: int = SEED, exponent: float = EXPONENT) -> list[int]:
    """``requests`` text indices in ``range(texts)``, index k drawn with weight 1/(k+1)^exponent."""
    if texts < 1 or requests < 0:
        raise ValueError(f"a Zipf draw needs texts >= 1 and requests >= 0, not {texts} and {requests}")
    weights = [1 / rank**exponent for rank in range(1, texts + 1)]
    return random.Random(seed).choices(range(texts), weights=weights, k=requests)  # noqa: S311 - not a secret


async def engine_counters(d: Deployment) -> dict[str, float]:
    """The workers' counters summed: engine seconds, segments rendered, segments taken from the segment cache."""
    totals: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=10) as client:
        for port in d.metrics_ports.values():
            for key, value in parse_totals((await client.get(f"http://127.0.0.1:{port}/metrics")).text).items():
                totals[key] = totals.get(key, 0.0) + value
    return {
        "synthesis_s": totals.get("voxlog_synthesis_seconds_total", 0.0),
        "segments": totals.get("voxlog_segments_rendered_total", 0.0),
        "reused": totals.get("voxlog_segments_reused_total", 0.0),
    }


def load_figures(
    drawn: Sequence[int],
    before: dict[str, float],
    after: dict[str, float],
    claims: int,
    from_cache: int,
    wall_s: float,
    cpu: dict[str, float],
) -> dict[str, Any]:
    """One system's figures: what the engine did against the claims the system took, and the time it took."""
    jobs = len(drawn)
    syntheses = round(after["segments"] - before["segments"])
    synthesis_s = after["synthesis_s"] - before["synthesis_s"]
    worker_s = cpu.get("workers", 0.0) * jobs / 1000
    return {
        "submissions": jobs,
        "distinct_texts": len(set(drawn)),
        "syntheses": syntheses,
        "segments_reused": round(after["reused"] - before["reused"]),
        "claims": claims,
        "claims_beyond_syntheses": claims - syntheses,
        "from_cache": from_cache,
        "wall_s": wall_s,
        "synthesis_s": synthesis_s,
        "busy_share": synthesis_s / wall_s if wall_s else 0.0,
        "worker_cores": worker_s / wall_s if wall_s else 0.0,
        "cpu_ms_per_job": cpu,
    }


async def _claims(d: Deployment, job_ids: list[str]) -> tuple[int, int, dict[str, Any]]:
    """Claims and completions from a cached result of the run's jobs, and (voxlog) its events by type."""
    if d.system == "baseline":
        return int(await d.scalar(_BASELINE_CLAIMS, job_ids)), int(await d.scalar(_BASELINE_FROM_CACHE, job_ids)), {}
    events = {str(r["type"]): int(r["n"]) for r in await d.rows(_VOXLOG_EVENTS, job_ids)}
    extra = {"events": events, "jobs_claimed_again": int(await d.scalar(_VOXLOG_RECLAIMED, job_ids))}
    return int(await d.scalar(_VOXLOG_CLAIMS, job_ids)), int(await d.scalar(_VOXLOG_FROM_CACHE, job_ids)), extra


async def _done_of(c: Client, job_ids: list[str]) -> set[str]:
    """Which of ``job_ids`` are completed or failed in the tables the API reads."""
    sql = _VOXLOG_DONE if c.voxlog else _BASELINE_DONE
    return {str(r["job_id"]) for r in await c.db.fetch(sql, job_ids, list(TERMINAL))}


async def _in_turn(
    c: Client,
    texts: Sequence[str],
    clients: int,
    done_of: Callable[[list[str]], Awaitable[set[str]]],
    poll_s: float = 0.05,
) -> list[Submission]:
    """``clients`` users, each sending its next request once its last is done: a duplicate then comes while its
    text is being synthesized or just after, not long after as in a backlog sent at once. One poller asks
    ``done_of`` for every user's job (the client has one database connection, which takes one query at a time)."""
    sent: list[Submission | None] = [None] * len(texts)
    order = iter(enumerate(texts))  # shared: each user takes the next request when it is free
    waiting: dict[str, asyncio.Future[None]] = {}
    since: dict[str, float] = {}  # each job's own deadline, as Client.wait_done gives a backlog

    async def user() -> None:
        for i, text in order:
            sent[i] = submission = await c.submit(text)
            waiting[submission.job_id] = asyncio.get_running_loop().create_future()
            since[submission.job_id] = time.monotonic()
            await waiting[submission.job_id]

    async def poller() -> None:
        while True:
            if waiting:
                for job_id in await done_of(sorted(waiting)):
                    waiting.pop(job_id).set_result(None)
                    del since[job_id]
            if since and time.monotonic() - min(since.values()) > DONE_WITHIN_S:
                raise BenchError(f"a job not done within {DONE_WITHIN_S:.0f} s of its submission")
            await asyncio.sleep(poll_s)

    polling = asyncio.create_task(poller())
    users = asyncio.gather(*(user() for _ in range(clients)))
    try:
        either: list[asyncio.Future[Any]] = [polling, users]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if polling.done():
            users.cancel()
            polling.result()  # its error
        await users
    finally:
        polling.cancel()
    return [s for s in sent if s is not None]


async def _send(
    c: Client, arrival: Arrival, texts: Sequence[str], clients: int, meter: Callable[[], dict[str, float]]
) -> tuple[list[Submission], list[JobTiming], dict[str, float]]:
    """The requests sent as ``arrival`` says, until all are done, with each process's CPU per job over that span."""
    cpu: dict[str, float] = {}
    if arrival == "at_once":
        submissions, timings = await _backlog(c, texts, cpu, meter)
        return submissions, timings, cpu
    before = meter()
    submissions = await _in_turn(c, texts, clients, lambda ids: _done_of(c, ids))
    cpu.update(per_job_ms(before, meter(), len(submissions)))
    timings = await c.timings(submissions)
    await c.confirm_via_api([s.job_id for s in submissions])
    return submissions, timings, cpu


async def zipf_load(ctx: Context, reference: EngineLoop) -> dict[str, Any]:
    """(o) a Zipf-distributed load over few texts, one real-model worker: claims against syntheses."""
    p = ctx.profile
    vocabulary = ctx.texts("zipf", p.zipf_texts)
    drawn = zipf_draw(p.zipf_requests, p.zipf_texts)
    texts = [vocabulary[i] for i in drawn]
    distinct = [vocabulary[i] for i in sorted(set(drawn))]
    out: dict[str, Any] = {
        "requests": p.zipf_requests,
        "texts": p.zipf_texts,
        "clients": p.zipf_clients,
        "seed": SEED,
        "exponent": EXPONENT,
        "most_drawn": max(drawn.count(i) for i in set(drawn)) if drawn else 0,
        "drawn_once": sum(drawn.count(i) == 1 for i in set(drawn)),
    }
    ctx.say(f"(o) engine alone: the {len(distinct)} distinct texts drawn, in a tight loop")
    quiet = await wait_quiet()
    out["engine_alone"] = {**reference.saturation(distinct), "machine_busy_before": quiet}
    for arrival in ARRIVALS:
        for system in SYSTEMS:
            # A fresh deployment each time (nothing cached from the last run), with the worker's defaults (segment
            # cache on): the scenario is the production path for duplicates.
            async with ctx.deploy(system, ENGINE, extra=DEPLOY_ENV) as d:
                await d.scale_to(1)
                async with Client(d, ENGINE, await _voice(d), concurrency=p.zipf_clients) as c:
                    await _backlog(c, ctx.texts(f"{d.tag}warm", 1))  # unmeasured: the model's first call
                    ctx.say(
                        f"(o) {system}, {arrival.replace('_', ' ')}: {len(texts)} requests over {len(distinct)} "
                        f"texts, {p.zipf_clients} clients"
                    )
                    quiet = await wait_quiet()
                    before = await engine_counters(d)
                    submissions, timings, cpu = await _send(c, arrival, texts, p.zipf_clients, lambda: ctx.cpu(d))
                    after = await engine_counters(d)
                    claims, from_cache, extra = await _claims(d, [s.job_id for s in submissions])
                    figures = out.setdefault(arrival, {})[system] = {
                        **load_figures(drawn, before, after, claims, from_cache, _wall(timings), cpu),
                        **extra,
                        "machine_busy_before": quiet,
                    }
                    ctx.say(
                        f"    {figures['claims']} claims for {figures['syntheses']} syntheses, "
                        f"{figures['from_cache']} from cache; {figures['wall_s']:.1f} s, engine busy "
                        f"{figures['busy_share']:.0%}, worker {figures['worker_cores']:.2f} cores"
                    )
    return out
