"""The bench's CPU accounting from /proc (this machine's own processes, no services)."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.cpu import machine_ticks, per_job_ms, snapshot


def test_regression_a_child_that_exits_during_the_span_is_still_counted():
    """A Postgres backend that exited between two snapshots took its CPU seconds with it, and the
    component's CPU per job came out negative; its parent's count of reaped children keeps them."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"]
    )
    before = snapshot({"tree": [os.getpid(), child.pid]})
    child.wait()
    after = snapshot({"tree": [os.getpid(), child.pid]})  # the child's pid is gone by now
    cost = per_job_ms(before, after, jobs=1)
    assert cost["tree"] > 0
    assert 0.0 <= cost["machine_busy_fraction"] <= 1.0


def test_regression_a_fully_busy_span_is_busy_one_not_more():
    """Machine CPU counted in float seconds came out 1.0000000000003 busy on a fully busy machine; it is
    counted in clock ticks (integers) now, so busy over total is exact."""
    busy, total = machine_ticks()
    assert isinstance(busy, int)
    assert isinstance(total, int)
    assert busy <= total
    before = {"machine_busy": 1_234_567_891, "machine_total": 2_345_678_913}
    after = {"machine_busy": 1_234_567_891 + 40_003, "machine_total": 2_345_678_913 + 40_003}
    assert per_job_ms(before, after, jobs=1)["machine_busy_fraction"] == 1.0
