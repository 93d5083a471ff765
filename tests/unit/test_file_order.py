"""The pool's order of test files (tests/support/file_order.py): longest first, each file whole and in order."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from tests.support.file_order import DURATIONS, UNKNOWN_S, Recorder, known_durations, longest_first


@dataclass
class _Item:
    nodeid: str


def _items(*nodeids: str) -> list[pytest.Item]:
    return cast(list[pytest.Item], [_Item(n) for n in nodeids])


def test_files_go_longest_first_each_whole_and_in_its_own_order():
    items = _items("a.py::one", "b.py::one", "a.py::two[x]", "c.py::one", "b.py::two", "a.py::two[y]")
    ordered = longest_first(items, {"a.py": 5.0, "b.py": 300.0, "c.py": 40.0})
    assert [i.nodeid for i in ordered] == [
        "b.py::one", "b.py::two", "c.py::one", "a.py::one", "a.py::two[x]", "a.py::two[y]",
    ]  # fmt: skip


def test_a_file_not_recorded_yet_counts_as_a_typical_one_and_ties_keep_the_collected_order():
    items = _items("new.py::t", "short.py::t", "long.py::t", "other_new.py::t")
    ordered = longest_first(items, {"short.py": UNKNOWN_S - 1, "long.py": UNKNOWN_S + 1})
    assert [i.nodeid.split("::")[0] for i in ordered] == ["long.py", "new.py", "other_new.py", "short.py"]


@dataclass
class _Report:
    nodeid: str
    duration: float


def test_the_recorder_sums_each_files_phases_and_keeps_what_it_did_not_see(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the recorder here is a controller's
    out = tmp_path / "durations.json"
    out.write_text(json.dumps({"gone.py": 12.0, "a.py": 99.0}))
    recorder = Recorder(out)
    for nodeid, seconds in [("a.py::one", 1.25), ("a.py::one", 2.0), ("a.py::two", 0.5), ("b.py::t", 3.0)]:
        recorder.pytest_runtest_logreport(cast(Any, _Report(nodeid, seconds)))
    recorder.pytest_sessionfinish()
    assert json.loads(out.read_text()) == {"a.py": 3.8, "b.py": 3.0, "gone.py": 12.0}
    assert known_durations(out) == {"a.py": 3.8, "b.py": 3.0, "gone.py": 12.0}


def test_no_durations_file_or_a_broken_one_orders_by_collection(tmp_path: Path):
    assert known_durations(tmp_path / "missing.json") == {}
    (tmp_path / "broken.json").write_text("{not json")
    assert known_durations(tmp_path / "broken.json") == {}


def test_the_committed_durations_name_test_files_that_exist():
    root = DURATIONS.parent.parent
    recorded = known_durations()
    assert recorded, "tests/file_durations.json holds the seconds the pool orders by"
    missing = [f for f in recorded if not (root / f).is_file()]
    assert not missing, f"recorded files that are gone (record again): {missing}"
