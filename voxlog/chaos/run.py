"""`voxlog chaos [--quick]`: bring up Kafka and PostgreSQL, inject every fault, write docs/reliability.md.

The stack is the campaign's own (fresh data under the state root's
``chaos/``, free loopback ports; one Kafka broker, or a replicated cluster of
``--brokers 3``) and is stopped at the end, pass or fail: a developer's dev
stack is never touched.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path

from foundation.settings import default_state_root
from voxlog.chaos.faults import FAULTS, FaultResult, Sizes
from voxlog.chaos.report import keeping_fuzz_section, render
from voxlog.devstack import SOURCE_ROOT, scratch_stack

QUICK = Sizes(kill_jobs=200, jobs=30)
FULL = Sizes(kill_jobs=200, jobs=120)


async def campaign(sizes: Sizes, home: Path, brokers: int = 1) -> list[FaultResult]:
    """Every fault, in turn, on a stack of ``brokers`` under ``home`` (emptied first: no data from an earlier
    run)."""
    await asyncio.to_thread(shutil.rmtree, home, True)
    stack = scratch_stack(home / "stack", brokers=brokers)
    results = []
    try:
        await stack.up()
        for fault in FAULTS:
            started = time.monotonic()
            result = await fault(stack, home / "apps", sizes)
            results.append(result)
            verdict = "ok" if result.ok else f"FAILED: {'; '.join(result.violations[:3])}"
            print(
                f"{result.fault}: {result.jobs} jobs, {result.lost} lost, {result.completed_twice} twice, "
                f"recovered in {result.recovery_s:.1f}s ({time.monotonic() - started:.0f}s) {verdict}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        stack.down(purge=True)
    return results


def main(quick: bool, docs: Path | None, brokers: int = 1) -> int:
    started = time.monotonic()
    results = asyncio.run(campaign(QUICK if quick else FULL, default_state_root() / "chaos", brokers))
    target = docs if docs is not None else (None if quick else SOURCE_ROOT / "docs")
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        page = target / "reliability.md"
        chaos = render(results, "quick" if quick else "full", (time.monotonic() - started) / 60, SOURCE_ROOT)
        page.write_text(keeping_fuzz_section(chaos, page.read_text() if page.exists() else ""))
        print(f"wrote {page}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1
