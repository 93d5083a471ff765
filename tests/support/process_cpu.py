"""The CPU time a process has taken, read from /proc: what one request cost the API.

Two figures: the process's own (its event loop and threads: what every other request waits behind), and its
tree's (the process and its descendants, with what their reaped children took: the API's offload processes,
forked by its fork server, which reaps each before the API answers the request that used it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

_TICKS_PER_S: Final = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuTime:
    own_s: float
    """User and system time of the process itself."""
    tree_s: float
    """Of the process and its descendants, each with its reaped children's."""

    def __sub__(self, other: CpuTime) -> CpuTime:
        return CpuTime(self.own_s - other.own_s, self.tree_s - other.tree_s)


def _times(pid: int) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) in seconds; (0, 0) for a process gone meanwhile."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": fields 3 and on of proc(5)
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return (utime + stime) / _TICKS_PER_S, (cutime + cstime) / _TICKS_PER_S


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def cpu_time(pid: int) -> CpuTime:
    own, reaped = _times(pid)
    tree = own + reaped
    pending = _children(pid)
    while pending:
        child = pending.pop()
        spent, child_reaped = _times(child)
        tree += spent + child_reaped
        pending += _children(child)
    return CpuTime(own, tree)
