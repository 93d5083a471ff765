"""Scenario (n), GPU pace (issue 41): the benchmark engine's batched pace, the figures and the section.

The engine's durations are what it asks of ``time.sleep``, replaced here by a list: nothing sleeps, and no
timing is asserted.
"""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench import paced
from bench.gpu_pace import DEVICE, cores_allow, engine_figures, pace_env
from bench.measure import summarize
from bench.paced import BenchEngineSettings, EngineCounters, install
from bench.report_gpu_pace import gpu_pace, gpu_pace_goals
from bench.run import SCENARIO_GROUPS, _groups
from foundation.metrics import parse_totals
from foundation.settings import WorkerSettings
from tts_node import bench_sleep, load_engine
from tts_node.bench_sleep import BATCHED_MAX, BenchSleepEngine, forward_seconds
from tts_node.engine import SpeechRequest
from voxlog.composition.batch_sizes import GPU_BATCH
from voxlog.composition.configs import batch_and_claims

GPU_PACE = {"batch_ms": 8.0, "ms_per_id": 0.02}


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    requested: list[float] = []
    monkeypatch.setattr(bench_sleep.time, "sleep", requested.append)
    return requested


def _requests(engine: BenchSleepEngine, count: int) -> list[SpeechRequest]:
    texts = [f"Sentence number {i} of the backlog." for i in range(count)]
    return [SpeechRequest(engine.segment(t, "en-us")[0], "bench_tone", 1.0) for t in texts]


def test_a_forward_costs_its_fixed_time_plus_its_phoneme_ids():
    assert forward_seconds(8, 0.02, 0) == pytest.approx(0.008)
    assert forward_seconds(8, 0.02, 1000) == pytest.approx(0.028)
    engine = BenchSleepEngine(**GPU_PACE)
    [segment] = engine.segment("Thirty characters of one text.", "en-us")
    assert len(segment.token_ids) == 30
    assert engine.seconds_for(segment) == pytest.approx(0.008 + 0.02e-3 * 30)  # a forward of it alone


def test_speak_batch_makes_one_forward_per_max_batch_and_counts_its_busy_time(slept):
    engine = BenchSleepEngine(**GPU_PACE)
    assert engine.max_batch == BATCHED_MAX == 32
    requests = _requests(engine, 40)
    ids = [len(r.segment.token_ids) for r in requests]
    speeches = engine.speak_batch(requests)
    assert len(speeches) == 40
    expected = [forward_seconds(8, 0.02, sum(ids[:32])), forward_seconds(8, 0.02, sum(ids[32:]))]
    assert slept == pytest.approx(expected)
    assert engine.forwards_for([r.segment for r in requests]) == pytest.approx(expected)
    assert (engine.forwards, engine.forward_segments) == (2, 40)
    assert engine.busy_s == pytest.approx(sum(expected))
    engine.synthesize(requests[0].segment, "bench_tone", 1.0)  # alone: a forward of one
    assert (engine.forwards, engine.forward_segments) == (3, 41)
    assert engine.busy_s == pytest.approx(sum(expected) + forward_seconds(8, 0.02, ids[0]))


def test_a_batch_of_any_size_at_the_per_segment_pace_is_still_one_sleep_and_counted(slept):
    engine = BenchSleepEngine(synth_ms=100)
    assert engine.max_batch is None
    engine.speak_batch(_requests(engine, 40))
    assert slept == [pytest.approx(0.1)]
    assert (engine.forwards, engine.forward_segments, engine.busy_s) == (1, 40, pytest.approx(0.1))


def test_the_batched_pace_is_named_in_the_version_and_refuses_a_mix_of_paces():
    assert BenchSleepEngine(**GPU_PACE).info.model_version == "sleep-batch-8ms-0.02msid-x32"
    assert BenchSleepEngine(**GPU_PACE, max_batch=8).max_batch == 8
    with pytest.raises(ValueError, match="not both"):
        BenchSleepEngine(synth_ms=1, batch_ms=8)
    with pytest.raises(ValueError, match="max_batch"):
        BenchSleepEngine(max_batch=8)
    with pytest.raises(ValueError, match="ms_per_id"):
        BenchSleepEngine(ms_per_id=float("inf"))


def test_the_pace_comes_from_bench_paced_variables_and_the_worker_batches_its_max_on_a_gpu_device(monkeypatch):
    monkeypatch.setenv("VOXLOG_BENCH_BATCH_MS", "8")
    monkeypatch.setenv("VOXLOG_BENCH_MS_PER_ID", "0.02")
    settings = BenchEngineSettings()
    assert (settings.batch_ms, settings.ms_per_id, settings.max_batch) == (8.0, 0.02, 0)
    previous = install(settings)  # as bench.paced does in a process
    try:
        engine = load_engine("bench-sleep", device=DEVICE)
    finally:
        bench_sleep.make_with(previous)
    inner = engine.inner
    assert isinstance(inner, BenchSleepEngine)
    assert inner in paced.COUNTERS.engines  # counted on the process's /metrics
    # How the worker (and the baseline's) decides the segments a forward carries: by the engine's device.
    batch, held = batch_and_claims(WorkerSettings(), engine.info.device)
    assert batch == GPU_BATCH == inner.max_batch
    assert held == 2 * batch
    assert batch_and_claims(WorkerSettings(), "cpu")[0] == 1  # why the scenario runs it on a GPU's device


def test_the_scenario_env_sets_the_pace_on_a_gpu_device_and_another_batch_size_explicitly():
    env = pace_env(8.0, 0.02, 32)
    assert env["VOXLOG_DEVICE"].startswith("cuda:")
    assert (env["VOXLOG_BENCH_BATCH_MS"], env["VOXLOG_BENCH_MS_PER_ID"], env["VOXLOG_BENCH_MAX_BATCH"]) == (
        "8.0",
        "0.02",
        "32",
    )
    assert "VOXLOG_BATCH_SEGMENTS" not in env  # the device's batch is the pace's
    assert pace_env(8.0, 0.02, 16)["VOXLOG_BATCH_SEGMENTS"] == "16"


def test_engine_counters_expose_the_engines_own_counts(slept):
    counters, registry = EngineCounters(), CollectorRegistry()
    registry.register(counters)
    a, b = BenchSleepEngine(**GPU_PACE), BenchSleepEngine(**GPU_PACE)
    counters.engines += [a, b]
    a.speak_batch(_requests(a, 3))
    b.speak_batch(_requests(b, 40))
    totals = parse_totals(generate_latest(registry).decode())
    assert totals[f"{paced.FORWARDS}_total"] == 3
    assert totals[f"{paced.FORWARD_SEGMENTS}_total"] == 43
    assert totals[f"{paced.BUSY}_total"] == pytest.approx(a.busy_s + b.busy_s)


def test_engine_figures_per_worker_and_overall():
    before = {"worker-0": {"busy_s": 1.0, "forwards": 10, "segments": 100, "synthesis_s": 1.1}}
    after = {
        "worker-0": {"busy_s": 3.0, "forwards": 20, "segments": 420, "synthesis_s": 3.5},
        "worker-1": {"busy_s": 1.0, "forwards": 10, "segments": 160, "synthesis_s": 1.2},
    }
    figures = engine_figures(before, after, wall_s=10.0)
    assert figures["per_worker"]["worker-0"]["busy_share"] == pytest.approx(0.2)
    assert figures["per_worker"]["worker-0"]["segments_per_forward"] == pytest.approx(32.0)
    assert figures["per_worker"]["worker-1"]["busy_share"] == pytest.approx(0.1)
    assert figures["busy_share"] == pytest.approx(3.0 / 20)
    assert figures["segments_per_forward"] == pytest.approx(480 / 20)


def _run(jobs_per_s: float, busy_s: float, cpu: dict[str, float], workers: int = 4) -> dict:
    per_worker = {f"worker-{i}": {"busy_s": busy_s / workers, "busy_share": busy_s / workers / 10} for i in range(4)}
    run = {
        "jobs": round(jobs_per_s * 10),
        "wall_s": 10.0,
        "jobs_per_s": jobs_per_s,
        "submission_s": 0.5,
        "submitted_per_s": 2 * jobs_per_s,
        "latency": summarize([1.0, 2.0]),
        "cpu_ms_per_job": {**cpu, "machine_busy_fraction": 0.98},
        "engine": {"per_worker": per_worker, "busy_s": busy_s, "busy_share": busy_s / 40, "segments_per_forward": 30},
    }
    run["cores_allow"] = cores_allow(run, cores=2)
    return run


def test_what_the_cores_allow_bounds_the_busy_share():
    cpu = {"api": 2.0, "projector": 2.0, "workers": 10.0, "kafka": 3.0, "postgres": 3.0, "client": 5.0}
    run = _run(80.0, busy_s=1.6, cpu=cpu)  # 800 jobs, 2 ms of engine a job, 20 ms of server CPU a job
    allow = run["cores_allow"]
    assert allow["server_cpu_ms_per_job"] == pytest.approx(20.0)  # not the client's
    assert allow["cores_used"] == pytest.approx(25e-3 * 80)  # the client's too
    assert allow["jobs_per_s_by_cores"] == pytest.approx(100.0)
    assert allow["jobs_per_s_by_engine"] == pytest.approx(2000.0)
    assert allow["bound"] == "cores"
    assert allow["allowed_busy_share"] == pytest.approx(100 * 0.002 / 4)
    assert allow["of_allowed"] == pytest.approx(0.04 / 0.05)
    slow_engine = cores_allow({**run, "engine": {**run["engine"], "busy_s": 160.0, "busy_share": 1.0}}, cores=2)
    assert (slow_engine["bound"], slow_engine["allowed_busy_share"]) == ("engine", 1.0)


def _scenario() -> dict:
    cpu = {"api": 2.0, "projector": 2.0, "workers": 10.0, "kafka": 3.0, "postgres": 3.0, "client": 5.0}
    return {
        "jobs": 400,
        "workers": 4,
        "batch_ms": 8.0,
        "ms_per_id": 0.02,
        "max_batch": 32,
        "corpus": "short.txt",
        "voxlog": _run(95.0, busy_s=1.9, cpu=cpu),
        "baseline": _run(
            90.0, busy_s=1.8, cpu={"api": 1.0, "workers": 4.0, "kafka": 0.1, "postgres": 2.0, "client": 3.0}
        ),
    }


def test_the_section_and_the_goal_row_render_every_figure():
    s = json.loads(json.dumps({"gpu_pace": _scenario()}))
    text = "\n".join(gpu_pace(s))
    assert "400 one-sentence jobs (`short.txt`, each made distinct) to 4 workers" in text
    assert "up to 32 segments takes 8 ms plus 0.02 ms per phoneme id" in text
    assert "| voxlog | 95 | 190 | 1.50 / 1.99 | 4.8% | 4.8% / 4.8% / 4.8% / 4.8% | 30.0 | 100 / 2000 |" in text
    assert "| 5.0% (cores) | 95% | 98% / 2.38 of 2 |" in text
    assert "| projector | 2.0 | n/a |" in text
    assert "| **all** | **25.0** | **10.1** |" in text
    [row] = gpu_pace_goals(s)
    assert row[0] == "(n) GPU pace"
    assert row[2].startswith("95 jobs/s; engine busy 4.8% (95% of the 5.0% the cores allow); 30.0 segments")
    assert row[4] == "**met** (1.06x the baseline; busy 95% of what the cores allow)"
    s["gpu_pace"]["voxlog"]["jobs_per_s"] = 80.0
    assert gpu_pace_goals(s)[0][4].startswith("not met (0.89x the baseline")


def test_a_run_without_the_scenario_says_so():
    assert gpu_pace({}) == ["Not measured in this run."]
    assert gpu_pace_goals({})[0][2] == "not measured in this run"


def scenario() -> dict:
    """A measured scenario (n), as the results JSON holds it (test_bench_report renders a page with it)."""
    return json.loads(json.dumps(_scenario()))


def test_every_scenario_group_runs_and_gpu_pace_is_one():
    assert tuple(_groups(None, None)) == SCENARIO_GROUPS  # type: ignore[arg-type]
    assert "gpu_pace" in SCENARIO_GROUPS
