"""Section (o) duplicates under a Zipf load of docs/benchmarks.md, and its row of the goals table (issue 41)."""

from __future__ import annotations

from typing import Any

from bench.report_goals import _table, _verdict, cpu_rows

BUSY_GOAL = 0.9
SYSTEMS = ("voxlog", "baseline")


def _claims(run: dict[str, Any]) -> str:
    return f"{run['claims']} claims for {run['syntheses']} syntheses; engine busy {run['busy_share']:.0%}"


def zipf_goals(s: dict[str, Any]) -> list[list[str]]:
    o = s.get("zipf_load")
    name, goal = "(o) Duplicates under a Zipf load", "claims = syntheses; engine busy >= 90%"
    if o is None or "voxlog" not in o:
        return [[name, goal, "not measured in this run", "", ""]]
    vx, bl = o["voxlog"], o["baseline"]
    met = vx["claims"] == vx["syntheses"] and vx["busy_share"] >= BUSY_GOAL
    how = f"{vx['claims_beyond_syntheses']} claims beyond the syntheses, busy {vx['busy_share']:.0%}"
    return [[name, goal, _claims(vx), _claims(bl), _verdict(met, how)]]


def zipf_load(s: dict[str, Any]) -> list[str]:
    o = s.get("zipf_load")
    if o is None or "voxlog" not in o:
        return ["Not measured in this run."]
    alone = o["engine_alone"]
    intro = [
        f"{o['requests']:,} requests over {o['texts']} distinct one-sentence texts, the text of rank k drawn with "
        f"weight 1/k^{o['exponent']:g} (seed {o['seed']}; the most drawn {o['most_drawn']} times, "
        f"{o['drawn_once']} drawn once), sent at once by {o['clients']} concurrent clients to one `kokoro-onnx` "
        "worker with its default settings (segment cache on). *Syntheses* are the segments the engine rendered; "
        "*reused*, the segments the worker took from its segment cache; *claims*, voxlog's `JobClaimed` events "
        "and the baseline's attempts; *from cache*, completions answered with another job's result (voxlog's "
        "`JobCompleted` with `cache_hit`, the baseline's jobs coalesced at insert). *Engine busy* is the worker's "
        "synthesis seconds over the wall time (from the first submission to the last job visible); *engine "
        f"alone*, the {alone['jobs']} distinct texts drawn in a tight loop in the benchmark process: "
        f"{alone['wall_s']:.1f} s.",
        "",
    ]
    rows = []
    for system in SYSTEMS:
        r = o[system]
        rows.append(
            [
                system,
                str(r["submissions"]),
                str(r["distinct_texts"]),
                str(r["syntheses"]),
                str(r["segments_reused"]),
                str(r["claims"]),
                str(r["from_cache"]),
                f"{r['wall_s']:.1f}",
                f"{r['wall_s'] / alone['wall_s']:.2f}" if alone["wall_s"] else "n/a",
                f"{r['busy_share']:.0%}",
                f"{r['worker_cores']:.2f}",
            ]
        )
    header = [
        "",
        "submissions",
        "distinct texts",
        "syntheses",
        "segments reused",
        "claims",
        "from cache",
        "wall s",
        "wall / engine alone",
        "engine busy",
        "worker cores",
    ]
    return [
        *intro,
        *_table(header, rows),
        "",
        "CPU time per job by process (user + system seconds from `/proc`, divided by the requests of the run):",
        "",
        *_table(["CPU ms per job", *SYSTEMS], cpu_rows([o[system]["cpu_ms_per_job"] for system in SYSTEMS])),
    ]
