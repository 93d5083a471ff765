"""``python -m bench.profile_cpu``: where voxlog's CPU goes under a zero-time-engine backlog.

Brings up the bench's own Kafka and PostgreSQL, deploys voxlog with ``bench-sleep`` at 0 ms and
``--workers`` workers, warms it up, then submits ``--jobs`` jobs with 32 concurrent clients while
py-spy samples every voxlog process (API, projector, workers) on CPU only. It prints, per process,
the functions with the most samples of their own and the voxlog functions with the most samples
under them, and keeps the raw collapsed stacks under ``bench/results/profile-*``.

``--pace gpu`` profiles scenario (n)'s pace instead (issue 41): the workers deployed as ``bench.gpu_pace``
deploys them (its ``pace_env`` with the full profile's pace: forwards of up to 32 segments in 8 ms plus
0.02 ms a phoneme id, on a ``cuda:0`` device, where the worker batches; the engine only sleeps), and the
profiled jobs submitted as (n) submits them, in one ``POST /v1/batches``.

A diagnostic, not a benchmark: sampling costs CPU on a 2-core machine, so compare shares within a
profile, and take throughput from ``voxlog bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bench.cpu import _TICK, per_job_ms
from bench.deploy import ROOT, Deployment
from bench.gpu_pace import pace_env
from bench.measure import Client
from bench.mixed_load import _one_batch
from bench.profiles import FULL, Profile
from bench.run import Progress, _lines
from bench.scenarios import BENCH_ENGINE, Context, _voice
from foundation.kafka_access import KafkaAccess
from foundation.settings import default_state_root
from voxlog.corpus import corpus_dir
from voxlog.devstack import scratch_stack

PACES: Final = ("zero", "gpu")
OURS: Final = ("contracts/", "producers/", "consumers/", "projections/", "tts_node/", "foundation/", "voxlog/")


@dataclass(frozen=True)
class Plan:
    """What one profile deploys and submits."""

    workers: int = 1
    jobs: int = 1500
    warmup: int = 1500
    pace: str = "zero"
    env: dict[str, str] = field(default_factory=dict)  # the deployment's environment beyond the bench's own
    one_batch: bool = False  # the profiled jobs in one POST /v1/batches (as scenario (n)), not from 32 clients


def plan(argv: Sequence[str] | None = None, profile: Profile = FULL) -> Plan:
    """The command line's plan: at ``--pace gpu``, scenario (n)'s deployment and submission."""
    parser = argparse.ArgumentParser(prog="python -m bench.profile_cpu", description=__doc__)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=1500)
    parser.add_argument(
        "--pace",
        choices=PACES,
        default="zero",
        help="zero: bench-sleep at 0 ms; gpu: scenario (n)'s batched pace on a cuda:0 device (bench.gpu_pace)",
    )
    args = parser.parse_args(argv)
    gpu = args.pace == "gpu"
    env = pace_env(profile.gpu_pace_batch_ms, profile.gpu_pace_ms_per_id, profile.gpu_pace_max_batch) if gpu else {}
    return Plan(args.workers, args.jobs, args.warmup, args.pace, env, one_batch=gpu)


def thread_seconds(pid: int, proc: Path = Path("/proc")) -> dict[str, float]:
    """CPU seconds so far of a process's main thread (its event loop) and of its other threads together (the
    executors' threads: the engine, encoding and the blob store in a worker). A thread gone is not counted."""
    out = {"main": 0.0, "threads": 0.0}
    try:
        tasks = list((proc / str(pid) / "task").iterdir())
    except FileNotFoundError:
        return out
    for task in tasks:
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out["main" if task.name == str(pid) else "threads"] += (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _threads(d: Deployment) -> dict[str, dict[str, float]]:
    return {f"{name}-{pid}": thread_seconds(pid) for name, pids in d.pids().items() for pid in pids}


def _frames(line: str) -> tuple[list[str], int]:
    stack, _, count = line.rpartition(" ")
    if not count.isdigit():  # a frame's text broke the line (py-spy writes names as they are)
        return [], 0
    return stack.split(";"), int(count)


def summarize(raw: Path, top: int = 25) -> str:
    """Self and inclusive sample shares of one process's collapsed stacks."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        frames, count = _frames(line)
        if not frames:
            continue
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            if any(part in frame for part in OURS):
                under[frame] += count
    if not total:
        return f"{raw.stem}: no samples\n"
    lines = [f"== {raw.stem}: {total} samples on CPU", "-- own time"]
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in own.most_common(top)]
    lines.append("-- under voxlog functions (inclusive)")
    lines += [f"{100 * n / total:5.1f}%  {frame}" for frame, n in under.most_common(top)]
    return "\n".join(lines) + "\n"


async def profile(p: Plan, out: Path, say: Progress) -> None:
    stack = scratch_stack(default_state_root() / "bench" / "profile")
    await stack.up()
    corpus = corpus_dir()
    ctx = Context(
        kafka=KafkaAccess(stack.bootstrap_servers),
        database_url=stack.database_url,
        home=default_state_root() / "bench" / "profile" / "apps",
        profile=FULL,
        short_texts=_lines(corpus / "short.txt"),
        paragraphs=_lines(corpus / "paragraphs.txt"),
        say=say,
    )
    try:
        async with ctx.deploy("voxlog", BENCH_ENGINE, extra=p.env) as d:
            await d.scale_to(p.workers)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                say(f"warming up with {p.warmup} jobs ({p.pace} pace)")
                await c.wait_done([s.job_id for s in await c.submit_all(ctx.texts("warm", p.warmup))], 300)
                samplers = [
                    await asyncio.create_subprocess_exec(
                        *("py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "200"),
                        *("--output", str(out / f"{name}-{pid}.txt"), "--nonblocking"),
                        stdout=asyncio.subprocess.DEVNULL,
                        stderr=asyncio.subprocess.DEVNULL,
                    )
                    for name, pids in d.pids().items()
                    for pid in pids
                ]
                await asyncio.sleep(1.0)  # py-spy attaches
                say(f"profiling {p.jobs} jobs on {p.workers} worker(s) ({p.pace} pace)")
                started, before, threads = time.monotonic(), ctx.cpu(d), _threads(d)
                texts = ctx.texts("prof", p.jobs)
                submissions = (await _one_batch(c, texts))[0] if p.one_batch else await c.submit_all(texts)
                await c.wait_done([s.job_id for s in submissions], 300)
                cpu = per_job_ms(before, ctx.cpu(d), p.jobs)
                by_thread = {
                    proc: {part: 1000 * (seconds - threads[proc][part]) / p.jobs for part, seconds in now.items()}
                    for proc, now in _threads(d).items()
                    if proc in threads
                }
                say(f"{p.jobs / (time.monotonic() - started):.1f} jobs/s under the profiler")
                # From /proc, as the bench counts it: what a sample is worth (py-spy counts a thread that is
                # not asleep, runnable or in a disk wait too, and its own sampling costs CPU).
                say("CPU ms per job under the profiler: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items())))
                for proc, parts in sorted(by_thread.items()):
                    say(f"  {proc}: main thread {parts['main']:.2f}, other threads {parts['threads']:.2f} ms per job")
                figures = {"cpu_ms_per_job": cpu, "by_thread_ms_per_job": by_thread}
                (out / "cpu.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
                for sampler in samplers:
                    sampler.send_signal(signal.SIGINT)  # py-spy writes its file and exits
                for sampler in samplers:
                    await asyncio.wait_for(sampler.wait(), 60)
    finally:
        stack.down(purge=True)


def report(out: Path) -> None:
    for raw in sorted(out.glob("*.txt")):
        print(summarize(raw))


def main(argv: Sequence[str] | None = None) -> int:
    p = plan(argv)
    out = ROOT / "bench" / "results" / f"profile-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    asyncio.run(profile(p, out, Progress()))
    report(out)
    print(f"raw stacks: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
