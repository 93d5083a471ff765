"""The benchmark page is rendered from the results JSON alone, every figure from a measured field."""

from __future__ import annotations

import json

import pytest

from bench.measure import summarize
from bench.report import write_docs
from tests.unit.test_bench_gpu_pace import scenario as gpu_pace_scenario


def _summary(*seconds: float) -> dict[str, float]:
    return summarize(list(seconds))


def _results() -> dict:
    light = {
        key: _summary(0.010, 0.020, 0.030)
        for key in (
            "end_to_end",
            "overhead",
            "submit_to_claimed",
            "claimed_to_first_segment_visible",
            "completed_to_visible",
        )
    }
    timeline = {"submitted_to_recorded": _summary(0.001), "completed_to_visible": _summary(0.004)}
    cpu = {"api": 4.0, "workers": 6.0, "kafka": 3.0, "postgres": 2.0, "client": 1.0, "machine_busy_fraction": 0.97}
    rate = {"jobs": 100, "wall_s": 2.0, "jobs_per_s": 50.0, "latency": _summary(0.5, 1.0), "cpu_ms_per_job": cpu}
    scale = {
        "jobs": 20,
        "wall_s": 1.25,
        "jobs_per_s": 16.0,
        "ideal_jobs_per_s": 20.0,
        "efficiency": 0.8,
        "busiest_worker_jobs": 6,
        "latency": _summary(0.3),
    }
    sat = {"jobs": 1, "wall_s": 10.0, "synthesis_s": 9.0, "audio_s": 15.0, "busy_fraction": 0.9}
    coalesce = {
        "submissions": 200,
        "distinct_texts": 10,
        "syntheses": 10,
        "claims": 10,
        "wall_s": 3.0,
        "originals": _summary(1.0),
        "duplicates": _summary(0.7, 0.9),
    }
    return {
        "profile": "quick",
        "duration_s": 150.0,
        "profile_sizes": {"name": "quick", "throughput_jobs": 100},
        "environment": {
            "date": "2026-11-29T12:00:00+00:00",
            "commit": "abc1234",
            "machine": {"cpu": "Test CPU", "cores": 2, "memory_gib": 24.0, "os": "Linux"},
            "versions": {"kafka": "4.4.0", "postgres": "15.18"},
        },
        "scenarios": {
            "light": {
                "voxlog": {**light, "synthesis_per_job_ms": 0.2, "timeline": timeline},
                "baseline": {**light, "synthesis_per_job_ms": 0.2, "timeline": timeline},
            },
            "throughput": {"voxlog": {"1": rate}, "baseline": {"1": {**rate, "jobs_per_s": 200.0}}},
            "scale_out": {"voxlog": {"1": scale, "2": scale}, "baseline": {"1": scale, "2": scale}},
            "saturation": {
                "engine_alone": {**sat, "busy_fraction": 1.0, "audio_s_per_wall_s": 2.0},
                "engine_alone_again": {**sat, "busy_fraction": 1.0, "audio_s_per_wall_s": 1.9},
                "voxlog": {**sat, "audio_s_per_wall_s": 1.5},
                "baseline": {**sat, "audio_s_per_wall_s": 1.6},
            },
            "coalescing": {"voxlog": coalesce, "baseline": coalesce},
            "first_audio": {
                "paragraph": "One. Two.",
                "engine_alone": {"first_audio": _summary(1.0)},
                "voxlog": {"first_audio": _summary(1.2), "whole_stream": _summary(3.0), "synthesis": _summary(2.5)},
                "baseline": {"first_audio": _summary(1.1), "whole_stream": _summary(3.1), "synthesis": _summary(2.0)},
            },
        },
    }


def test_the_page_shows_the_run_and_every_scenario(tmp_path):
    results = json.loads(json.dumps(_results()))  # as read back from the JSON file
    page, *plots, data = write_docs(results, tmp_path)
    assert json.loads(data.read_text()) == results
    text = page.read_text()
    assert "Test CPU, 2 cores, 24.0 GiB" in text
    assert "commit `abc1234`" in text
    for heading in ("(a)", "(b)", "(c)", "(d)", "(e)", "(f)"):
        assert f"## {heading}" in text
    assert "| 1 | 100 | 50.0 | 200.0 | 0.25 | 97% / 97% |" in text  # throughput, ratio, machine busy
    assert "| projector | n/a | n/a |" in text  # a component a system does not have
    assert "| **all** | **16.0** | **16.0** |" in text
    assert "| voxlog | 1 | 10.0 | 9.0 | 15.0 | 90% | 1.50 | 75% |" in text  # of the better tight loop (2.0)
    assert "the other gave 95%" in text
    assert "16.0 (80%)" in text
    assert "| **voxlog / baseline** |  | 1.00 | 1.00 | 1.00 | 1.00 | 0.94 |  |" in text  # (c)
    assert "| **voxlog / baseline** |  |  | 1.00 | 1.00 | 1.00 | 1.00 / 1.00 | 1.00 / 1.00 |" in text  # (d)
    assert "| voxlog | 1200.0 | 1200.0 | 3000.0 | 2500.0 |" in text  # (f), with the engine's own time
    assert "| **voxlog / baseline** | 1.09 | 1.09 | 0.97 | 1.25 |" in text
    assert [p.name for p in plots] == ["throughput.png", "latency.png"]
    for plot in plots:
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_page_has_section_n_and_its_goal_row_measured_or_not(tmp_path):
    results = _results()
    text = write_docs(results, tmp_path)[0].read_text()
    assert "## (n) GPU pace\n\nNot measured in this run." in text
    assert (
        "| (n) GPU pace | jobs/s >= the baseline's; engine busy >= 90% of what the machine's cores allow | not " in text
    )
    results["scenarios"]["gpu_pace"] = gpu_pace_scenario()
    text = write_docs(results, tmp_path)[0].read_text()
    assert "issue 41's GPU pace" in text
    assert (
        "| (n) GPU pace | jobs/s >= the baseline's; engine busy >= 90% of what the machine's cores allow | 95 jobs/s"
        in text
    )
    assert "## (n) GPU pace\n\n400 one-sentence jobs" in text


def test_summaries_report_median_and_p99_in_milliseconds():
    s = summarize([i / 1000 for i in range(1, 101)])
    assert s["n"] == 100
    assert s["median_ms"] == pytest.approx(50.5)
    assert s["p99_ms"] == pytest.approx(99.01)
    assert summarize([]) == {"n": 0}


def test_negative_step_gets_no_ratio(tmp_path):
    """Regression: the baseline can claim before the client has its answer; -2.2 / 1.9 read as a ratio of -0.87."""
    results = json.loads(json.dumps(_results()))
    results["scenarios"]["light"]["baseline"]["timeline"] = {
        "submitted_to_recorded": _summary(0.001),
        "completed_to_visible": _summary(-0.002),
    }
    text = write_docs(results, tmp_path)[0].read_text()
    assert "| completed → visible | 4.0 | -2.0 | n/a |" in text
    assert "| submitted → recorded | 1.0 | 1.0 | 1.00 |" in text


def test_regression_a_page_rendered_again_from_its_json_is_the_same_page(tmp_path):
    """The live run's sizes were tuples, the JSON's lists: re-rendering changed "(1, 2)" to "[1, 2]"."""
    live = _results()
    live["profile_sizes"]["throughput_workers"] = (1, 2)
    first = write_docs(live, tmp_path / "live")[0].read_text()
    again = write_docs(json.loads(json.dumps(live)), tmp_path / "again")[0].read_text()
    assert first == again
    assert "throughput_workers=1, 2." in first
