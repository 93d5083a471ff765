"""Markers follow the directory: tests/unit, tests/integration, tests/e2e."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("VOXLOG_CORPUS", ROOT.parent / "shared" / "corpus"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).relative_to(ROOT / "tests").parts
        if parts[0] in {"unit", "integration", "e2e"}:
            item.add_marker(getattr(pytest.mark, parts[0]))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"the shared corpus is missing at {CORPUS}")
    return CORPUS
