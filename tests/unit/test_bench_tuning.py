"""bench.paced's TUNING (issue 38, item 3): what the end-to-end tests and the fault campaigns shorten is no setting
of voxlog's but a constant of its composition, and each variable reaches the constant it names, in the process it
names only."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from bench import paced
from foundation import logging as voxlog_logging
from foundation.outages import Outage
from foundation.settings import ALL_SETTINGS, RENAMED_VARIABLES, ProjectorSettings, WorkerSettings
from voxlog.composition import api, configs, worker

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = {f"VOXLOG_{name.upper()}" for cls in ALL_SETTINGS for name in cls.model_fields}
# What the harness reads itself, not voxlog: the benchmark engine's pace (bench.paced), the gated API's socket
# (tests.support.gated_api), the fuzz campaign's and the test stack's own variables.
HARNESS = re.compile(r"VOXLOG_(BENCH|FUZZ|TEST)_[A-Z0-9_]+|VOXLOG_DOCUMENT_GATE")


@pytest.fixture
def restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every constant TUNING names, and the outage summary, put back after the test."""
    for targets in paced.TUNING.values():
        for _, module_name, name in targets:
            module = importlib.import_module(module_name)
            monkeypatch.setattr(module, name, getattr(module, name))
    monkeypatch.setattr(Outage, "summary_s", Outage.summary_s)
    monkeypatch.setattr(voxlog_logging._held_back, "window_s", voxlog_logging._held_back.window_s)


def test_what_the_tests_shorten_is_no_setting_and_names_a_constant_of_its_command():
    assert not (set(paced.TUNING) | {paced.OUTAGE_SUMMARY}) & SETTINGS
    for variable, targets in paced.TUNING.items():
        for command, module_name, name in targets:
            assert command in {"api", "worker", "projector", "sweeper", "deliver"}, variable
            assert isinstance(getattr(importlib.import_module(module_name), name), int | float), variable


def test_a_variable_sets_the_constant_of_the_command_it_runs_and_no_other(restored):
    env = {"VOXLOG_SWEEP_INTERVAL_S": "0.5", "VOXLOG_STALE_AFTER_S": "3", "VOXLOG_LAG_INTERVAL_S": "0.5"}
    done = paced.tune(["--log-level", "WARNING", "sweeper"], env)
    assert done == {"voxlog.composition.configs.SWEEP_INTERVAL_S": 0.5, "voxlog.composition.configs.STALE_AFTER_S": 3.0}
    swept = configs.sweeper_config()
    assert (swept.sweep_interval_s, swept.stale_after_s) == (0.5, 3.0)
    assert (api.LAG_INTERVAL_S, api.STALE_AFTER_S) == (5.0, 15.0), "the API's are not the sweeper's to set"

    paced.tune(["api"], {"VOXLOG_STALE_AFTER_S": "2", "VOXLOG_AUTH_CACHE_S": "1"})
    assert (api.STALE_AFTER_S, api.AUTH_CACHE_S) == (2.0, 1.0)


def test_a_worker_and_a_projector_get_theirs_as_their_types(restored):
    paced.tune(["worker", "--device", "cpu"], {"VOXLOG_RETRY_BASE_DELAY_S": "0.2", "VOXLOG_HEARTBEAT_S": "0.5"})
    assert configs.retry_policy(WorkerSettings()).base_delay_s == 0.2
    assert worker.HEARTBEAT_S == 0.5
    paced.tune(["projector"], {"VOXLOG_PROJECTOR_BATCH": "40"})
    batch = configs.projector_config(ProjectorSettings()).max_batch
    assert batch == 40
    assert isinstance(batch, int)


def test_the_outage_summary_is_every_processs(restored):
    paced.tune(["api"], {"VOXLOG_OUTAGE_SUMMARY_S": "2"})
    assert Outage.summary_s == 2.0
    assert voxlog_logging._held_back.window_s == 2.0


def test_without_the_variables_nothing_changes(restored):
    assert paced.tune(["api"], {}) == {}
    assert api.AUTH_CACHE_S == 2.0


def test_every_variable_a_test_or_campaign_gives_a_process_is_a_setting_or_tuning():
    """A variable named in a test's environment that nothing reads would be silently ignored (extra="ignore"):
    a setting that became a constant must be a TUNING variable, or the test changed."""
    given = re.compile(r'"(VOXLOG_[A-Z0-9_]+)":|\b(VOXLOG_[A-Z0-9_]+)=')
    known = SETTINGS | set(paced.TUNING) | {paced.OUTAGE_SUMMARY} | set(RENAMED_VARIABLES)  # refused when read
    unknown = {}
    for where in ("tests", "bench", "voxlog/chaos"):
        for path in ROOT.joinpath(where).rglob("*.py"):
            for match in given.finditer(path.read_text()):
                variable = match[1] or match[2]
                if variable not in known and not HARNESS.fullmatch(variable):
                    unknown.setdefault(variable, path.relative_to(ROOT).as_posix())
    assert not unknown, f"given to processes, read by none: {unknown}"
