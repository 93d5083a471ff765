"""Scenario (o), duplicates under a Zipf load (issue 41, item 3): the draw, the figures and the section."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from bench.measure import Submission
from bench.profiles import FULL, QUICK
from bench.report import write_docs
from bench.report_zipf_load import zipf_goals, zipf_load
from bench.run import SCENARIO_GROUPS, _groups
from bench.zipf_load import _in_turn, load_figures, zipf_draw
from tests.unit.test_bench_report import _results


def test_the_draw_is_fixed_by_its_seed_and_within_range():
    drawn = zipf_draw(1000, 161)
    assert drawn == zipf_draw(1000, 161)
    assert len(drawn) == 1000
    assert all(0 <= i < 161 for i in drawn)
    assert zipf_draw(1000, 161, seed=7) != drawn
    assert zipf_draw(0, 5) == []
    assert zipf_draw(10, 1) == [0] * 10


def test_the_draw_favours_the_first_ranks():
    counts = Counter(zipf_draw(1000, 161))
    # Rank 1 has weight 1/H(161), about 18% of the draws; rank 161 about 0.1%.
    assert 120 <= counts[0] <= 240
    assert counts[0] > counts[1] > counts[9]
    assert counts[0] > 10 * counts[100]


@pytest.mark.parametrize(("requests", "texts"), [(-1, 5), (5, 0)])
def test_the_draw_refuses_impossible_sizes(requests, texts):
    with pytest.raises(ValueError, match="Zipf draw"):
        zipf_draw(requests, texts)


def test_the_profiles_hold_the_issues_size_and_a_quick_one():
    assert (FULL.zipf_requests, FULL.zipf_texts, FULL.zipf_clients) == (1000, 161, 20)
    assert (QUICK.zipf_requests, QUICK.zipf_texts, QUICK.zipf_clients) == (120, 20, 20)


class _Users:
    """A client whose jobs end when the test's poller says: how many are out at once, and in which order they went."""

    def __init__(self) -> None:
        self.out: set[str] = set()
        self.most_out = 0
        self.order: list[str] = []
        self.polls = 0

    async def submit(self, text: str) -> Submission:
        self.out.add(f"job {text}")
        self.most_out = max(self.most_out, len(self.out))
        self.order.append(text)
        await asyncio.sleep(0)
        return Submission(text, f"job {text}", 0.0, 0.0)

    async def done_of(self, job_ids: list[str]) -> set[str]:
        """Every other poll, the first of the jobs asked about is done (jobs end one by one, out of order)."""
        self.polls += 1
        assert set(job_ids) <= self.out
        if self.polls % 2 or not job_ids:
            return set()
        done = job_ids[self.polls % len(job_ids)]
        self.out.discard(done)
        return {done}


def test_in_turn_each_client_sends_its_next_once_its_last_is_done():
    users = _Users()
    texts = [f"text {i}" for i in range(25)]
    submissions = asyncio.run(_in_turn(users, texts, 4, users.done_of, poll_s=0))  # type: ignore[arg-type]
    assert [s.text for s in submissions] == texts  # in the order drawn, whichever user sent each
    assert sorted(users.order) == sorted(texts)
    assert users.most_out == 4
    assert users.out == set()


def _run(claims: int, syntheses: int, synthesis_s: float, wall_s: float) -> dict:
    cpu = {"api": 2.0, "projector": 1.0, "workers": 150.0, "kafka": 1.0, "postgres": 2.0, "client": 1.0}
    before = {"synthesis_s": 5.0, "segments": 3.0, "reused": 1.0}
    after = {"synthesis_s": 5.0 + synthesis_s, "segments": 3.0 + syntheses, "reused": 31.0}
    drawn = [0, 0, 0, 1, 2, 0, 1, 3] * 15  # 120 requests over 4 texts
    return load_figures(drawn, before, after, claims, 84, wall_s, {**cpu, "machine_busy_fraction": 0.9})


def test_the_figures_count_claims_against_syntheses():
    run = _run(claims=64, syntheses=17, synthesis_s=20.0, wall_s=50.0)
    assert (run["submissions"], run["distinct_texts"]) == (120, 4)
    assert (run["syntheses"], run["segments_reused"], run["claims"]) == (17, 30, 64)
    assert run["claims_beyond_syntheses"] == 47
    assert run["from_cache"] == 84
    assert run["busy_share"] == pytest.approx(0.4)
    assert run["worker_cores"] == pytest.approx(150e-3 * 120 / 50)


def _scenario() -> dict:
    slow = _run(claims=64, syntheses=17, synthesis_s=20.0, wall_s=50.0)
    fast = _run(claims=17, syntheses=17, synthesis_s=9.5, wall_s=10.0)
    return json.loads(
        json.dumps(
            {
                "requests": 120,
                "texts": 20,
                "clients": 20,
                "seed": 41,
                "exponent": 1.0,
                "most_drawn": 30,
                "drawn_once": 5,
                "engine_alone": {"jobs": 17, "wall_s": 10.0},
                "at_once": {"voxlog": fast, "baseline": fast},
                "in_turn": {"voxlog": slow, "baseline": fast},
            }
        )
    )


def test_the_section_and_the_goal_row_render_every_figure():
    s = {"zipf_load": _scenario()}
    text = "\n".join(zipf_load(s))
    assert "120 requests over 20 distinct one-sentence texts" in text
    assert "weight 1/k^1 (seed 41; the most drawn 30 times, 5 drawn once), from 20 concurrent clients" in text
    assert "the 17 distinct texts drawn in a tight loop in the benchmark process: 10.0 s." in text
    assert "| voxlog, at once | 120 | 4 | 17 | 30 | 17 | 84 | 10.0 | 1.00 | 95% | 1.80 |" in text
    assert "| voxlog, in turn | 120 | 4 | 17 | 30 | 64 | 84 | 50.0 | 5.00 | 40% | 0.36 |" in text
    assert "| baseline, in turn | 120 | 4 | 17 | 30 | 17 | 84 | 10.0 | 1.00 | 95% | 1.80 |" in text
    assert "| CPU ms per job | voxlog, at once | baseline, at once | voxlog, in turn | baseline, in turn |" in text
    assert "| workers | 150.0 | 150.0 | 150.0 | 150.0 |" in text
    [row] = zipf_goals(s)
    assert row[:2] == ["(o) Duplicates under a Zipf load", "claims = syntheses; engine busy >= 90%"]
    assert row[2] == ("at once: 17 claims for 17 syntheses, busy 95%; in turn: 64 claims for 17 syntheses, busy 40%")
    assert row[4] == "not met (up to 47 claims beyond the syntheses, busy 40% at the least)"
    s["zipf_load"]["in_turn"]["voxlog"] = s["zipf_load"]["at_once"]["voxlog"]
    assert zipf_goals(s)[0][4] == "**met** (up to 0 claims beyond the syntheses, busy 95% at the least)"


def test_a_run_without_the_scenario_says_so(tmp_path):
    assert zipf_load({}) == ["Not measured in this run."]
    assert zipf_goals({})[0][2] == "not measured in this run"
    results = _results()
    text = write_docs(results, tmp_path)[0].read_text()
    assert "## (o) Duplicates under a Zipf load\n\nNot measured in this run." in text
    results["scenarios"]["zipf_load"] = _scenario()
    text = write_docs(results, tmp_path)[0].read_text()
    assert "| (o) Duplicates under a Zipf load | claims = syntheses; engine busy >= 90% | at once: 17 claims" in text
    assert "## (o) Duplicates under a Zipf load\n\n120 requests" in text


def test_zipf_is_a_scenario_group():
    assert "zipf" in SCENARIO_GROUPS
    assert tuple(_groups(None, None)) == SCENARIO_GROUPS  # type: ignore[arg-type]
