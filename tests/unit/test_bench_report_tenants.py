"""Scenario (m)'s section says where a tenant's interactive latency went, leg by leg, and still renders a
results file written before the legs were measured."""

from __future__ import annotations

from typing import Any

from bench.measure import summarize
from bench.report_fairness import tenants


def _tenants(with_legs: bool) -> dict[str, Any]:
    idle: dict[str, Any] = {**summarize([0.05, 0.06])}
    behind: dict[str, Any] = {**summarize([0.2, 0.7])}
    if with_legs:
        idle["stages_ms"] = {"api": 13.0, "to_claim": 10.0, "claimed": 27.0, "to_visible": 7.0}
        behind["stages_ms"] = {"api": 47.0, "to_claim": 35.0, "claimed": 50.0, "to_visible": 73.0}
        behind["slowest_stages_ms"] = {"api": 41.0, "to_claim": 380.0, "claimed": 52.0, "to_visible": 220.0}
    figures = {"a_batch": 10_000, "b_batch": 100, "b_interactive": 20, "workers": 4, "synth_ms": 20.0}
    timing = {"b_batch_s": 1.5, "a_batch_s": 101.6, "b_alone_s": 0.5}
    return {"tenants": {**figures, **timing, "idle": idle, "b_behind_a": behind}}


def test_each_leg_of_the_latency_is_a_column() -> None:
    lines = tenants(_tenants(with_legs=True))
    behind = next(line for line in lines if line.startswith("| B's interactive requests behind"))
    assert behind.split("|")[4:8] == [" 47 ", " 35 ", " 50 ", " 73 "]
    slowest = next(line for line in lines if line.startswith("| the slowest of them"))
    assert "700 (max)" in slowest
    assert " 380 " in slowest


def test_results_without_legs_render_with_no_figure_made_up() -> None:
    lines = tenants(_tenants(with_legs=False))
    behind = next(line for line in lines if line.startswith("| B's interactive requests behind"))
    assert behind.split("|")[4:8] == [" n/a "] * 4
    assert not any(line.startswith("| the slowest of them") for line in lines)
