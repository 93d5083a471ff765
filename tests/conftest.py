"""Markers and timeouts follow the directory: tests/unit, tests/integration, tests/e2e.

A test's timeout (pytest-timeout) is longer than the sum of the waits it makes
itself, so a slow machine gets the test's own message (which job, which
state, which log) rather than a bare timeout; the timeout is only for a hang.
Unit tests wait on nothing but their own gates; integration tests wait at
most a couple of minutes on the broker; an e2e test waits for processes to
start (up to 7 minutes: ready, announced, in the group) and then for jobs
(up to 5 minutes).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.file_order import OUT_ENV, Recorder, known_durations, longest_first
from voxlog.corpus import corpus_dir

ROOT = Path(__file__).resolve().parent.parent
CORPUS = corpus_dir()


TIMEOUTS_S = {"unit": 120, "integration": 300, "e2e": 900}


def pytest_configure(config: pytest.Config) -> None:
    if out := os.environ.get(OUT_ENV):
        config.pluginmanager.register(Recorder(Path(out)), "voxlog-file-durations")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        if parts[0] in TIMEOUTS_S:
            item.add_marker(getattr(pytest.mark, parts[0]))
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(TIMEOUTS_S[parts[0]]))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a pool's worker: every worker collects the same order
        items[:] = longest_first(items, known_durations())


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS}")
    return CORPUS
