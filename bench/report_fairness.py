"""Sections (l) short behind long and (m) tenants of docs/benchmarks.md, and their rows of the goals table
(issue 27's goals)."""

from __future__ import annotations

from typing import Any

from bench.report_goals import _table, _verdict


def _short_goal_ms(l_: dict[str, Any], run: dict[str, Any]) -> float:
    """Issue 27: a short request's p99 at most 3x its own synthesis time plus one segment."""
    return 3 * run["short_own_ms"]["p99_ms"] + l_["one_segment_ms"]


def fairness_goals(s: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    l_ = s.get("short_behind_long")
    if l_ is not None and "voxlog" in l_:
        vx, fifo = l_["voxlog"], l_["baseline"]
        goal_ms = _short_goal_ms(l_, vx)
        makespan = vx["makespan_s"] / vx["ideal_s"]
        longs = vx["long_last_s"] / fifo["long_last_s"]
        rows.append(
            [
                "(l) short behind long",
                "short p99 <= 3x own synthesis + one segment; makespan <= 1.05x ideal; long jobs <= 1.1x FIFO",
                f"short p99 {vx['short']['p99_ms']:.0f} ms (bound {goal_ms:.0f}); makespan {makespan:.2f}x ideal; "
                f"last long job {longs:.2f}x FIFO's",
                f"short p99 {fifo['short']['p99_ms']:.0f} ms (strict FIFO)",
                _verdict(
                    vx["short"]["p99_ms"] <= goal_ms and makespan <= 1.05 and longs <= 1.1,
                    f"{vx['short']['p99_ms'] / goal_ms:.2f} of the short bound, {makespan:.2f}x ideal, "
                    f"{longs:.2f}x FIFO"
                    + (
                        f"; no schedule beats a short p99 of {vx['short_floor']['p99_ms']:.0f} ms for this burst"
                        if "short_floor" in vx
                        else ""
                    ),
                ),
            ]
        )
    m = s.get("tenants")
    if m is not None:
        rows.append(_tenants_goal("(m) tenants", m))
        if "paced" in m:
            rows.append(_tenants_goal(f"(m) tenants at {_pace(m['paced'])}", m["paced"]))
    return rows


def _pace(run: dict[str, Any]) -> str:
    per_char = run.get("ms_per_char", 0.0)
    return f"{run['synth_ms']:g} ms" + (f" + {per_char:g} ms a character" if per_char else " a request")


def _a_time(run: dict[str, Any]) -> tuple[float, str]:
    """A's batch time: measured where the run drained it, else the least it can take (every worker on A)."""
    if "a_batch_s" in run:
        return run["a_batch_s"], f"A's {run['a_batch_s']:.1f} s"
    return run["a_batch_ideal_s"], f"A's at least {run['a_batch_ideal_s']:.0f} s"


def _tenants_goal(name: str, run: dict[str, Any]) -> list[str]:
    ratio = run["b_behind_a"]["p99_ms"] / run["idle"]["p99_ms"]
    a_time, a_said = _a_time(run)
    share = run["b_batch_s"] / a_time
    return [
        name,
        "B's interactive p99 <= 2x idle; B's batch done in about its fair share, not after A's",
        f"B p99 {run['b_behind_a']['p99_ms']:.0f} ms (idle {run['idle']['p99_ms']:.0f}); B's batch "
        f"{run['b_batch_s']:.1f} s (fair share {2 * run['b_alone_s']:.1f} s), {a_said}",
        "n/a (no tenants)",
        _verdict(ratio <= 2.0 and share < 0.5, f"p99 {ratio:.1f}x idle; B's batch took {share:.0%} of A's time"),
    ]


def _within_twice_idle(run: dict[str, Any]) -> str:
    """How many of B's requests behind A's batch the goal would pass one by one, and where the slowest fell."""
    behind = run["b_behind_a"]
    if "each_ms" not in behind:
        return ""
    bound = 2 * run["idle"]["p99_ms"]
    within = sum(ms <= bound for ms in behind["each_ms"])
    return (
        f"At {_pace(run)}, {within} of B's {len(behind['each_ms'])} interactive requests behind A's batch took at "
        f"most twice the idle p99 ({bound:.0f} ms); the slowest, {behind['max_ms']:.0f} ms, was request "
        f"{behind['slowest_index'] + 1} in the order sent."
    )


def _what_any_schedule_can_do(l_: dict[str, Any]) -> list[str]:
    """The floors the scenario itself sets, so a figure can be read against what no policy could beat."""
    vx, fifo = l_.get("voxlog"), l_.get("baseline")
    if vx is None or fifo is None or "short_floor" not in vx:
        return []
    floor = vx["short_floor"]
    return [
        "",
        f"What no schedule can beat here: the short requests alone, shortest first on {l_['workers']} engines from "
        f"the moment they arrive, with no long text in the way, finish at p50 {floor['median_ms']:.0f} ms, p99 "
        f"{floor['p99_ms']:.0f} ms, since the last of a burst waits for the others; the bound of "
        f"{_short_goal_ms(l_, vx):.0f} ms is a bound for one short request behind long work, not for a burst of "
        f"{l_['short_requests']}. And a schedule that runs every short request before the long texts' last "
        f"segments cannot finish the last long text before the ideal makespan, {vx['ideal_s']:.1f} s, which is "
        f"{vx['ideal_s'] / fifo['long_last_s']:.2f}x FIFO's {fifo['long_last_s']:.1f} s: at these proportions the "
        "short goal and the long-job goal exclude each other, and the policy gives the short requests the engine.",
    ]


def short_behind_long(s: dict[str, Any]) -> list[str]:
    l_ = s.get("short_behind_long")
    if l_ is None:
        return ["Not measured in this run."]
    rows = []
    for name in ("voxlog", "voxlog_one_claim", "baseline"):
        if name not in l_:
            continue
        r = l_[name]
        rows.append(
            [
                name,
                f"{r['short']['median_ms']:.0f} / {r['short']['p99_ms']:.0f}",
                f"{_short_goal_ms(l_, r):.0f}",
                f"{r['makespan_s']:.1f} ({r['makespan_s'] / r['ideal_s']:.2f}x)",
                " ".join(f"{t:.1f}" for t in r["long_finish_s"]),
            ]
        )
    intro = [
        f"{l_['long_jobs']} texts of about {l_['long_chars']:,} characters submitted at once, then "
        f"{l_['short_requests']} one-sentence requests at once, to {l_['workers']} workers of `bench-sleep` at "
        f"{l_['ms_per_char']:g} ms per character and {l_['synth_ms']:g} ms per segment (a long text takes about "
        f"{l_['long_chars'] * l_['ms_per_char'] / 1000:.0f} s; its longest segment {l_['one_segment_ms']:.0f} ms). "
        "`voxlog` holds several claims per worker (`VOXLOG_HELD_CLAIMS`, 4) and gives the engine's next segment to "
        "the job the policy puts first; `voxlog_one_claim` is the same with one claim (it still claims the "
        "shortest waiting job first, but never interrupts one); the baseline's `SKIP LOCKED` queue is strict FIFO. "
        "The bound is issue 27's: 3x the request's own synthesis time plus one segment. The makespan is from the "
        "first submission to the last job visible, against the ideal (all the engine time over the workers).",
        "",
    ]
    header = ["", "short p50 / p99 (ms)", "bound (ms)", "makespan (s)", "long jobs done at (s)"]
    lines = [*intro, *_table(header, rows), *_what_any_schedule_can_do(l_)]
    real = l_.get("real_model")
    if real is not None:
        real_rows = [
            [
                name,
                f"{real[name]['short']['median_ms']:.0f} / {real[name]['short']['p99_ms']:.0f}",
                f"{real[name]['long_last_s']:.1f}",
                f"{real[name]['makespan_s']:.1f}",
            ]
            for name in ("voxlog", "voxlog_one_claim")
            if name in real
        ]
        lines += [
            "",
            f"With the real model (kokoro-onnx int8, one worker): {real['long_jobs']} texts of about "
            f"{real['long_chars']} characters, then short requests; the same requests one at a time on the idle "
            f"worker took p50 {real['idle']['median_ms']:.0f} ms, p99 {real['idle']['p99_ms']:.0f} ms.",
            "",
            *_table(["", "short p50 / p99 (ms)", "last long job (s)", "makespan (s)"], real_rows),
        ]
    return lines


def tenants(s: dict[str, Any]) -> list[str]:
    m = s.get("tenants")
    if m is None:
        return ["Not measured in this run."]

    def legs(stages: dict[str, float]) -> list[str]:
        order = ("api", "to_claim", "claimed", "to_visible")
        return [f"{stages[leg]:.0f}" if leg in stages else "n/a" for leg in order]

    def row(name: str, figures: dict[str, Any]) -> list[str]:
        return [name, f"{figures['median_ms']:.0f}", f"{figures['p99_ms']:.0f}", *legs(figures.get("stages_ms", {}))]

    runs = [m, *([m["paced"]] if "paced" in m else [])]
    rows, batches = [], []
    for run in runs:
        pace = _pace(run)
        rows += [
            row(f"at {pace}: B's interactive requests, idle system", run["idle"]),
            row(f"at {pace}: B's interactive requests behind A's batch", run["b_behind_a"]),
        ]
        if "slowest_stages_ms" in run["b_behind_a"]:
            slowest = run["b_behind_a"]
            worst = [f"{slowest['max_ms']:.0f} (max)", *legs(slowest["slowest_stages_ms"])]
            rows.append(["the slowest of them", "", *worst])
        meanwhile = (
            f"; {run['a_done_meanwhile']:,} of A's jobs were done meanwhile" if "a_done_meanwhile" in run else ""
        )
        batches.append(
            f"At {pace}, B's batch took {run['b_batch_s']:.1f} s from its submission (alone on the fleet about "
            f"{run['b_alone_s']:.1f} s; its fair share beside A, half the fleet, about {2 * run['b_alone_s']:.1f} s)"
            f"{meanwhile}; {_a_time(run)[1]}"
            + ("." if "a_batch_s" in run else ", every worker on A: the run ends once B's work is measured.")
        )
        batches.append(_within_twice_idle(run))
    return [
        f"Tenant A submits {m['a_batch']:,} batch requests, then tenant B submits a batch of {m['b_batch']} and "
        f"{m['b_interactive']} interactive requests one at a time, to {m['workers']} workers of `bench-sleep`; "
        "equal weights. Twice: at a flat pace where orchestration is the work (A's flood keeps the machine's "
        "CPUs busy), then at a per-character pace where synthesis is.",
        "",
        *[line for said in batches if said for line in (said, "")],
        "The legs are milliseconds (medians, but for the slowest request): the API's answer, from the job "
        "written down to its claim, the claim to the completion, and the completion to the API's tables.",
        "",
        *_table(["", "p50 (ms)", "p99 (ms)", "API", "to claim", "claimed", "to visible"], rows),
    ]
