"""Section (o) duplicates under a Zipf load of docs/benchmarks.md, and its row of the goals table (issue 41)."""

from __future__ import annotations

from typing import Any

from bench.report_goals import _table, _verdict, cpu_rows

BUSY_GOAL = 0.9
SYSTEMS = ("voxlog", "baseline")
ARRIVALS = {"at_once": "at once", "in_turn": "in turn"}


def _measured(o: dict[str, Any] | None) -> bool:
    return o is not None and all(arrival in o for arrival in ARRIVALS)


def _claims(o: dict[str, Any], system: str) -> str:
    return "; ".join(
        f"{how}: {o[arrival][system]['claims']} claims for {o[arrival][system]['syntheses']} syntheses, busy "
        f"{o[arrival][system]['busy_share']:.0%}"
        for arrival, how in ARRIVALS.items()
    )


def zipf_goals(s: dict[str, Any]) -> list[list[str]]:
    o = s.get("zipf_load")
    name, goal = "(o) Duplicates under a Zipf load", "claims = syntheses; engine busy >= 90%"
    if o is None or not _measured(o):
        return [[name, goal, "not measured in this run", "", ""]]
    runs = [o[arrival]["voxlog"] for arrival in ARRIVALS]
    met = all(r["claims"] == r["syntheses"] and r["busy_share"] >= BUSY_GOAL for r in runs)
    beyond = max(r["claims_beyond_syntheses"] for r in runs)
    how = f"up to {beyond} claims beyond the syntheses, busy {min(r['busy_share'] for r in runs):.0%} at the least"
    return [[name, goal, _claims(o, "voxlog"), _claims(o, "baseline"), _verdict(met, how)]]


def zipf_load(s: dict[str, Any]) -> list[str]:
    o = s.get("zipf_load")
    if o is None or not _measured(o):
        return ["Not measured in this run."]
    alone = o["engine_alone"]
    intro = [
        f"{o['requests']:,} requests over {o['texts']} distinct one-sentence texts, the text of rank k drawn with "
        f"weight 1/k^{o['exponent']:g} (seed {o['seed']}; the most drawn {o['most_drawn']} times, "
        f"{o['drawn_once']} drawn once), from {o['clients']} concurrent clients to one `kokoro-onnx` worker with "
        "its default settings (segment cache on), on fresh deployments each time: *at once*, every request sent "
        "together (a backlog); *in turn*, each client sending its next request once its last is done. "
        "*Syntheses* are the segments the engine rendered; *reused*, the segments the worker took from its "
        "segment cache; *claims*, voxlog's `JobClaimed` events and the baseline's attempts; *from cache*, "
        "completions answered with another job's result (voxlog's `JobCompleted` with `cache_hit`, the "
        "baseline's jobs coalesced at insert). *Engine busy* is the worker's synthesis seconds over the wall time "
        f"(from the first submission to the last job visible); *engine alone*, the {alone['jobs']} distinct texts "
        f"drawn in a tight loop in the benchmark process: {alone['wall_s']:.1f} s.",
        "",
    ]
    rows = []
    for arrival, how in ARRIVALS.items():
        for system in SYSTEMS:
            r = o[arrival][system]
            rows.append(
                [
                    f"{system}, {how}",
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
    runs = [(f"{system}, {how}", o[arrival][system]) for arrival, how in ARRIVALS.items() for system in SYSTEMS]
    return [
        *intro,
        *_table(header, rows),
        "",
        "CPU time per job by process (user + system seconds from `/proc`, divided by the requests of the run):",
        "",
        *_table(["CPU ms per job", *(name for name, _ in runs)], cpu_rows([r["cpu_ms_per_job"] for _, r in runs])),
    ]
