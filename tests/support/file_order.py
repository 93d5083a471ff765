"""The order in which a pool of pytest-xdist workers takes test files: the longest first.

infra/test.sh runs the end-to-end and integration tests on a pool of workers, each taking a whole file
(``--dist loadfile``: a module's deployment is started once) and the next file as it finishes one. A pool
that meets a four-minute file last ends four minutes after the others went idle; one that starts with it
ends with every worker busy to the end (longest processing time first). The seconds each file took are
kept in ``tests/file_durations.json``, written by a run with ``VOXLOG_TEST_DURATIONS`` naming a file
(``infra/test.sh --durations``); a file not listed there yet counts as :data:`UNKNOWN_S`.

Only the order changes: a file's tests keep their own order, and without a pool nothing is reordered.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Final

import pytest

DURATIONS: Final = Path(__file__).resolve().parent.parent / "file_durations.json"
UNKNOWN_S: Final = 30.0  # a new file: about an end-to-end module's deployment and a few tests
OUT_ENV: Final = "VOXLOG_TEST_DURATIONS"


def known_durations(path: Path = DURATIONS) -> dict[str, float]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def longest_first(items: list[pytest.Item], durations: dict[str, float]) -> list[pytest.Item]:
    """``items`` with whole files ordered by their recorded seconds, longest first (ties: as collected)."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    files = sorted(by_file, key=lambda f: -durations.get(f, UNKNOWN_S))  # sorted() is stable
    return [item for f in files for item in by_file[f]]


class Recorder:
    """Sums each file's setup, call and teardown seconds as the reports arrive (on a pool's controller, from
    every worker) and writes them, merged into what was known, when the session ends."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.seconds: defaultdict[str, float] = defaultdict(float)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::", 1)[0]] += report.duration

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return  # a worker's reports reach the controller, which writes them
        merged = {**known_durations(self.out), **{f: round(s, 1) for f, s in self.seconds.items()}}
        self.out.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")
