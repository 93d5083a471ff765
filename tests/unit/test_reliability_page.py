"""docs/reliability.md has two writers: `voxlog chaos` (the faults) and the fuzz campaign (its own section).
Each rewrites its part only."""

from __future__ import annotations

import pytest

from voxlog.chaos.report import FUZZ_BEGIN, FUZZ_END, fuzz_section, keeping_fuzz_section, with_fuzz_section

pytestmark = pytest.mark.unit

CHAOS = "# Reliability\n\n| fault | jobs |\n|---|---|\n| worker SIGKILL | 200 |\n"


def test_the_fuzz_section_goes_after_the_faults_and_replaces_the_one_before():
    first = with_fuzz_section(CHAOS, "## Fuzzing\n\n1 request\n")
    assert first == f"{CHAOS}\n{FUZZ_BEGIN}\n## Fuzzing\n\n1 request\n{FUZZ_END}\n"
    second = with_fuzz_section(first, "## Fuzzing\n\n2 requests")
    assert second == f"{CHAOS}\n{FUZZ_BEGIN}\n## Fuzzing\n\n2 requests\n{FUZZ_END}\n"
    assert "1 request\n" not in second


def test_a_chaos_run_keeps_the_fuzz_section_it_found():
    old = with_fuzz_section("# Reliability\n\nan older run\n", "## Fuzzing\n\n3 requests")
    rewritten = keeping_fuzz_section(CHAOS, old)
    assert rewritten.startswith(CHAOS)
    assert "an older run" not in rewritten
    assert fuzz_section(rewritten) == fuzz_section(old) == f"{FUZZ_BEGIN}\n## Fuzzing\n\n3 requests\n{FUZZ_END}\n"


def test_a_page_without_a_fuzz_section_is_written_as_the_chaos_run_made_it():
    assert fuzz_section(CHAOS) == ""
    assert keeping_fuzz_section(CHAOS, CHAOS) == CHAOS
    assert keeping_fuzz_section(CHAOS, "") == CHAOS
