"""`voxlog check` against real processes and the real model (issue 30, item 2): it passes on a running
pipeline, printing every phase, and fails, saying what, once the worker is stopped."""

from __future__ import annotations

import re

from tests.support.apps import start_pipeline
from tests.support.cli import voxlog
from tests.support.engines import REAL_MODEL

PHASES = ("submitted", "claimed", "first segment", "completed", "visible", "downloaded")


async def test_the_canary_passes_on_a_running_pipeline_and_fails_on_a_stopped_worker(apps):
    app, _ = await start_pipeline(apps, **REAL_MODEL)
    passed = voxlog(app.env, "check", "--api", app.api, "--timeout", "120", timeout_s=180)
    print(f"\n{passed.stdout}")  # the README's example output comes from here (pytest -s)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert passed.stdout.startswith("voxlog check passed: job ")
    milestones = [float(re.search(rf"^  {phase} +(\d+) ms$", passed.stdout, re.M).group(1)) for phase in PHASES]
    assert milestones[0] <= milestones[4] <= milestones[5]  # submitted, visible, downloaded: one clock, in order
    assert "failed:" not in passed.stdout

    again = voxlog(app.env, "check", "--api", app.api, "--timeout", "120", timeout_s=180)
    assert again.returncode == 0, again.stdout
    texts = [re.search(r'text +"(.*)"', out.stdout).group(1) for out in (passed, again)]
    assert texts[0] != texts[1]  # a fresh variant each run: no cache can answer it

    app.stop("worker-0")
    failed = voxlog(app.env, "check", "--api", app.api, "--timeout", "5", timeout_s=60)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "voxlog check FAILED" in failed.stdout
    assert "not completed within 5 s (state queued): no worker claimed it" in failed.stdout
