"""Scenario (j) priorities: interactive requests while a batch backlog is queued.

A backlog of short requests (about 20 minutes of audio) goes in with one
``POST /v1/batches``, so it is batch priority; then interactive requests come
one at a time. Their latency (submitted to visible) is set against the same
trickle on the idle system, and behind the same backlog submitted as
interactive (what voxlog did before priorities: one queue in log order). The
baseline has no priorities; its figure is the last one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.measure import Client, summarize
from bench.mixed_load import _one_batch
from bench.scenarios import BENCH_ENGINE, DONE_WITHIN_S, Context, _voice
from tts_node.bench_sleep import audio_seconds


async def priorities(ctx: Context) -> dict[str, Any]:
    """(j) interactive latency: idle, behind a batch-priority backlog, behind an interactive one."""
    p = ctx.profile
    out: dict[str, Any] = {
        "workers": p.prio_workers,
        "backlog_requests": p.prio_backlog,
        "interactive_requests": p.prio_interactive,
        "ms_per_char": p.prio_ms_per_char,
    }
    async with ctx.deploy("voxlog", BENCH_ENGINE, ms_per_char=p.prio_ms_per_char) as d:
        await d.scale_to(p.prio_workers)
        async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=8) as c:
            ctx.say(f"(j) idle: {p.prio_interactive} interactive requests")
            out["idle"] = await _trickle(c, ctx, f"{d.tag}idle")
            for label, priority in (("behind_batch", "batch"), ("behind_interactive", "interactive")):
                texts = ctx.texts(f"{d.tag}{label}", p.prio_backlog)
                audio_s = out[f"{label}_audio_s"] = sum(audio_seconds(text) for text in texts)
                out["backlog_audio_s"] = min(audio_s, out.get("backlog_audio_s", audio_s))
                ctx.say(f"(j) behind {len(texts)} {priority} requests ({audio_s / 60:.0f} min of audio)")
                backlog, _ = await _one_batch(c, texts, priority)
                out[label] = await _trickle(c, ctx, f"{d.tag}{label}i")
                await c.wait_done([s.job_id for s in backlog], DONE_WITHIN_S)
                ctx.say(f"    interactive p50 {out[label]['median_ms']:.0f} ms, p99 {out[label]['p99_ms']:.0f} ms")
    return out


async def _trickle(c: Client, ctx: Context, tag: str) -> dict[str, float]:
    p = ctx.profile
    submissions = []
    for text in ctx.texts(tag, p.prio_interactive):
        submissions.append(await c.submit(text))
        await asyncio.sleep(p.prio_gap_s)  # one at a time, as a user would
    await c.wait_done([s.job_id for s in submissions], DONE_WITHIN_S)
    timings = await c.timings(submissions)
    return summarize([t.visible - t.submitted for t in timings])
