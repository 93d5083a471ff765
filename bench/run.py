"""``voxlog bench [--quick]``: bring up Kafka and Postgres, run every scenario, write the results.

The stack is the bench's own (fresh data under the state root's ``bench/``,
free loopback ports) and is stopped at the end, pass or fail, like every
process a scenario starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

from bench.cpu import descendants
from bench.deploy import ROOT
from bench.environment import describe
from bench.fairness import short_behind_long, tenants
from bench.gpu_pace import gpu_pace
from bench.mixed_load import batch_submission, head_of_line
from bench.priorities import priorities
from bench.profiles import FULL, QUICK
from bench.reference import EngineLoop
from bench.replay import replay_speed
from bench.report import write_docs
from bench.scenarios import (
    Context,
    coalescing,
    light_and_throughput,
    saturation_and_first_audio,
    scale_out,
    warm_up,
)
from bench.zipf_load import zipf_load
from foundation.kafka_access import KafkaAccess
from foundation.settings import default_cache_root, default_state_root
from infra.stack import DevStack
from tts_node import load_engine
from voxlog.corpus import corpus_dir
from voxlog.devstack import scratch_stack


def _lines(path: Path) -> tuple[str, ...]:
    return tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


class Progress:
    def __init__(self) -> None:
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {message}", file=sys.stderr, flush=True)


def _service_pids(stack: DevStack) -> dict[str, list[int]]:
    kafka, postmaster = stack.kafka.pid(), stack.postgres.pid()
    return {"kafka": [kafka] if kafka else [], "postgres": descendants(postmaster) if postmaster else []}


# Sections of the page measured by commands of their own (bench/degraded_throughput.py, bench/gpu.py on a
# device), merged into the results: a run of `voxlog bench` keeps their last figures.
SEPARATE_RUNS: Final = ("degraded", "gpu")
SCENARIO_GROUPS: Final = (
    "throughput",
    "coalescing",
    "scale_out",
    "real_model",
    "replay",
    "head_of_line",
    "batches",
    "priorities",
    "fairness",
    "gpu_pace",
    "zipf",
)


def _groups(ctx: Context, reference: EngineLoop) -> dict[str, Callable[[], Awaitable[dict[str, Any]]]]:
    """Each scenario group's run, in the order they run: what it adds to the results' scenarios."""

    def named(name: str, scenario: Callable[[Context], Awaitable[dict[str, Any]]]) -> Callable[[], Awaitable[Any]]:
        async def one() -> dict[str, Any]:
            return {name: await scenario(ctx)}

        return one

    async def fairness() -> dict[str, Any]:
        return {"short_behind_long": await short_behind_long(ctx), "tenants": await tenants(ctx)}

    async def zipf() -> dict[str, Any]:
        return {"zipf_load": await zipf_load(ctx, reference)}

    groups: dict[str, Callable[[], Awaitable[dict[str, Any]]]] = {
        "throughput": lambda: light_and_throughput(ctx),
        "coalescing": named("coalescing", coalescing),
        "scale_out": named("scale_out", scale_out),
        "real_model": lambda: saturation_and_first_audio(ctx, reference),
        "replay": named("replay", replay_speed),
        "head_of_line": named("head_of_line", head_of_line),
        "batches": named("batches", batch_submission),
        "priorities": named("priorities", priorities),
        "fairness": fairness,
        "gpu_pace": named("gpu_pace", gpu_pace),
        "zipf": zipf,
    }
    return groups


async def run(
    quick: bool, corpus: Path, home: Path, say: Progress, only: frozenset[str] = frozenset(SCENARIO_GROUPS)
) -> dict[str, Any]:
    profile = QUICK if quick else FULL
    stack = scratch_stack(home)
    say(f"starting Kafka and PostgreSQL under {home}")
    try:
        await stack.up()
        say("loading kokoro-onnx for the engine-alone reference")
        engine = await asyncio.to_thread(
            load_engine, "kokoro-onnx", threads=2, cache_dir=default_cache_root() / "models"
        )
        ctx = Context(
            kafka=KafkaAccess(stack.bootstrap_servers),
            database_url=stack.database_url,
            home=home / "apps",
            profile=profile,
            short_texts=_lines(corpus / "short.txt"),
            paragraphs=_lines(corpus / "paragraphs.txt"),
            say=say,
            services=lambda: _service_pids(stack),
        )
        results: dict[str, Any] = {"profile": profile.name, "environment": await describe(ROOT, stack.database_url)}
        results["warm_up"] = await warm_up(ctx)
        scenarios: dict[str, Any] = {}
        for group, scenario in _groups(ctx, EngineLoop(engine)).items():
            if group in only:
                scenarios.update(await scenario())
        results["scenarios"] = scenarios
        results["profile_sizes"] = profile.__dict__
        results["duration_s"] = time.monotonic() - say.started
        return results
    finally:
        say("stopping Kafka and PostgreSQL")
        stack.down(purge=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="voxlog bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="every scenario, small sizes (about 3 minutes on 2 cores)")
    parser.add_argument(
        "--docs", type=Path, default=None, help="where to write benchmarks.md and plots (default: docs/ for full runs)"
    )
    parser.add_argument("--render", type=Path, default=None, help="only render the docs from this results JSON")
    parser.add_argument(
        "--only",
        default=",".join(SCENARIO_GROUPS),
        help=f"comma-separated scenario groups to run, of {', '.join(SCENARIO_GROUPS)} (default: all); a partial "
        "run writes its results JSON but never the docs",
    )
    args = parser.parse_args(argv)
    only = frozenset(args.only.split(","))
    if unknown := only - set(SCENARIO_GROUPS):
        parser.error(f"unknown scenario group(s): {', '.join(sorted(unknown))}")
    partial = only != set(SCENARIO_GROUPS)
    if partial and args.docs is not None and args.render is None:
        # The page shows every scenario: a partial run's results cannot make it (found after a 40-minute run).
        parser.error("a partial run (--only) writes its results JSON, never the docs: drop --docs, or run every group")
    docs = args.docs or (None if args.quick or partial else ROOT / "docs")
    if args.render is not None:
        results = json.loads(args.render.read_text())
    else:
        corpus = corpus_dir()
        home = Path(os.environ.get("VOXLOG_BENCH_HOME", default_state_root() / "bench"))
        if home.exists():
            shutil.rmtree(home)  # every run starts from empty data: no warm caches from the last one
        results = asyncio.run(run(args.quick, corpus, home, Progress(), only))
        out = (
            ROOT
            / "bench"
            / "results"
            / f"{results['environment']['date'][:19].replace(':', '')}-{results['profile']}.json"
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2, default=str) + "\n")
        print(f"results: {out}", file=sys.stderr)
    if docs is not None:
        earlier = docs / "benchmarks" / "results.json"
        kept = json.loads(earlier.read_text()) if earlier.exists() else {}
        for section in SEPARATE_RUNS:
            if section not in results and kept.get(section) is not None:
                results[section] = kept[section]
        for path in write_docs(results, docs):
            print(f"wrote {path}", file=sys.stderr)
    return 0
