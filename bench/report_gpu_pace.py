"""Section (n) GPU pace of docs/benchmarks.md, and its row of the goals table (issue 41)."""

from __future__ import annotations

from typing import Any

from bench.report_goals import _table, _verdict, cpu_rows

BUSY_OF_ALLOWED_GOAL = 0.9


def _busy(run: dict[str, Any]) -> str:
    allow = run["cores_allow"]
    return (
        f"engine busy {run['engine']['busy_share']:.1%} ({allow['of_allowed']:.0%} of the "
        f"{allow['allowed_busy_share']:.1%} the {allow['bound']} allow)"
    )


def gpu_pace_goals(s: dict[str, Any]) -> list[list[str]]:
    n = s.get("gpu_pace")
    name, goal = "(n) GPU pace", "jobs/s >= the baseline's; engine busy >= 90% of what the machine's cores allow"
    if n is None or "voxlog" not in n:
        return [[name, goal, "not measured in this run", "", ""]]
    vx, bl = n["voxlog"], n["baseline"]
    ratio = vx["jobs_per_s"] / bl["jobs_per_s"]
    of_allowed = vx["cores_allow"]["of_allowed"]
    return [
        [
            name,
            goal,
            f"{vx['jobs_per_s']:.0f} jobs/s; {_busy(vx)}; "
            f"{vx['engine']['segments_per_forward']:.1f} segments a forward",
            f"{bl['jobs_per_s']:.0f} jobs/s; {_busy(bl)}",
            _verdict(
                ratio >= 1.0 and of_allowed >= BUSY_OF_ALLOWED_GOAL,
                f"{ratio:.2f}x the baseline; busy {of_allowed:.0%} of what the {vx['cores_allow']['bound']} allow",
            ),
        ]
    ]


def gpu_pace(s: dict[str, Any]) -> list[str]:
    n = s.get("gpu_pace")
    if n is None or "voxlog" not in n:
        return ["Not measured in this run."]
    systems = ("voxlog", "baseline")
    intro = [
        f"{n['jobs']:,} one-sentence jobs (`{n['corpus']}`, each made distinct) to {n['workers']} workers of "
        f"`bench-sleep` at a GPU's batched pace: a forward of up to {n['max_batch']} segments takes "
        f"{n['batch_ms']:g} ms plus {n['ms_per_id']:g} ms per phoneme id of the batch (about an H200's), on a "
        "`cuda:0` device, where voxlog's worker forms forwards of up to 32 segments; the baseline's worker "
        f"claims up to {n['max_batch']} jobs in one `FOR UPDATE SKIP LOCKED` statement and speaks them in one "
        "call. voxlog gets the backlog in one `POST /v1/batches`, the baseline one by one from 32 clients. "
        "*Engine busy* is the seconds the engines counted in their forwards over the wall time (from the "
        "submission to the last job visible); *the cores allow* the jobs per second the server's processes "
        "would make with every core (cores over their CPU per job) and the engine's busy share at that rate, "
        "unless the engines allow less. *Machine busy* is every process's share of the cores, this run's or "
        "not; *the cores the run had*, its own processes' CPU seconds (the client's too) a second.",
        "",
    ]
    rows = []
    for system in systems:
        r = n[system]
        engine, allow = r["engine"], r["cores_allow"]
        rows.append(
            [
                system,
                f"{r['jobs_per_s']:.0f}",
                f"{r['submitted_per_s']:.0f}",
                f"{r['latency']['median_ms'] / 1000:.2f} / {r['latency']['p99_ms'] / 1000:.2f}",
                f"{engine['busy_share']:.1%}",
                " / ".join(f"{w['busy_share']:.1%}" for w in engine["per_worker"].values()),
                f"{engine['segments_per_forward']:.1f}",
                f"{allow['jobs_per_s_by_cores']:.0f} / {allow['jobs_per_s_by_engine']:.0f}",
                f"{allow['allowed_busy_share']:.1%} ({allow['bound']})",
                f"{allow['of_allowed']:.0%}",
                f"{r['cpu_ms_per_job']['machine_busy_fraction']:.0%} / {allow['cores_used']:.2f} of {allow['cores']}",
            ]
        )
    header = [
        "",
        "jobs/s end to end",
        "submitted per s",
        "latency median / p99 (s)",
        "engine busy",
        "busy by worker",
        "segments a forward",
        "jobs/s the cores / the engines allow",
        "busy allowed (bound)",
        "busy of allowed",
        "machine busy / cores the run had",
    ]
    return [
        *intro,
        *_table(header, rows),
        "",
        "CPU time per job by process (user + system seconds from `/proc`, divided by the jobs of the run):",
        "",
        *_table(["CPU ms per job", *systems], cpu_rows([n[system]["cpu_ms_per_job"] for system in systems])),
    ]
