"""Scenarios (a) to (f). Each runs voxlog and the baseline one after the other, in the same run.

Every figure comes from a measurement taken here: client clocks for
submission, Postgres commit times for visibility, the workers' Prometheus
counters for engine time. Nothing is asserted about speed.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench.cpu import per_job_ms, snapshot, wait_quiet
from bench.deploy import Deployment, System
from bench.measure import Client, JobTiming, Submission, summarize
from bench.profiles import Profile
from bench.reference import EngineLoop
from foundation.kafka_access import KafkaAccess
from tts_node.segmenter import sentence_spans

SYSTEMS: Final[tuple[System, ...]] = ("voxlog", "baseline")
BENCH_ENGINE: Final = "bench-sleep"
DONE_WITHIN_S: Final = 600.0
# Consecutive milestones of a job (fields of JobTiming): where its time goes.
TIMELINE: Final = ("submitted", "recorded", "accepted", "claimed", "produced", "completed", "visible")


@dataclass(frozen=True)
class Context:
    kafka: KafkaAccess
    database_url: str
    home: Path
    profile: Profile
    short_texts: tuple[str, ...]
    paragraphs: tuple[str, ...]
    say: Callable[[str], None]
    drop_data: bool = False  # drop each deployment's schema and topics when it ends
    services: Callable[[], dict[str, list[int]]] = dict  # Kafka's and Postgres's processes, for CPU accounting

    def cpu(self, d: Deployment) -> dict[str, float]:
        return snapshot({**self.services(), **d.pids(), "client": [os.getpid()]})

    def deploy(
        self,
        system: System,
        engine: str,
        synth_ms: float = 0.0,
        ms_per_char: float = 0.0,
        extra: dict[str, str] | None = None,
    ) -> Deployment:
        env = {
            "VOXLOG_ENGINE": engine,
            "VOXLOG_BENCH_SYNTH_MS": str(synth_ms),
            "VOXLOG_BENCH_MS_PER_CHAR": str(ms_per_char),
            "VOXLOG_DEFAULT_ENGINE": engine,
            # Every measured sentence is synthesized, as the engine-alone reference does: (f) streams a
            # paragraph (c) already said, which the segment cache would answer without the engine.
            "VOXLOG_SEGMENT_CACHE": "false",
            **(extra or {}),
        }
        return Deployment(system, self.kafka, self.database_url, self.home, env, drop_data=self.drop_data)

    def texts(self, tag: str, count: int) -> list[str]:
        """``count`` distinct one-segment texts (distinct fingerprints: nothing coalesces by accident;
        one segment, one engine call). The tag goes in brackets, not after a comma: bench-sleep
        segments as the real engines do, and a comma after four words would be the quick-start cut."""
        base = [text.rstrip(".!?") for text in self.short_texts]
        return [f"{base[i % len(base)]} (take {tag} {i})." for i in range(count)]


async def _voice(d: Deployment) -> str:
    table = "nodes" if d.system == "voxlog" else "bl_nodes"
    return str(await d.scalar(f"SELECT voices[1] FROM {table} LIMIT 1"))


def _wall(timings: Sequence[JobTiming]) -> float:
    return max(t.visible for t in timings) - min(t.submitted for t in timings)


def _timeline(timings: Sequence[JobTiming]) -> dict[str, dict[str, float]]:
    out = {}
    for a, b in itertools.pairwise(TIMELINE):
        gaps = []
        for t in timings:
            start, end = getattr(t, a), getattr(t, b)
            if start is not None and end is not None:
                gaps.append(end - start)
        out[f"{a}_to_{b}"] = summarize(gaps)
    return out


def backlog_figures(timings: Sequence[JobTiming], cpu: dict[str, float]) -> dict[str, Any]:
    """A backlog's rate from the first submission to the last job visible, its latency and CPU per job."""
    wall = _wall(timings)
    return {
        "jobs": len(timings),
        "wall_s": wall,
        "jobs_per_s": len(timings) / wall,
        "latency": summarize([t.visible - t.submitted for t in timings]),
        "cpu_ms_per_job": cpu,
    }


async def _backlog(
    c: Client, texts: Sequence[str], cpu: dict[str, float] | None = None, meter: Callable[[], dict[str, float]] = dict
) -> tuple[list[Submission], list[JobTiming]]:
    """Submit ``texts`` at once and wait until all are done; with ``cpu``, fill it with ``meter``'s
    CPU per job over exactly that span (not the reads and checks that follow)."""
    before = meter()
    submissions = await c.submit_all(texts)
    await c.wait_done([s.job_id for s in submissions], DONE_WITHIN_S)
    if cpu is not None:
        cpu.update(per_job_ms(before, meter(), len(submissions)))
    timings = await c.timings(submissions)
    await c.confirm_via_api([s.job_id for s in submissions])
    return submissions, timings


async def warm_up(ctx: Context) -> dict[str, Any]:
    """Unmeasured: bring the shared broker and database to steady state before any figure is taken.

    A fresh broker JVM needs thousands of requests before its JIT settles (on this
    machine its CPU per job fell by half over the first few thousand jobs), and
    production brokers run warm; so each system pushes a batch of jobs first.
    """
    rates: dict[str, Any] = {}
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE) as d:
            await d.scale_to(2)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                done = 0
                while done < ctx.profile.broker_warmup_jobs:
                    batch = min(500, ctx.profile.broker_warmup_jobs - done)
                    _, timings = await _backlog(c, ctx.texts(f"{d.tag}warm{done}", batch))
                    done += batch
                    rates.setdefault(system, []).append(batch / _wall(timings))
                    ctx.say(f"warming up {system}: {done} jobs, {rates[system][-1]:.1f} jobs/s")
    return {"jobs_per_s_by_batch": rates}


async def light_and_throughput(ctx: Context) -> dict[str, Any]:
    """(b) per-job overhead at light load, then (a) orchestration throughput with 1, 2, 4 workers."""
    p = ctx.profile
    out: dict[str, Any] = {"light": {}, "throughput": {}}
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE) as d:
            await d.scale_to(1)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                # Unmeasured: the broker's JIT, Postgres's caches and both systems' code paths warm up.
                ctx.say(f"warming up {system} with {p.warmup_jobs} jobs")
                await _backlog(c, ctx.texts(f"{d.tag}warm", p.warmup_jobs))
                ctx.say(f"(b) {system}: {p.light_jobs} jobs one at a time")
                before = await d.engine_totals()
                submissions = []
                for text in ctx.texts(d.tag, p.light_jobs):
                    submission = await c.submit(text)
                    await c.wait_done([submission.job_id], 60, poll_s=0.01)
                    submissions.append(submission)
                after = await d.engine_totals()
                timings = await c.timings(submissions)
                synthesis = (after["synthesis_s"] - before["synthesis_s"]) / len(timings)
                out["light"][system] = {
                    "synthesis_per_job_ms": synthesis * 1000,
                    "end_to_end": summarize([t.visible - t.submitted for t in timings]),
                    "overhead": summarize([t.visible - t.submitted - synthesis for t in timings]),
                    "submit_to_claimed": summarize([t.claimed - t.submitted for t in timings if t.claimed]),
                    "claimed_to_first_segment_visible": summarize(
                        [t.first_segment - t.claimed for t in timings if t.first_segment and t.claimed]
                    ),
                    "completed_to_visible": summarize([t.visible - t.completed for t in timings if t.completed]),
                    "timeline": _timeline(timings),
                }
                for workers in p.throughput_workers:
                    await d.scale_to(workers)
                    ctx.say(f"(a) {system}: {p.throughput_jobs} jobs, {workers} worker(s)")
                    cpu: dict[str, float] = {}
                    texts = ctx.texts(f"{d.tag}w{workers}", p.throughput_jobs)
                    _, timings = await _backlog(c, texts, cpu, lambda: ctx.cpu(d))
                    figures = out["throughput"].setdefault(system, {})[str(workers)] = backlog_figures(timings, cpu)
                    ctx.say(f"    {figures['jobs_per_s']:.1f} jobs/s")
    return out


async def coalescing(ctx: Context) -> dict[str, Any]:
    """(d) many submissions over few texts at once: one synthesis per text, and the duplicates' latency."""
    p = ctx.profile
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        async with ctx.deploy(system, BENCH_ENGINE, p.coalesce_synth_ms) as d:
            await d.scale_to(1)
            async with Client(d, BENCH_ENGINE, await _voice(d), concurrency=64) as c:
                distinct = ctx.texts(d.tag, p.coalesce_texts)
                texts = [distinct[i % len(distinct)] for i in range(p.coalesce_submissions)]
                random.Random(7).shuffle(texts)  # noqa: S311 - a fixed order, not a secret
                ctx.say(f"(d) {system}: {len(texts)} submissions over {len(distinct)} texts")
                before = await d.engine_totals()
                submissions, timings = await _backlog(c, texts)
                after = await d.engine_totals()
                first_seen: set[str] = set()
                originals: list[float] = []
                duplicates: list[float] = []
                for s, t in sorted(zip(submissions, timings, strict=True), key=lambda st: st[0].submitted):
                    (duplicates if s.text in first_seen else originals).append(t.visible - t.submitted)
                    first_seen.add(s.text)
                claims_sql = (
                    "SELECT count(*) FROM job_events WHERE type = 'JobClaimed'"
                    if system == "voxlog"
                    else "SELECT coalesce(sum(attempts), 0) FROM bl_jobs"
                )
                out[system] = {
                    "submissions": len(texts),
                    "distinct_texts": len(distinct),
                    "syntheses": round(after["segments"] - before["segments"]),
                    "claims": int(await d.scalar(claims_sql)),
                    "wall_s": _wall(timings),
                    "originals": summarize(originals),
                    "duplicates": summarize(duplicates),
                }
                ctx.say(f"    {out[system]['syntheses']} syntheses")
    return out


# (e) also runs voxlog with every job in its fingerprint's partition (the placement before producers.placement).
KEY_PLACEMENT: Final = "voxlog_key"


async def scale_out(ctx: Context) -> dict[str, Any]:
    """(e) a 200 ms engine with more and more workers, against the ideal workers / 0.2 s; voxlog twice: with
    its default placement (the least loaded partition) and with each job in its fingerprint's partition."""
    p = ctx.profile
    out: dict[str, Any] = {}
    runs: list[tuple[str, System, dict[str, str] | None]] = [(system, system, None) for system in SYSTEMS]
    runs.append((KEY_PLACEMENT, "voxlog", {"VOXLOG_JOB_PLACEMENT": "key"}))
    for name, system, extra in runs:
        async with (
            ctx.deploy(system, BENCH_ENGINE, p.scale_synth_ms, extra=extra) as d,
            Client(d, BENCH_ENGINE, "bench_tone", concurrency=64) as c,
        ):
            for workers in p.scale_workers:
                await d.scale_to(workers)
                jobs = p.scale_jobs_per_worker * workers
                ctx.say(f"(e) {name}: {jobs} jobs, {workers} worker(s)")
                submissions, timings = await _backlog(c, ctx.texts(f"{d.tag}w{workers}", jobs))
                wall = _wall(timings)
                ideal = workers / (p.scale_synth_ms / 1000)
                shares = await d.rows(
                    "SELECT worker_id, count(*) AS n FROM "
                    + ("jobs" if system == "voxlog" else "bl_jobs")
                    + " WHERE job_id = ANY($1::uuid[]) GROUP BY worker_id",
                    [s.job_id for s in submissions],
                )
                out.setdefault(name, {})[str(workers)] = {
                    "jobs": jobs,
                    "wall_s": wall,
                    "jobs_per_s": jobs / wall,
                    "ideal_jobs_per_s": ideal,
                    "efficiency": jobs / wall / ideal,
                    "busiest_worker_jobs": max((int(r["n"]) for r in shares), default=0),
                    "worker_jobs": sorted((int(r["n"]) for r in shares), reverse=True),
                    "latency": summarize([t.visible - t.submitted for t in timings]),
                }
                ctx.say(f"    {jobs / wall:.1f} jobs/s (ideal {ideal:.0f})")
    return out


async def saturation_and_first_audio(ctx: Context, reference: EngineLoop) -> dict[str, Any]:
    """(c) the real engine with a backlog of paragraphs, and (f) time to first audio on the idle system."""
    p = ctx.profile
    # The shortest first: the full profile takes them all, the quick one only what a smoke run needs.
    paragraphs = sorted(ctx.paragraphs, key=len)[: p.saturation_paragraphs]
    ctx.say(f"(c) engine alone: {len(paragraphs)} paragraph(s) in a tight loop")
    quiet = await wait_quiet()
    out: dict[str, Any] = {"saturation": {"engine_alone": reference.saturation(paragraphs)}, "first_audio": {}}
    out["saturation"]["engine_alone"]["machine_busy_before"] = quiet
    # The backlog's paragraph with the most sentences: streaming matters most there (ties: the first
    # in the corpus, whatever order the backlog took). Counted in sentences, not segments, so that a
    # change of the segmenter's rules does not change which paragraph is measured.
    in_backlog = [text for text in ctx.paragraphs if text in paragraphs]
    streamed = max(in_backlog, key=lambda text: len(sentence_spans(text)))
    ctx.say("(f) engine alone: first segment of a paragraph")
    out["first_audio"]["engine_alone"] = reference.first_audio(streamed, p.first_audio_runs)
    out["first_audio"]["paragraph"] = streamed
    for system in SYSTEMS:
        async with ctx.deploy(system, "kokoro-onnx") as d:
            await d.scale_to(1)
            async with Client(d, "kokoro-onnx", await _voice(d)) as c:
                ctx.say(f"(c) {system}: {len(paragraphs)} paragraph(s) through the real model")
                quiet = await wait_quiet()
                before = await d.engine_totals()
                _, timings = await _backlog(c, paragraphs)
                after = await d.engine_totals()
                wall = _wall(timings)
                synthesis = after["synthesis_s"] - before["synthesis_s"]
                audio = after["audio_s"] - before["audio_s"]
                out["saturation"][system] = {
                    "jobs": len(timings),
                    "wall_s": wall,
                    "synthesis_s": synthesis,
                    "audio_s": audio,
                    "busy_fraction": synthesis / wall,
                    "audio_s_per_wall_s": audio / wall,
                    "machine_busy_before": quiet,
                }
                ctx.say(f"    busy {synthesis / wall:.0%}, {audio / wall:.2f} audio s per s")
                firsts, totals, engine = [], [], []
                for run in range(p.first_audio_runs):
                    ctx.say(f"(f) {system}: streamed paragraph, run {run + 1}")
                    before = await d.engine_totals()
                    first, total = await c.first_audio(f"{streamed} Run {d.tag} {run}.")
                    firsts.append(first)
                    totals.append(total)
                    engine.append((await d.engine_totals())["synthesis_s"] - before["synthesis_s"])
                out["first_audio"][system] = {
                    "first_audio": summarize(firsts),
                    "whole_stream": summarize(totals),
                    "synthesis": summarize(engine),  # the engine's own time for the whole paragraph
                }
                if system == "voxlog":  # what the official openai client sends: no stream_format, mp3
                    runs = [await c.first_audio(f"{streamed} Default {run}.", default_request=True) for run in range(2)]
                    out["first_audio"][system]["default_first_byte"] = summarize([first for first, _ in runs])
                    out["first_audio"][system]["default_whole"] = summarize([whole for _, whole in runs])
    # Again at the end: the two tight loops bracket the run, so their gap is this machine's noise.
    ctx.say(f"(c) engine alone again: {len(paragraphs)} paragraph(s)")
    quiet = await wait_quiet()
    out["saturation"]["engine_alone_again"] = {**reference.saturation(paragraphs), "machine_busy_before": quiet}
    return out
