"""``python -m bench.profile_cpu``: where voxlog's CPU goes under a zero-time-engine backlog.

Brings up the bench's own Kafka and PostgreSQL, deploys voxlog with ``bench-sleep`` at 0 ms and
``--workers`` workers, warms it up, then submits ``--jobs`` jobs with 32 concurrent clients while
py-spy samples every voxlog process (API, projector, workers) on CPU only. It prints, per process,
the functions with the most samples of their own and the voxlog functions with the most samples
under them, and keeps the raw collapsed stacks under ``bench/results/profile-*``.

A diagnostic, not a benchmark: sampling costs CPU on a 2-core machine, so compare shares within a
profile, and take throughput from ``voxlog bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from bench.deploy import ROOT
from bench.measure import Client
from bench.profiles import FULL
from bench.run import Progress, _lines
from bench.scenarios import BENCH_ENGINE, Context, _voice
from foundation.kafka_access import KafkaAccess
from foundation.settings import default_state_root
from voxlog.corpus import corpus_dir
from voxlog.devstack import scratch_stack

OURS: Final = ("contracts/", "producers/", "consumers/", "projections/", "tts_node/", "foundation/", "voxlog/")


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


async def profile(workers: int, jobs: int, warmup: int, out: Path, say: Progress) -> None:
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
        async with ctx.deploy("voxlog", BENCH_ENGINE) as d:
            await d.scale_to(workers)
            async with Client(d, BENCH_ENGINE, await _voice(d)) as c:
                say(f"warming up with {warmup} jobs")
                await c.wait_done([s.job_id for s in await c.submit_all(ctx.texts("warm", warmup))], 300)
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
                say(f"profiling {jobs} jobs on {workers} worker(s)")
                started = time.monotonic()
                await c.wait_done([s.job_id for s in await c.submit_all(ctx.texts("prof", jobs))], 300)
                say(f"{jobs / (time.monotonic() - started):.1f} jobs/s under the profiler")
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
    parser = argparse.ArgumentParser(prog="python -m bench.profile_cpu", description=__doc__)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=1500)
    args = parser.parse_args(argv)
    out = ROOT / "bench" / "results" / f"profile-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir(parents=True)
    asyncio.run(profile(args.workers, args.jobs, args.warmup, out, Progress()))
    report(out)
    print(f"raw stacks: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
