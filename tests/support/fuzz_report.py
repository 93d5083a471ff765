"""The fuzz campaign's section of docs/reliability.md: what was sent, what came back, what it cost the API."""

from __future__ import annotations

import platform
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tests.support.api_fuzz import Call, CpuBudget, Fuzz
from voxlog.chaos.report import FUZZ, with_section

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"
LONG_AUDIO = "long audio"  # the campaign's pass of long answers, whose CPU is judged by a budget of its own


@dataclass(frozen=True)
class Campaign:
    fuzz: Fuzz
    budget: CpuBudget
    scale: int
    fuzzed_s: float
    total_s: float
    verify: str
    """What `voxlog verify --settled` printed."""
    found: tuple[str, ...]
    """What the campaign found, each with its fix."""
    apis_alive: bool = True
    """Whether both APIs were, at the end, the processes they started as."""
    long_budget: CpuBudget | None = None
    """The *long audio* pass's own budget (its encodes run on worker threads, in proportion to the audio)."""


def _statuses(calls: list[Call]) -> str:
    counts = Counter("no answer" if c.status is None else str(c.status) for c in calls)
    return ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))


def _rows(calls: list[Call]) -> list[str]:
    by_route: defaultdict[tuple[str, str], list[Call]] = defaultdict(list)
    for call in calls:
        by_route[(call.pass_name, call.label)].append(call)
    return [
        f"| {pass_name} | `{label}` | {len(group)} | {_statuses(group)} "
        f"| {max(c.cpu.own_s for c in group):.2f} | {max(c.cpu.tree_s for c in group):.2f} |"
        for (pass_name, label), group in by_route.items()
    ]


def render(campaign: Campaign) -> str:
    fuzz, budget = campaign.fuzz, campaign.budget
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    short = [c for c in fuzz.calls if c.pass_name != LONG_AUDIO] or fuzz.calls
    slowest = max(short, key=lambda c: c.cpu.tree_s)
    busiest = max(short, key=lambda c: c.cpu.own_s)
    long = [c for c in fuzz.calls if c.pass_name == LONG_AUDIO]
    longest = max(long, key=lambda c: c.cpu.own_s) if long else None
    server_errors = sum(1 for c in fuzz.calls if c.status is None or c.status >= 500)
    verify = [line for line in campaign.verify.splitlines() if line.strip()]
    lines = [
        "## Fuzzing the request path",
        "",
        "Written by the fuzz campaign (`tests/e2e/test_fuzz_campaign.py`, run with `VOXLOG_FUZZ_REPORT=1`); CI",
        "runs the same campaign and only checks it. One deployment (projector, one bench-sleep worker, an API",
        "with VOXLOG_AUTH=off and one with keys, on the same log and tables) is sent: schemathesis' cases for",
        "every operation of the live /schema/openapi.json, positive and negative (*open*, *keyed*), scenarios",
        "following the links it infers from a 202 to the GETs and DELETE of what it made (*links*), and",
        "hypothesis' document and EPUB bodies (*documents*), and answers of over 100 s (SSML of ten 10 s breaks)",
        "in every output format, from /v1/audio/speech streamed, whole and as events and from a job's audio at",
        "48 kHz (*long audio*; one in Vorbis once killed the API). Every answer must be what the schema says and",
        "no 5xx (a document's a 200/202 or a 4xx with a message, a long answer a 200 as long as its job), every",
        "request within its CPU budget, both APIs still the processes they started as, and",
        "`voxlog verify --settled` clean afterwards. The keyed cases carry a good key, one lacking a scope, one",
        "of a throttled tenant, or a missing, malformed, unknown or wrong one. Generation is derandomized: a run",
        "sends the same cases as the last.",
        "",
        f"- **Run:** {datetime.now(UTC).isoformat(timespec='seconds')}, commit `{commit or 'unknown'}`, scale "
        f"{campaign.scale}: {len(fuzz.calls)} requests in {campaign.fuzzed_s / 60:.1f} minutes of fuzzing, "
        f"{campaign.total_s / 60:.1f} in all.",
        f"- **Machine:** {platform.machine()}, {platform.platform()}.",
        f"- **Budget per request:** {budget.own_s} s of the API process's CPU (its event loop), {budget.tree_s} s "
        "with its offload processes (a document's parsing)"
        + (
            f"; a long answer's {campaign.long_budget.own_s} s (its encode runs on a worker thread, not the event "
            "loop, and costs in proportion to the audio)."
            if campaign.long_budget is not None
            else "."
        ),
        f"- **Result:** {server_errors} server errors, {len(fuzz.failures)} failures, the APIs "
        f"{'alive throughout' if campaign.apis_alive else 'NOT alive at the end'}; the busiest request for the "
        f"event loop `{busiest.label}` ({busiest.status}, {busiest.cpu.own_s:.2f} s), the slowest with the offload "
        f"`{slowest.label}` ({slowest.status}, {slowest.cpu.tree_s:.2f} s)"
        + (
            f", the costliest long answer `{longest.label}` ({longest.status}, {longest.cpu.own_s:.2f} s)"
            if longest is not None
            else ""
        )
        + f"; {fuzz.linked} scenario steps reused an id a 202 had just named.",
        "- **verify --settled:** " + "; ".join(verify),
        "",
        "| pass | request | cases | statuses | most CPU, API (s) | most CPU, with offload (s) |",
        "|---|---|---|---|---|---|",
        *_rows(fuzz.calls),
        "",
        "### Found and fixed",
        "",
        *(f"- {finding}" for finding in campaign.found),
    ]
    if fuzz.failures:
        lines += ["", "### Failures of this run", "", *(f"- `{f.splitlines()[0][:300]}`" for f in fuzz.failures[:30])]
    return "\n".join(lines) + "\n"


def write_report(campaign: Campaign, page: Path = PAGE) -> None:
    page.write_text(with_section(page.read_text(), FUZZ, render(campaign)))
