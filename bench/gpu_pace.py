"""Scenario (n), GPU pace (issue 41): a benchmark engine at a GPU's batched pace, both systems driving it.

Each worker's ``bench-sleep`` engine takes a forward of up to 32 segments in 8 ms plus 0.02 ms per phoneme
id of the batch (about an H200's batched pace for Kokoro; bench.paced's ``VOXLOG_BENCH_BATCH_MS``,
``_MS_PER_ID`` and ``_MAX_BATCH``), on a ``cuda:0`` device: there voxlog's worker forms forwards of up to 32
segments (``voxlog.composition.configs.batch_and_claims``) and so does the baseline's, which claims up to 32
jobs in one ``FOR UPDATE SKIP LOCKED`` statement and speaks them in one call. Four workers take a backlog of
one-sentence jobs (the corpus's ``short.txt``, each made distinct): voxlog submits it in one
``POST /v1/batches``, the baseline (which has no batch endpoint) one by one from 32 clients, as in (i).

Measured: jobs per second from the submission to the last job completed and visible; each worker's engine
busy share (the seconds the engine itself counted in its forwards, over the wall time), its forwards and the
segments in them; CPU per job by process (as (a) and (i) measure it). With the engine this fast, the
machine's cores bound the rate: the scenario also says what the cores allow, the jobs per second if the
server's processes had every core (cores over their CPU seconds per job), and the engine busy share at that
rate, and how many cores the run's processes had (the machine may be busy with other work too).
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from bench.cpu import per_job_ms
from bench.deploy import Deployment
from bench.measure import Client
from bench.mixed_load import _one_batch
from bench.paced import BUSY, FORWARD_SEGMENTS, FORWARDS
from bench.report_goals import _server_cpu
from bench.scenarios import BENCH_ENGINE, DONE_WITHIN_S, SYSTEMS, Context, _backlog, _voice, backlog_figures
from foundation.metrics import parse_totals
from voxlog.composition.batch_sizes import GPU_BATCH

DEVICE = "cuda:0"  # a GPU's device: where a worker batches (no GPU is touched: the engine only sleeps)


def pace_env(batch_ms: float, ms_per_id: float, max_batch: int) -> dict[str, str]:
    """The deployment's environment for the batched pace, on a GPU's device (where voxlog's worker and the
    baseline's batch ``GPU_BATCH`` segments a forward; another batch size is set as well)."""
    env = {
        "VOXLOG_BENCH_BATCH_MS": str(batch_ms),
        "VOXLOG_BENCH_MS_PER_ID": str(ms_per_id),
        "VOXLOG_BENCH_MAX_BATCH": str(max_batch),
        "VOXLOG_DEVICE": DEVICE,
    }
    if max_batch != GPU_BATCH:
        env["VOXLOG_BATCH_SEGMENTS"] = str(max_batch)
    return env


async def engine_counts(d: Deployment) -> dict[str, dict[str, float]]:
    """Each worker's benchmark engine counters (bench.paced.EngineCounters) and its synthesis counter."""
    out: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(timeout=10) as client:
        for name, port in d.metrics_ports.items():
            totals = parse_totals((await client.get(f"http://127.0.0.1:{port}/metrics")).text)
            out[name] = {
                "busy_s": totals.get(f"{BUSY}_total", 0.0),
                "forwards": totals.get(f"{FORWARDS}_total", 0.0),
                "segments": totals.get(f"{FORWARD_SEGMENTS}_total", 0.0),
                "synthesis_s": totals.get("voxlog_synthesis_seconds_total", 0.0),
            }
    return out


def engine_figures(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], wall_s: float
) -> dict[str, Any]:
    """Per worker and overall: the engine's busy share of the wall time, its forwards and segments a forward."""
    workers = {}
    for name in sorted(after):
        delta = {key: after[name][key] - before.get(name, {}).get(key, 0.0) for key in after[name]}
        workers[name] = {
            **delta,
            "busy_share": delta["busy_s"] / wall_s if wall_s else 0.0,
            "segments_per_forward": delta["segments"] / delta["forwards"] if delta["forwards"] else 0.0,
        }
    busy = sum(w["busy_s"] for w in workers.values())
    forwards = sum(w["forwards"] for w in workers.values())
    segments = sum(w["segments"] for w in workers.values())
    return {
        "per_worker": workers,
        "busy_s": busy,
        "busy_share": busy / (wall_s * len(workers)) if wall_s and workers else 0.0,
        "forwards": forwards,
        "segments": segments,
        "segments_per_forward": segments / forwards if forwards else 0.0,
    }


def cores_allow(figures: dict[str, Any], cores: int) -> dict[str, Any]:
    """What the machine's cores allow: the jobs per second if the server's processes had all ``cores`` (cores
    over their CPU seconds per job), against what the engines allow (workers over engine seconds per job);
    the lower bounds the rate, and the engine's busy share at it is the most the run could have shown."""
    jobs, workers = figures["jobs"], len(figures["engine"]["per_worker"])
    cpu_s = _server_cpu(figures["cpu_ms_per_job"]) / 1000
    engine_s = figures["engine"]["busy_s"] / jobs if jobs else 0.0
    by_cores = cores / cpu_s if cpu_s else float("inf")
    by_engine = workers / engine_s if engine_s else float("inf")
    bound = min(by_cores, by_engine)
    allowed_share = min(1.0, bound * engine_s / workers) if workers else 0.0
    cpu = figures["cpu_ms_per_job"]
    used = sum(v for k, v in cpu.items() if k != "machine_busy_fraction") / 1000 * figures["jobs_per_s"]
    return {
        "cores": cores,
        # The cores the run's processes (the client's too) had on average: on a machine busy with other work
        # as well, fewer than it has.
        "cores_used": used,
        "server_cpu_ms_per_job": cpu_s * 1000,
        "engine_ms_per_job": engine_s * 1000,
        "jobs_per_s_by_cores": by_cores,
        "jobs_per_s_by_engine": by_engine,
        "bound": "cores" if by_cores <= by_engine else "engine",
        "allowed_busy_share": allowed_share,
        "of_allowed": figures["engine"]["busy_share"] / allowed_share if allowed_share else 0.0,
    }


async def gpu_pace(ctx: Context) -> dict[str, Any]:
    """(n) a backlog of one-sentence jobs through four workers of an engine at a GPU's batched pace."""
    p = ctx.profile
    out: dict[str, Any] = {
        "jobs": p.gpu_pace_jobs,
        "workers": p.gpu_pace_workers,
        "batch_ms": p.gpu_pace_batch_ms,
        "ms_per_id": p.gpu_pace_ms_per_id,
        "max_batch": p.gpu_pace_max_batch,
        "corpus": "short.txt",
    }
    env = pace_env(p.gpu_pace_batch_ms, p.gpu_pace_ms_per_id, p.gpu_pace_max_batch)
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE, extra=env) as d:
            await d.scale_to(p.gpu_pace_workers)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                await _backlog(c, ctx.texts(f"{d.tag}warm", p.warmup_jobs))  # unmeasured
                texts = ctx.texts(f"{d.tag}gpu", p.gpu_pace_jobs)
                engine_before, before = await engine_counts(d), ctx.cpu(d)
                started = time.time()
                if system == "voxlog":
                    ctx.say(f"(n) {system}: one batch of {len(texts)} one-sentence jobs, {p.gpu_pace_workers} workers")
                    submissions, answer_s = await _one_batch(c, texts)
                else:
                    ctx.say(f"(n) {system}: {len(texts)} one-sentence jobs one by one, {p.gpu_pace_workers} workers")
                    submissions = await c.submit_all(texts)
                    answer_s = time.time() - started
                await c.wait_done([s.job_id for s in submissions], DONE_WITHIN_S)
                cpu = per_job_ms(before, ctx.cpu(d), len(submissions))
                engine_after = await engine_counts(d)
                timings = await c.timings(submissions)
                figures = out[system] = {
                    "submission_s": answer_s,
                    "submitted_per_s": len(texts) / answer_s,
                    **backlog_figures(timings, cpu),
                }
                figures["engine"] = engine_figures(engine_before, engine_after, figures["wall_s"])
                figures["cores_allow"] = cores_allow(figures, os.cpu_count() or 1)
                engine = figures["engine"]
                ctx.say(
                    f"    {figures['jobs_per_s']:.0f} jobs/s; engine busy {engine['busy_share']:.1%}, "
                    f"{engine['segments_per_forward']:.1f} segments a forward; bound by "
                    f"{figures['cores_allow']['bound']} ({figures['cores_allow']['of_allowed']:.0%} of the busy "
                    "share it allows)"
                )
    return out
