"""`voxlog chaos [--quick]`: bring up Kafka and PostgreSQL, inject every fault, write docs/reliability.md.

The stack is the campaign's own (fresh data under the state root's
``chaos/``, free loopback ports; one Kafka broker, or a replicated cluster of
``--brokers 3``) and is stopped at the end, pass or fail: a developer's dev
stack is never touched. A cluster of three also takes the cluster's own faults
(:mod:`voxlog.chaos.cluster_faults`: a leader killed, a broker hung, a projector
replica killed, a rolling restart of every process).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

from foundation.settings import default_state_root
from voxlog.chaos.cluster_faults import CLUSTER_BROKERS, CLUSTER_FAULTS
from voxlog.chaos.faults import FAULTS, Fault, FaultResult, Sizes
from voxlog.chaos.report import CLUSTER, keeping_sections, render, render_cluster, with_section
from voxlog.devstack import SOURCE_ROOT, scratch_stack

QUICK = Sizes(kill_jobs=200, jobs=30)
FULL = Sizes(kill_jobs=200, jobs=120)


def faults_for(brokers: int, only: str = "") -> tuple[Fault, ...]:
    """The faults a stack of ``brokers`` takes, or of them those named in ``only`` (comma-separated)."""
    every = FAULTS + (CLUSTER_FAULTS if brokers >= CLUSTER_BROKERS else ())
    if not only:
        return every
    names = {fault.__name__: fault for fault in every}
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in names]
    if unknown:
        raise ValueError(f"no fault named {', '.join(unknown)} for {brokers} broker(s); there are: {', '.join(names)}")
    return tuple(names[name] for name in wanted)


async def campaign(sizes: Sizes, home: Path, brokers: int = 1, faults: tuple[Fault, ...] = FAULTS) -> list[FaultResult]:
    """``faults``, in turn, on a stack of ``brokers`` under ``home`` (emptied first: no data from an earlier
    run)."""
    await asyncio.to_thread(shutil.rmtree, home, True)
    stack = scratch_stack(home / "stack", brokers=brokers, kafka_jit="quick")  # brokers that live minutes
    results = []
    try:
        await stack.up()
        for fault in faults:
            started = time.monotonic()
            result = await fault(stack, home / "apps", sizes)
            results.append(result)
            verdict = "ok" if result.ok else f"FAILED: {'; '.join(result.violations[:3])}"
            print(
                f"{result.fault}: {result.jobs} jobs, {result.lost} lost, {result.completed_twice} twice, "
                f"{sum(result.client_errors.values())} client errors retried, {result.unabsorbed} not absorbed, "
                f"{result.webhooks_delivered}/{result.webhooks_due} outcomes delivered by webhook "
                f"({result.webhook_duplicates} again, {result.webhook_lag_s:.1f}s after the last job), "
                f"recovered in {result.recovery_s:.1f}s ({time.monotonic() - started:.0f}s) {verdict}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        stack.down(purge=True)
    return results


def main(quick: bool, docs: Path | None, brokers: int = 1, only: str = "") -> int:
    started = time.monotonic()
    try:
        faults = faults_for(brokers, only)
    except ValueError as exc:
        print(f"voxlog chaos: {exc}", file=sys.stderr)
        return 2
    results = asyncio.run(campaign(QUICK if quick else FULL, default_state_root() / "chaos", brokers, faults))
    # A quick run, or one of some faults, writes the page only where it is told to.
    target = docs if docs is not None else (None if quick or only else SOURCE_ROOT / "docs")
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        page = target / "reliability.md"
        old = page.read_text() if page.exists() else "# Reliability\n"
        profile, minutes = "quick" if quick else "full", (time.monotonic() - started) / 60
        if brokers >= CLUSTER_BROKERS:
            page.write_text(with_section(old, CLUSTER, render_cluster(results, profile, minutes, SOURCE_ROOT)))
        else:
            page.write_text(keeping_sections(render(results, profile, minutes, SOURCE_ROOT), old))
        print(f"wrote {page}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1
