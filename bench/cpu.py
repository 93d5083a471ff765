"""CPU seconds per component (API, workers, projector, Kafka, Postgres, the client), read from /proc.

Speed on a shared 2-core machine is mostly a question of who burns the CPU;
dividing each component's CPU seconds by the jobs done shows where a job's
cost goes, independent of how the scheduler interleaved them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return text.rsplit(")", 1)[1].split()  # fields after the command name; [0] is the state


def process_seconds(pid: int) -> float:
    """User plus system CPU seconds of a live process and of its children it has reaped (0 when
    it is gone): a Postgres backend that exits hands its seconds on to the postmaster's count."""
    fields = _stat(pid)
    return sum(int(f) for f in fields[11:15]) / _TICK if fields else 0.0


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (Postgres backends under the postmaster)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU clock ticks of the whole machine since boot, over all cores.

    Integers, so that a busy fraction (busy over total between two readings) is never above 1:
    the same difference of seconds in floats came out 1.0000000000003 on a fully busy machine.
    """
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


def snapshot(components: Mapping[str, Iterable[int]]) -> dict[str, float]:
    """CPU seconds so far of each component's processes.

    A child that exits between two snapshots is still counted, by its parent
    (short-lived Postgres backends under the postmaster).
    """
    out = {name: sum(process_seconds(p) for p in pids) for name, pids in components.items()}
    busy, total = machine_ticks()
    out["machine_busy"], out["machine_total"] = busy, total
    return out


def per_job_ms(before: Mapping[str, float], after: Mapping[str, float], jobs: int) -> dict[str, float]:
    """Each component's CPU milliseconds per job between two snapshots, and the machine's busy fraction."""
    out = {name: 1000 * (after[name] - before[name]) / jobs for name in before if not name.startswith("machine_")}
    total = after["machine_total"] - before["machine_total"]
    out["machine_busy_fraction"] = (after["machine_busy"] - before["machine_busy"]) / total if total else 0.0
    return out


async def wait_quiet(max_busy: float = 0.15, window_s: float = 1.0, within_s: float = 45.0) -> float:
    """Wait until the machine is mostly idle (Postgres's checkpoints and vacuums after a heavy
    scenario, the broker's log cleanup) so that the next measurement has the cores to itself;
    returns the busy fraction of the last window, whether or not it got below ``max_busy``."""
    deadline = time.monotonic() + within_s
    while True:
        busy_0, total_0 = machine_ticks()
        await asyncio.sleep(window_s)
        busy_1, total_1 = machine_ticks()
        busy = (busy_1 - busy_0) / (total_1 - total_0) if total_1 > total_0 else 0.0
        if busy <= max_busy or time.monotonic() >= deadline:
            return busy
