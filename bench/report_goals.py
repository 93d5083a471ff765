"""The page's opening table (issue 14's goals beside the figures of the run) and sections (h) and (i)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

CPU_SERVER: Final = ("api", "projector", "workers", "kafka", "postgres")  # everything but the benchmark client
CPU_ROWS: Final = (*CPU_SERVER, "client")
BATCH_GOAL_JOBS_PER_S: Final = 1500.0


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def cpu_rows(cpus: Sequence[dict[str, float]]) -> list[list[str]]:
    """CPU ms per job by process, a column for each run in ``cpus``, and a bold row of their sums."""
    rows = [[name, *(f"{cpu[name]:.1f}" if name in cpu else "n/a" for cpu in cpus)] for name in CPU_ROWS]
    rows.append(["**all**", *(f"**{sum(cpu.get(name, 0.0) for name in CPU_ROWS):.1f}**" for cpu in cpus)])
    return rows


def _server_cpu(cpu: dict[str, float]) -> float:
    return sum(cpu.get(name, 0.0) for name in CPU_SERVER)


def _verdict(met: bool, how: str) -> str:
    return f"**met** ({how})" if met else f"not met ({how})"


def _row(
    s: dict[str, Any], name: str, goal: str, figure: Callable[[dict[str, Any]], tuple[str, str, str]]
) -> list[str]:
    """One goal's row, or a row that says the run did not measure it (a partial or older run)."""
    try:
        measured, baseline, verdict = figure(s)
    except KeyError:
        return [name, goal, "not measured in this run", "", ""]
    return [name, goal, measured, baseline, verdict]


def _throughput(s: dict[str, Any]) -> tuple[str, str, str]:
    t = s["throughput"]
    ratios = {w: t["voxlog"][w]["jobs_per_s"] / t["baseline"][w]["jobs_per_s"] for w in t["voxlog"]}
    measured = ", ".join(f"{t['voxlog'][w]['jobs_per_s']:.0f} jobs/s ({w}w)" for w in ratios)
    baseline = ", ".join(f"{t['baseline'][w]['jobs_per_s']:.0f}" for w in ratios)
    worst = min(ratios.values())
    return measured, baseline, _verdict(worst >= 1.0, f"{', '.join(f'{r:.2f}x' for r in ratios.values())}")


def _cpu(s: dict[str, Any]) -> tuple[str, str, str]:
    t = s["throughput"]
    pairs = {
        w: (_server_cpu(t["voxlog"][w]["cpu_ms_per_job"]), _server_cpu(t["baseline"][w]["cpu_ms_per_job"]))
        for w in t["voxlog"]
    }
    measured = ", ".join(f"{vx:.1f} ms ({w}w)" for w, (vx, _) in pairs.items())
    baseline = ", ".join(f"{bl:.1f}" for _, bl in pairs.values())
    worst = max(vx / bl for vx, bl in pairs.values())
    return measured, baseline, _verdict(worst <= 1.0, f"up to {worst:.2f}x the baseline's")


def _overhead(s: dict[str, Any]) -> tuple[str, str, str]:
    vx, bl = s["light"]["voxlog"]["overhead"]["median_ms"], s["light"]["baseline"]["overhead"]["median_ms"]
    return f"{vx:.1f} ms", f"{bl:.1f} ms", _verdict(vx <= bl, f"{vx / bl:.2f}x, {vx - bl:+.1f} ms")


def _scale(s: dict[str, Any]) -> tuple[str, str, str]:
    wide = max(s["scale_out"]["voxlog"], key=int)
    vx, bl = (s["scale_out"][n][wide]["efficiency"] for n in ("voxlog", "baseline"))
    return f"{vx:.0%} ({wide} workers)", f"{bl:.0%}", _verdict(vx >= 0.95, f"{(vx - 0.95) * 100:+.0f} points")


def _head_of_line(s: dict[str, Any]) -> tuple[str, str, str]:
    h = s["head_of_line"]
    single, bl = h["voxlog"]["short_latency"], h["baseline"]["short_latency"]
    if "voxlog_documents" not in h:
        vx, measured = single, f"p50 {single['median_ms']:.0f} ms, p99 {single['p99_ms']:.0f} ms"
    else:  # a long text goes through POST /v1/documents: that is the figure judged, the other beside it
        vx = h["voxlog_documents"]["short_latency"]
        measured = (
            f"documents endpoint: p50 {vx['median_ms']:.0f} ms, p99 {vx['p99_ms']:.0f} ms (each document one job: "
            f"p50 {single['median_ms']:.0f} ms, p99 {single['p99_ms']:.0f} ms)"
        )
    baseline = f"p50 {bl['median_ms']:.0f} ms, p99 {bl['p99_ms']:.0f} ms"
    ratios = f"p50 {vx['median_ms'] / bl['median_ms']:.1f}x, p99 {vx['p99_ms'] / bl['p99_ms']:.1f}x"
    return measured, baseline, _verdict(vx["median_ms"] <= bl["median_ms"] and vx["p99_ms"] <= bl["p99_ms"], ratios)


def _first_audio(s: dict[str, Any]) -> tuple[str, str, str]:
    f = s["first_audio"]
    vx, engine = f["voxlog"]["first_audio"]["median_ms"], f["engine_alone"]["first_audio"]["median_ms"]
    over = vx - engine
    return (
        f"{vx:.0f} ms (engine alone {engine:.0f} ms)",
        f"{f['baseline']['first_audio']['median_ms']:.0f} ms",
        _verdict(over <= 50, f"{over:+.0f} ms over the engine; the goal is +50"),
    )


def _default_stream(s: dict[str, Any]) -> tuple[str, str, str]:
    f = s["first_audio"]["voxlog"]
    first, whole = f["default_first_byte"]["median_ms"], f["default_whole"]["median_ms"]
    return (
        f"first byte {first:.0f} ms, last {whole:.0f} ms",
        "n/a",
        _verdict(first < 0.8 * whole, "the first byte comes long before the last"),
    )


def _batches(s: dict[str, Any]) -> tuple[str, str, str]:
    b = s["batches"]
    vx = b["voxlog"]["jobs_per_s"]
    return (
        f"{vx:.0f} jobs/s ({b['requests']} requests, {b['workers']} workers; submitted at "
        f"{b['voxlog']['submitted_per_s']:.0f}/s)",
        f"{b['baseline']['jobs_per_s']:.0f} jobs/s one by one",
        _verdict(vx >= BATCH_GOAL_JOBS_PER_S, f"{vx / BATCH_GOAL_JOBS_PER_S:.0%} of {BATCH_GOAL_JOBS_PER_S:.0f}"),
    )


def _priorities(s: dict[str, Any]) -> tuple[str, str, str]:
    j = s["priorities"]
    behind, idle, fifo = j["behind_batch"], j["idle"], j["behind_interactive"]
    return (
        f"p50 {behind['median_ms']:.0f} ms, p99 {behind['p99_ms']:.0f} ms behind"
        f" about {j.get('behind_batch_audio_s', j['backlog_audio_s']) / 60:.0f} min of batch audio",
        f"idle: p50 {idle['median_ms']:.0f}, p99 {idle['p99_ms']:.0f} ms; one queue: p99 {fifo['p99_ms']:.0f} ms",
        f"p99 {behind['p99_ms'] / idle['p99_ms']:.1f}x idle (no goal set: the figure to watch)",
    )


def goals(s: dict[str, Any], extra: Sequence[list[str]] = ()) -> list[str]:
    rows = [
        _row(s, "(a) throughput", ">= 1.0x the baseline at 1, 2, 4 workers (aim 2x)", _throughput),
        _row(s, "(a) server CPU per job", "<= the baseline's (all processes but the client)", _cpu),
        _row(s, "(b) overhead at light load", "median <= the baseline's", _overhead),
        _row(s, "(e) scale-out", ">= 95% of ideal at 8 workers", _scale),
        _row(s, "(h) head-of-line", "short requests' p50 and p99 <= the baseline's", _head_of_line),
        _row(s, "(f) time to first audio", "<= the engine alone + 50 ms", _first_audio),
        _row(s, "(f) streaming by default", "an OpenAI client's default request (mp3) streams", _default_stream),
        _row(s, "(i) batch submission", f">= {BATCH_GOAL_JOBS_PER_S:.0f} jobs/s end to end", _batches),
        _row(s, "(j) priorities", "interactive latency behind a batch backlog, against idle", _priorities),
        *extra,
    ]
    return _table(["", "goal", "voxlog", "baseline", "verdict"], rows)


def head_of_line(s: dict[str, Any]) -> list[str]:
    h = s.get("head_of_line")
    if h is None:
        return ["Not measured in this run."]
    rows = [
        [
            n,
            f"{h[n]['short_latency']['median_ms']:.0f}",
            f"{h[n]['short_latency']['p99_ms']:.0f}",
            f"{h[n]['short_latency']['max_ms']:.0f}",
            f"{h[n]['document_latency']['median_ms'] / 1000:.1f}",
        ]
        for n in ("voxlog", "voxlog_documents", "baseline")
        if n in h
    ]
    intro = [
        f"{h['documents']} documents of about {h['document_chars']:,} characters submitted first, then "
        f"{h['short_requests']} short requests one at a time, to {h['workers']} workers of `bench-sleep` at "
        f"{h['ms_per_char']:g} ms per character (a document takes about "
        f"{h['document_chars'] * h['ms_per_char'] / 1000:.0f} s, a short request about a tenth of a second).",
        "`voxlog` submits each document as one job (what a job table does); `voxlog_documents` submits it "
        "through `POST /v1/documents`, which makes each paragraph a part at batch priority"
        + (f" ({h['voxlog_documents']['parts']} parts in all)" if "voxlog_documents" in h else "")
        + ": the parts spread over every worker, and a worker takes a short (interactive) request before its "
        "next part. Its documents' time is until their last part.",
        "",
    ]
    header = ["", "short: p50 (ms)", "short: p99 (ms)", "short: max (ms)", "documents: median (s)"]
    return [*intro, *_table(header, rows)]


def batches(s: dict[str, Any]) -> list[str]:
    b = s.get("batches")
    if b is None:
        return ["Not measured in this run."]
    rows = []
    for n in ("voxlog", "baseline"):
        r = b[n]
        rows.append(
            [
                n,
                f"{r['submission_s']:.2f}",
                f"{r['submitted_per_s']:.0f}",
                f"{r['jobs_per_s']:.0f}",
                f"{r['latency']['median_ms'] / 1000:.2f} / {r['latency']['p99_ms'] / 1000:.2f}",
                f"{_server_cpu(r['cpu_ms_per_job']):.1f}",
            ]
        )
    intro = [
        f"{b['requests']:,} distinct requests with the zero-time engine and {b['workers']} workers: voxlog in one "
        "`POST /v1/batches`, the baseline (which has no batch endpoint) one by one from 32 concurrent clients. "
        "*End to end* is from the submission to the last job completed and visible.",
        "",
    ]
    header = [
        "",
        "submission (s)",
        "submitted per s",
        "jobs/s end to end",
        "latency median / p99 (s)",
        "server CPU ms per job",
    ]
    return [*intro, *_table(header, rows)]


def priorities(s: dict[str, Any]) -> list[str]:
    j = s.get("priorities")
    if j is None:
        return ["Not measured in this run."]
    rows = [
        [label, f"{j[key]['median_ms']:.0f}", f"{j[key]['p99_ms']:.0f}", f"{j[key]['max_ms']:.0f}"]
        for label, key in (
            ("idle system", "idle"),
            ("behind the backlog, batch priority (POST /v1/batches)", "behind_batch"),
            ("behind the same backlog as interactive (one queue, as before priorities)", "behind_interactive"),
        )
    ]
    intro = [
        f"{j['backlog_requests']} short requests (about {j['backlog_audio_s'] / 60:.0f} minutes of audio) queued"
        f" with one `POST /v1/batches`, then {j['interactive_requests']} interactive requests one at a time, to"
        f" {j['workers']} workers of `bench-sleep` at {j['ms_per_char']:g} ms per character; latency is submitted"
        " to visible. The baseline has no priorities: its queue is the last row's.",
        "",
    ]
    return [*intro, *_table(["interactive requests", "p50 (ms)", "p99 (ms)", "max (ms)"], rows)]
