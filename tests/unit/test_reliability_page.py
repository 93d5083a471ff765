"""docs/reliability.md has three writers: `voxlog chaos` (the faults on one broker: the page's top), the
cluster campaign (`voxlog chaos --brokers 3`: its own section) and the fuzz campaign (its own section). Each
rewrites its part only."""

from __future__ import annotations

from pathlib import Path

import pytest

from voxlog.chaos.faults import FaultResult
from voxlog.chaos.report import CLUSTER, FUZZ, keeping_sections, render_cluster, section_of, with_section

pytestmark = pytest.mark.unit

CHAOS = "# Reliability\n\n| fault | jobs |\n|---|---|\n| worker SIGKILL | 200 |\n"


def test_the_fuzz_section_goes_after_the_faults_and_replaces_the_one_before():
    first = with_section(CHAOS, FUZZ, "## Fuzzing\n\n1 request\n")
    assert first == f"{CHAOS}\n{FUZZ.begin}\n## Fuzzing\n\n1 request\n{FUZZ.end}\n"
    second = with_section(first, FUZZ, "## Fuzzing\n\n2 requests")
    assert second == f"{CHAOS}\n{FUZZ.begin}\n## Fuzzing\n\n2 requests\n{FUZZ.end}\n"
    assert "1 request\n" not in second


def test_a_chaos_run_keeps_the_cluster_and_fuzz_sections_it_found():
    old = with_section("# Reliability\n\nan older run\n", FUZZ, "## Fuzzing\n\n3 requests")
    old = with_section(old, CLUSTER, "## On a cluster\n\nleader killed")
    rewritten = keeping_sections(CHAOS, old)
    assert rewritten.startswith(CHAOS)
    assert "an older run" not in rewritten
    fuzz = f"{FUZZ.begin}\n## Fuzzing\n\n3 requests\n{FUZZ.end}\n"
    assert section_of(rewritten, FUZZ) == section_of(old, FUZZ) == fuzz
    assert section_of(rewritten, CLUSTER) == f"{CLUSTER.begin}\n## On a cluster\n\nleader killed\n{CLUSTER.end}\n"


def test_a_cluster_run_rewrites_its_section_only():
    page = with_section(with_section(CHAOS, CLUSTER, "old cluster figures"), FUZZ, "fuzz figures")
    result = FaultResult("rolling restart", "every process", jobs=90, completed=90, client_errors={"POST no answer": 4})
    rewritten = with_section(page, CLUSTER, render_cluster([result], "quick", 2.0, Path.cwd()))
    assert rewritten.startswith(CHAOS)
    assert "old cluster figures" not in rewritten
    assert "| rolling restart | every process | 90 |" in rewritten
    assert "| 4 POST no answer | 0 | - | clean |" in rewritten
    assert section_of(rewritten, FUZZ) == section_of(page, FUZZ)


def test_a_page_without_sections_is_written_as_the_chaos_run_made_it():
    assert section_of(CHAOS, FUZZ) == section_of(CHAOS, CLUSTER) == ""
    assert keeping_sections(CHAOS, CHAOS) == CHAOS
    assert keeping_sections(CHAOS, "") == CHAOS


def test_a_submission_the_retry_did_not_absorb_fails_the_fault():
    assert FaultResult("f", "d", jobs=1, completed=1).ok
    assert not FaultResult("f", "d", jobs=1, completed=1, unabsorbed=1).ok
