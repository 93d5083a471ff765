"""bench/profile_cpu.py's command line: the default profile unchanged, ``--pace gpu`` as scenario (n) deploys."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from bench.gpu_pace import DEVICE, pace_env
from bench.profile_cpu import Plan, plan, summarize, thread_seconds
from bench.profiles import FULL


def test_the_default_profile_deploys_the_zero_time_engine_as_before():
    assert plan([]) == Plan(workers=1, jobs=1500, warmup=1500, pace="zero", env={}, one_batch=False)


def test_gpu_pace_deploys_the_workers_as_scenario_n_and_submits_one_batch():
    p = plan(["--pace", "gpu", "--workers", "1", "--jobs", "2000", "--warmup", "500"])
    assert (p.workers, p.jobs, p.warmup, p.pace) == (1, 2000, 500, "gpu")
    assert p.env == pace_env(FULL.gpu_pace_batch_ms, FULL.gpu_pace_ms_per_id, FULL.gpu_pace_max_batch)
    assert p.env["VOXLOG_DEVICE"] == DEVICE  # where the worker batches
    assert p.env["VOXLOG_BENCH_MAX_BATCH"] == "32"
    assert p.one_batch


def test_gpu_pace_follows_the_profile_it_is_given():
    custom = replace(FULL, gpu_pace_batch_ms=3.0, gpu_pace_max_batch=8)
    p = plan(["--pace", "gpu"], custom)
    assert p.env["VOXLOG_BENCH_BATCH_MS"] == "3.0"
    assert p.env["VOXLOG_BATCH_SEGMENTS"] == "8"  # another batch than a GPU's: set as well, as (n) sets it


def test_an_unknown_pace_is_refused(capsys):
    with pytest.raises(SystemExit):
        plan(["--pace", "cpu"])
    assert "invalid choice" in capsys.readouterr().err


def test_summarize_counts_own_time_and_time_under_voxlog_functions(tmp_path):
    raw = tmp_path / "worker-1.txt"
    raw.write_text(
        "main (x.py:1);run (consumers/worker.py:10);fsync (os:0) 3\n"
        "main (x.py:1);run (consumers/worker.py:10) 1\n"
        "main (x.py:1);select (selectors.py:5) 4\n"
        "broken line without count\n",
        encoding="utf-8",
    )
    text = summarize(raw)
    assert "8 samples on CPU" in text
    assert " 50.0%  select (selectors.py:5)" in text
    assert " 37.5%  fsync (os:0)" in text
    under = text.split("-- under voxlog functions (inclusive)")[1]
    assert " 50.0%  run (consumers/worker.py:10)" in under
    assert "main (x.py:1)" not in under


def _task(proc, pid, tid, utime, stime):
    task = proc / str(pid) / "task" / str(tid)
    task.mkdir(parents=True)
    rest = ["S", "1"] + ["0"] * 9 + [str(utime), str(stime), "7", "9"]  # fields after the name; [11:13] ours
    (task / "stat").write_text(f"{tid} (python (x)) " + " ".join(rest) + "\n", encoding="utf-8")


def test_thread_seconds_splits_the_main_thread_from_the_others(tmp_path):
    _task(tmp_path, 42, 42, 300, 100)
    _task(tmp_path, 42, 43, 50, 50)
    _task(tmp_path, 42, 44, 20, 0)
    tick = os.sysconf("SC_CLK_TCK")
    assert thread_seconds(42, tmp_path) == pytest.approx({"main": 400 / tick, "threads": 120 / tick})
    assert thread_seconds(7, tmp_path) == {"main": 0.0, "threads": 0.0}  # a process gone
