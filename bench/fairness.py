"""Scenarios (l) short behind long and (m) tenants: issue 27's fair, preemptive scheduling.

(l) A few long texts are submitted at once, then many one-sentence requests
at once, to two workers. voxlog runs as configured (its workers hold several
claims, their segments interleaved by the policy), then with
``VOXLOG_HELD_CLAIMS=1`` (one job at a time, the lever measured alone), then
the baseline, whose ``SKIP LOCKED`` queue is strict FIFO. The figures: the
short requests' latency against their own synthesis time plus one segment,
the makespan against the ideal (all the engine time over the workers), and
the long jobs' finish against what strict FIFO gave them.

(m) Tenant A submits a large batch; then tenant B submits interactive
requests one at a time and a batch of its own. B's interactive latency is set
against the same trickle on the idle system, and B's batch against how long
A's took to drain: fair scheduling finishes it in about its share of the
fleet, not after A's.
"""

from __future__ import annotations

import asyncio
import heapq
import subprocess
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.deploy import Deployment, System
from bench.errors import BenchError
from bench.measure import Client, JobTiming, Submission, summarize
from bench.mixed_load import _one_batch
from bench.scenarios import BENCH_ENGINE, DONE_WITHIN_S, Context, _voice
from tts_node.bench_sleep import BenchSleepEngine
from voxlog.deployment import VOXLOG_CLI

GROUP_REFRESH_S = 3.0


def _long_texts(ctx: Context, count: int, chars: int, tag: str) -> list[str]:
    """``count`` distinct texts of about ``chars`` characters, from the corpus's paragraphs."""
    out = []
    for i in range(count):
        text, k = f"Long text {tag} {i}.", i
        while len(text) < chars:
            text += " " + ctx.paragraphs[k % len(ctx.paragraphs)]
            k += 1
        out.append(text[:chars].rsplit(" ", 1)[0] + ".")
    return out


def _engine_s(texts: Sequence[str], synth_ms: float, ms_per_char: float) -> list[float]:
    """Each text's synthesis time on ``bench-sleep``, segment by segment as it splits it."""
    engine = BenchSleepEngine(synth_ms, ms_per_char=ms_per_char)
    return [sum(engine.seconds_for(s) for s in engine.segment(t, "en-us")) for t in texts]


def best_short_latencies(own_s: Sequence[float], engines: int) -> list[float]:
    """The least latency any schedule can give requests that all arrive at once on ``engines`` engines: shortest
    first, each engine taking the next as it frees, with nothing else (no long text's segment) in the way. Their
    p99 is the floor of a burst: the k-th request waits for the k-1 before it, whatever the policy."""
    free = [0.0] * engines
    done = []
    for own in sorted(own_s):
        start = heapq.heappop(free)
        done.append(start + own)
        heapq.heappush(free, start + own)
    return done


def _longest_segment_s(texts: Sequence[str], synth_ms: float, ms_per_char: float) -> float:
    engine = BenchSleepEngine(synth_ms, ms_per_char=ms_per_char)
    return max(engine.seconds_for(s) for t in texts for s in engine.segment(t, "en-us"))


async def short_behind_long(ctx: Context) -> dict[str, Any]:
    """(l) one-sentence requests submitted just after a few long texts."""
    p = ctx.profile
    long_texts = _long_texts(ctx, p.sbl_long, p.sbl_long_chars, "sbl")
    out: dict[str, Any] = {
        "workers": p.sbl_workers,
        "long_jobs": p.sbl_long,
        "long_chars": p.sbl_long_chars,
        "short_requests": p.sbl_short,
        "ms_per_char": p.sbl_ms_per_char,
        "synth_ms": p.sbl_synth_ms,
        "one_segment_ms": 1000 * _longest_segment_s(long_texts, p.sbl_synth_ms, p.sbl_ms_per_char),
    }
    runs: list[tuple[str, System, dict[str, str]]] = [
        ("voxlog", "voxlog", {}),
        ("voxlog_one_claim", "voxlog", {"VOXLOG_HELD_CLAIMS": "1"}),
        ("baseline", "baseline", {}),
    ]
    for name, system, extra in runs:
        async with ctx.deploy(system, BENCH_ENGINE, p.sbl_synth_ms, p.sbl_ms_per_char, extra=extra) as d:
            await d.scale_to(p.sbl_workers)
            async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=32) as warm:
                # voxlog's API places work by the group's members, which it reads in the background, first at
                # its first submission: without a look at them the long texts may all land on one worker
                # (placement's matter, section (e); this scenario measures scheduling).
                started = await warm.submit_all(ctx.texts(f"{d.tag}warm", 2 * p.sbl_workers))
                await warm.wait_done([s.job_id for s in started], DONE_WITHIN_S)
                await asyncio.sleep(GROUP_REFRESH_S)
            async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=32) as c:
                ctx.say(f"(l) {name}: {p.sbl_long} long texts, then {p.sbl_short} short requests")
                out[name] = await _short_behind_long_run(c, ctx, long_texts, f"{d.tag}sbl")
                r = out[name]
                ctx.say(
                    f"    short p50 {r['short']['median_ms']:.0f} ms, p99 {r['short']['p99_ms']:.0f} ms; makespan "
                    f"{r['makespan_s']:.1f} s (ideal {r['ideal_s']:.1f} s); last long job {r['long_last_s']:.1f} s"
                )
    out["real_model"] = await _real_model(ctx)
    return out


async def _real_model(ctx: Context) -> dict[str, Any]:
    """(l) once with kokoro-onnx: one worker, a few long paragraphs, then short requests; the short ones'
    latency on the idle worker first, as their own synthesis time."""
    p = ctx.profile
    long_texts = _long_texts(ctx, p.sbl_real_long, p.sbl_real_long_chars, "real")
    out: dict[str, Any] = {"long_jobs": p.sbl_real_long, "long_chars": p.sbl_real_long_chars}
    for name, extra in (("voxlog", {}), ("voxlog_one_claim", {"VOXLOG_HELD_CLAIMS": "1"})):
        async with ctx.deploy("voxlog", "kokoro-onnx", extra=extra) as d:
            await d.scale_to(1)
            async with Client(d, "kokoro-onnx", await _voice(d), concurrency=16) as c:
                ctx.say(f"(l) real model, {name}: short requests idle, then behind {p.sbl_real_long} long texts")
                idle = ctx.texts(f"{d.tag}idle", p.sbl_real_short)
                out.setdefault("idle", await _one_at_a_time(c, idle))
                started = time.time()
                longs = await c.submit_all(long_texts)
                shorts = await c.submit_all(ctx.texts(f"{d.tag}behind", p.sbl_real_short))
                await c.wait_done([s.job_id for s in [*longs, *shorts]], DONE_WITHIN_S)
                long_t, short_t = await c.timings(longs), await c.timings(shorts)
                out[name] = {
                    "short": summarize([t.visible - t.submitted for t in short_t]),
                    "long_last_s": max(_done(t) for t in long_t) - started,
                    "makespan_s": max(t.visible for t in [*long_t, *short_t]) - started,
                }
                ctx.say(f"    short p99 {out[name]['short']['p99_ms']:.0f} ms (idle {out['idle']['p99_ms']:.0f} ms)")
    return out


async def _short_behind_long_run(c: Client, ctx: Context, long_texts: list[str], tag: str) -> dict[str, Any]:
    p = ctx.profile
    short_texts = ctx.texts(tag, p.sbl_short)
    started = time.time()
    longs = await c.submit_all(long_texts)
    shorts = await c.submit_all(short_texts)
    await c.wait_done([s.job_id for s in [*longs, *shorts]], DONE_WITHIN_S)
    long_t, short_t = await c.timings(longs), await c.timings(shorts)
    own_s = _engine_s(short_texts, p.sbl_synth_ms, p.sbl_ms_per_char)
    engine_s = sum(_engine_s([*long_texts, *short_texts], p.sbl_synth_ms, p.sbl_ms_per_char))
    last = max(t.visible for t in [*long_t, *short_t])
    return {
        "short": summarize([t.visible - t.submitted for t in short_t]),
        "short_own_ms": summarize(own_s),
        "short_floor": summarize(best_short_latencies(own_s, p.sbl_workers)),
        "makespan_s": last - started,
        "ideal_s": engine_s / p.sbl_workers,
        "long_finish_s": sorted(_done(t) - started for t in long_t),
        "long_last_s": max(_done(t) for t in long_t) - started,
    }


def _done(t: JobTiming) -> float:
    return t.completed if t.completed is not None else t.visible


def _make_key(d: Deployment, tenant: str) -> str:
    made = subprocess.run(
        [*VOXLOG_CLI, "keys", "create", "--tenant", tenant, "--scopes", "submit,read"],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if made.returncode != 0:
        raise BenchError(f"voxlog keys create failed: {made.stderr[-500:]}")
    return made.stdout.splitlines()[0].strip()


async def _keyed(d: Deployment, tenant: str) -> str:
    token = await asyncio.to_thread(_make_key, d, tenant)
    key_id = token.split("_")[1]
    deadline = time.monotonic() + 60
    while not await d.scalar("SELECT count(*) FROM api_keys WHERE key_id = $1", key_id):
        if time.monotonic() > deadline:
            raise BenchError(f"the key of {tenant} was not projected within 60 s")
        await asyncio.sleep(0.1)
    return token


async def tenants(ctx: Context) -> dict[str, Any]:
    """(m) tenant B's work while tenant A's large batch is queued: at a flat 20 ms a request, where
    orchestration is the work and A's flood keeps the CPUs busy, then at a per-character pace, where
    synthesis is (A's backlog is then hours of engine time: the run stops once B's work is measured)."""
    p = ctx.profile
    out: dict[str, Any] = {
        "workers": p.ten_workers,
        "a_batch": p.ten_a_batch,
        "b_interactive": p.ten_b_interactive,
        "b_batch": p.ten_b_batch,
        "synth_ms": p.ten_synth_ms,
    }
    out.update(await _tenants_run(ctx, p.ten_synth_ms, 0.0, drain_a=True))
    paced = {"synth_ms": p.ten_paced_synth_ms, "ms_per_char": p.ten_paced_ms_per_char}
    out["paced"] = paced | await _tenants_run(ctx, p.ten_paced_synth_ms, p.ten_paced_ms_per_char, drain_a=False)
    return out


async def _tenants_run(ctx: Context, synth_ms: float, ms_per_char: float, *, drain_a: bool) -> dict[str, Any]:
    p = ctx.profile
    out: dict[str, Any] = {}
    # Keys, for the tenants; no rate limit: (m) measures the fair schedule, and tenant A's batches of 1,000
    # cost its key a token a job (at the default 20 a second, the second batch was a 429 for 48 s).
    extra = {"VOXLOG_AUTH": "on", "VOXLOG_LIMIT_RATE_PER_S": "0"}
    async with ctx.deploy("voxlog", BENCH_ENGINE, synth_ms, ms_per_char, extra=extra) as d:
        await d.scale_to(p.ten_workers)
        keys = {tenant: await _keyed(d, tenant) for tenant in ("tenant-a", "tenant-b")}
        voice = await _voice(d)
        async with (
            Client(d, BENCH_ENGINE, voice, concurrency=8) as a,
            Client(d, BENCH_ENGINE, voice, concurrency=8) as b,
        ):
            a.http.headers["Authorization"] = f"Bearer {keys['tenant-a']}"
            b.http.headers["Authorization"] = f"Bearer {keys['tenant-b']}"
            pace = f"{synth_ms:g} ms" + (f" + {ms_per_char:g} ms a character" if ms_per_char else "")
            ctx.say(f"(m) at {pace}, idle: {p.ten_b_interactive} interactive requests of tenant B")
            out["idle"] = await _trickle(b, ctx.texts(f"{d.tag}idle", p.ten_b_interactive), p.ten_gap_s)
            ctx.say(f"(m) tenant A submits {p.ten_a_batch} batch requests; then tenant B's work")
            a_started = time.time()
            a_jobs: list[Submission] = []
            a_texts = ctx.texts(f"{d.tag}a", p.ten_a_batch)
            for i in range(0, len(a_texts), 1000):  # a batch holds at most 1,000 requests
                a_jobs += (await _one_batch(a, a_texts[i : i + 1000], "batch"))[0]
            b_texts = ctx.texts(f"{d.tag}bb", p.ten_b_batch)
            b_batch, _ = await _one_batch(b, b_texts, "batch")
            out["b_behind_a"] = await _trickle(b, ctx.texts(f"{d.tag}bi", p.ten_b_interactive), p.ten_gap_s)
            await b.wait_done([s.job_id for s in b_batch], DONE_WITHIN_S)
            b_done = max(_done(t) for t in await b.timings(b_batch))
            out["b_batch_s"] = b_done - b_batch[0].submitted
            # B's batch alone on the fleet (its fair share beside A's, equal weights: half the fleet).
            out["b_alone_s"] = sum(_engine_s(b_texts, synth_ms, ms_per_char)) / p.ten_workers
            # What A's jobs got of the fleet meanwhile: the same share as B's, were the split even.
            out["a_done_meanwhile"] = await a.db.fetchval(
                "SELECT count(*) FROM jobs WHERE job_id = ANY($1::uuid[])"
                " AND completed_at BETWEEN to_timestamp($2) AND to_timestamp($3)",
                [s.job_id for s in a_jobs],
                b_batch[0].submitted,
                b_done,
            )
            if drain_a:
                await a.wait_done([s.job_id for s in a_jobs], DONE_WITHIN_S)
                out["a_batch_s"] = max(_done(t) for t in await a.timings(a_jobs)) - a_started
            else:  # hours of engine time at this pace: the least it could take, every worker busy with A alone
                out["a_batch_ideal_s"] = sum(_engine_s(a_texts, synth_ms, ms_per_char)) / p.ten_workers
            ctx.say(
                f"    B interactive p99 {out['b_behind_a']['p99_ms']:.0f} ms (idle {out['idle']['p99_ms']:.0f}); "
                f"B's batch {out['b_batch_s']:.1f} s (A's jobs done meanwhile {out['a_done_meanwhile']}), "
                + (f"A's {out['a_batch_s']:.1f} s" if drain_a else f"A's at least {out['a_batch_ideal_s']:.0f} s")
            )
    return out


async def _trickle(c: Client, texts: list[str], gap_s: float) -> dict[str, Any]:
    submissions = []
    for text in texts:
        submissions.append(await c.submit(text))
        await asyncio.sleep(gap_s)  # one at a time, as a user would
    await c.wait_done([s.job_id for s in submissions], DONE_WITHIN_S)
    timings = await c.timings(submissions)
    slowest = max(timings, key=lambda t: t.visible - t.submitted)
    return {
        **summarize([t.visible - t.submitted for t in timings]),
        "stages_ms": _stages(timings),
        "slowest_stages_ms": _stages([slowest]),
        # In the order sent, so that where the slowest fell says what it met (the first meets A's submission).
        "each_ms": [1000 * (t.visible - t.submitted) for t in timings],
        "slowest_index": timings.index(slowest),
    }


def _stages(timings: Sequence[JobTiming]) -> dict[str, float]:
    """Median milliseconds of each leg of a request's way, so a latency says where it went."""
    legs: dict[str, list[float]] = {"api": [], "to_claim": [], "claimed": [], "to_visible": []}
    for t in timings:
        if t.claimed is None or t.completed is None:
            continue
        legs["api"].append(t.accepted - t.submitted)
        legs["to_claim"].append(t.claimed - t.recorded)
        legs["claimed"].append(t.completed - t.claimed)
        legs["to_visible"].append(t.visible - t.completed)
    return {leg: 1000 * float(np.median(v)) for leg, v in legs.items() if v}


async def _one_at_a_time(c: Client, texts: list[str]) -> dict[str, float]:
    """Each request alone on the idle system: its latency is its own synthesis and the orchestration's."""
    timings = []
    for text in texts:
        submission = await c.submit(text)
        await c.wait_done([submission.job_id], DONE_WITHIN_S)
        timings += await c.timings([submission])
    return summarize([t.visible - t.submitted for t in timings])
