"""Results JSON -> docs/benchmarks.md and its PNG plots. Every number printed comes from the JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt

from bench.report_fairness import fairness_goals, short_behind_long, tenants
from bench.report_goals import CPU_ROWS, batches, cpu_rows, goals, head_of_line, priorities
from bench.report_gpu import gpu_section
from bench.report_gpu_pace import gpu_pace, gpu_pace_goals
from bench.report_zipf_load import zipf_goals, zipf_load

SYSTEMS = ("voxlog", "baseline")
LIGHT_ROWS = (
    ("end_to_end", "end to end (submit → completed visible)"),
    ("overhead", "overhead (end to end - synthesis)"),
    ("submit_to_claimed", "submit → claimed"),
    ("claimed_to_first_segment_visible", "claimed → first segment visible"),
    ("completed_to_visible", "completed → visible"),
)


def _ms(summary: dict[str, Any], key: str) -> str:
    return f"{summary[key]:.1f}" if summary.get("n") else "n/a"


def _median_p99(summary: dict[str, Any]) -> str:
    return f"{_ms(summary, 'median_ms')} / {_ms(summary, 'p99_ms')}"


def _summary_ratio(a: dict[str, Any], b: dict[str, Any], key: str = "median_ms") -> str:
    return _ratio(a.get(key), b.get(key))


def _size(value: Any) -> str:
    """A profile size as the page shows it, the same from a live run (tuples) and from JSON (lists)."""
    return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _ratio(a: float | None, b: float | None) -> str:
    # A ratio of a negative step (the two clocks' events overlapped) would read as a speed-up.
    return f"{a / b:.2f}" if a is not None and b is not None and a > 0 and b > 0 else "n/a"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _environment(results: dict[str, Any]) -> list[str]:
    env = results["environment"]
    m, v = env["machine"], env["versions"]
    versions = ", ".join(f"{k} {val}" for k, val in v.items())
    sizes = results["profile_sizes"]
    return [
        f"- **Run:** {env['date']}, commit `{env['commit']}`, profile `{results['profile']}`, "
        f"{results['duration_s'] / 60:.1f} minutes in all.",
        f"- **Machine:** {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB memory, {m['os']}; no GPU.",
        f"- **Versions:** {versions}.",
        f"- **Sizes:** {'; '.join(f'{k}={_size(val)}' for k, val in sizes.items() if k != 'name')}.",
    ]


def _throughput(s: dict[str, Any]) -> list[str]:
    rows = []
    for workers in s["throughput"]["voxlog"]:
        vx, bl = s["throughput"]["voxlog"][workers], s["throughput"]["baseline"][workers]
        rows.append(
            [
                workers,
                str(vx["jobs"]),
                f"{vx['jobs_per_s']:.1f}",
                f"{bl['jobs_per_s']:.1f}",
                _ratio(vx["jobs_per_s"], bl["jobs_per_s"]),
                " / ".join(f"{r['cpu_ms_per_job']['machine_busy_fraction']:.0%}" for r in (vx, bl)),
                _median_p99(vx["latency"]),
                _median_p99(bl["latency"]),
            ]
        )
    header = [
        "workers",
        "jobs",
        "voxlog jobs/s",
        "baseline jobs/s",
        "voxlog / baseline",
        "CPU busy, voxlog / baseline",
        "voxlog latency median / p99 (ms)",
        "baseline latency median / p99 (ms)",
    ]
    return _table(header, rows)


def _cpu(s: dict[str, Any]) -> list[str]:
    runs = [(n, w, s["throughput"][n][w]["cpu_ms_per_job"]) for w in s["throughput"]["voxlog"] for n in SYSTEMS]
    rows = cpu_rows([cpu for _, _, cpu in runs])
    return _table(["CPU ms per job", *(f"{n}, {w} worker(s)" for n, w, _ in runs)], rows)


def _light(s: dict[str, Any]) -> list[str]:
    vx, bl = s["light"]["voxlog"], s["light"]["baseline"]
    rows = [
        [
            label,
            _ms(vx[key], "median_ms"),
            _ms(vx[key], "p99_ms"),
            _ms(bl[key], "median_ms"),
            _ms(bl[key], "p99_ms"),
            _summary_ratio(vx[key], bl[key]),
        ]
        for key, label in LIGHT_ROWS
    ]
    rows.append(
        [
            "synthesis per job (engine counter)",
            f"{vx['synthesis_per_job_ms']:.2f}",
            "",
            f"{bl['synthesis_per_job_ms']:.2f}",
            "",
            "",
        ]
    )
    header = ["per job (ms)", "voxlog median", "voxlog p99", "baseline median", "baseline p99", "ratio of medians"]
    return _table(header, rows)


def _timeline(s: dict[str, Any]) -> list[str]:
    vx, bl = s["light"]["voxlog"]["timeline"], s["light"]["baseline"]["timeline"]
    rows = [
        [
            key.replace("_to_", " → "),
            _ms(vx[key], "median_ms"),
            _ms(bl[key], "median_ms"),
            _summary_ratio(vx[key], bl[key]),
        ]
        for key in vx
    ]
    return _table(["step (ms)", "voxlog median", "baseline median", "ratio"], rows)


def _limit(sat: dict[str, Any]) -> float:
    """The engine's best audio rate alone: the better of the two tight loops."""
    return max(float(sat[k]["audio_s_per_wall_s"]) for k in ("engine_alone", "engine_alone_again"))


def _saturation(s: dict[str, Any]) -> list[str]:
    sat = s["saturation"]
    limit = _limit(sat)
    rows = [
        [
            name,
            str(r["jobs"]),
            f"{r['wall_s']:.1f}",
            f"{r['synthesis_s']:.1f}",
            f"{r['audio_s']:.1f}",
            f"{r['busy_fraction']:.0%}",
            f"{r['audio_s_per_wall_s']:.2f}",
            f"{r['audio_s_per_wall_s'] / limit:.0%}",
        ]
        for name, r in (
            ("engine alone (tight loop, first)", sat["engine_alone"]),
            *((n, sat[n]) for n in SYSTEMS),
            ("engine alone (tight loop, last)", sat["engine_alone_again"]),
        )
    ]
    vx, bl = sat["voxlog"], sat["baseline"]
    keys = ("wall_s", "synthesis_s", "audio_s", "busy_fraction", "audio_s_per_wall_s")
    rows.append(["**voxlog / baseline**", "", *(_ratio(vx[k], bl[k]) for k in keys), ""])
    header = ["", "paragraphs", "wall s", "synthesis s", "audio s", "busy", "audio s per wall s", "of the limit"]
    return _table(header, rows)


def _coalescing(s: dict[str, Any]) -> list[str]:
    c = s["coalescing"]
    rows = [
        [
            n,
            str(c[n]["submissions"]),
            str(c[n]["distinct_texts"]),
            str(c[n]["syntheses"]),
            str(c[n]["claims"]),
            f"{c[n]['wall_s']:.1f}",
            _median_p99(c[n]["duplicates"]),
            _median_p99(c[n]["originals"]),
        ]
        for n in SYSTEMS
    ]
    vx, bl = c["voxlog"], c["baseline"]
    rows.append(
        [
            "**voxlog / baseline**",
            "",
            "",
            _ratio(vx["syntheses"], bl["syntheses"]),
            _ratio(vx["claims"], bl["claims"]),
            _ratio(vx["wall_s"], bl["wall_s"]),
            *(
                " / ".join(_summary_ratio(vx[group], bl[group], k) for k in ("median_ms", "p99_ms"))
                for group in ("duplicates", "originals")
            ),
        ]
    )
    header = [
        "",
        "submissions",
        "distinct texts",
        "syntheses (engine calls)",
        "claims",
        "wall s",
        "duplicates median / p99 (ms)",
        "first submissions median / p99 (ms)",
    ]
    return _table(header, rows)


def _scale(s: dict[str, Any]) -> list[str]:
    rows = []
    keyed = s["scale_out"].get("voxlog_key")  # absent from runs before the placement came
    for workers in s["scale_out"]["voxlog"]:
        vx, bl = s["scale_out"]["voxlog"][workers], s["scale_out"]["baseline"][workers]
        key = keyed[workers] if keyed else None
        rows.append(
            [
                workers,
                str(vx["jobs"]),
                f"{vx['ideal_jobs_per_s']:.0f}",
                f"{vx['jobs_per_s']:.1f} ({vx['efficiency']:.0%})",
                *([f"{key['jobs_per_s']:.1f} ({key['efficiency']:.0%})"] if key else []),
                f"{bl['jobs_per_s']:.1f} ({bl['efficiency']:.0%})",
                _ratio(vx["jobs_per_s"], bl["jobs_per_s"]),
                f"{vx['busiest_worker_jobs']}{' / ' + str(key['busiest_worker_jobs']) if key else ''}"
                f" / {bl['busiest_worker_jobs']}",
            ]
        )
    header = [
        "workers",
        "jobs",
        "ideal jobs/s",
        "voxlog jobs/s (of ideal)",
        *(["voxlog by key jobs/s (of ideal)"] if keyed else []),
        "baseline jobs/s (of ideal)",
        "voxlog / baseline",
        f"busiest worker's jobs, voxlog{' / by key' if keyed else ''} / baseline",
    ]
    return _table(header, rows)


def _first_audio(s: dict[str, Any]) -> list[str]:
    f = s["first_audio"]
    rows = [
        [
            "engine alone (segment + first model call)",
            *(_ms(f["engine_alone"]["first_audio"], k) for k in ("median_ms", "p99_ms")),
            "n/a",
            "n/a",
        ]
    ]
    for n in SYSTEMS:
        rows.append(
            [
                n,
                _ms(f[n]["first_audio"], "median_ms"),
                _ms(f[n]["first_audio"], "p99_ms"),
                _ms(f[n]["whole_stream"], "median_ms"),
                _ms(f[n].get("synthesis", {}), "median_ms"),
            ]
        )
    vx, bl = f["voxlog"], f["baseline"]
    rows.append(
        [
            "**voxlog / baseline**",
            *(_summary_ratio(vx["first_audio"], bl["first_audio"], k) for k in ("median_ms", "p99_ms")),
            *(_summary_ratio(vx.get(g, {}), bl.get(g, {})) for g in ("whole_stream", "synthesis")),
        ]
    )
    if "default_first_byte" in vx:
        rows.append(
            [
                "voxlog, default request (mp3)",
                _ms(vx["default_first_byte"], "median_ms"),
                _ms(vx["default_first_byte"], "p99_ms"),
                _ms(vx["default_whole"], "median_ms"),
                "n/a",
            ]
        )
    header = ["", "first audio median (ms)", "p99 (ms)", "whole stream median (ms)", "engine time in the stream (ms)"]
    return _table(header, rows)


def _plots(s: dict[str, Any], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, title in (
        (axes[0], "throughput", "(a) zero-time engine"),
        (axes[1], "scale_out", "(e) 200 ms engine"),
    ):
        for name in SYSTEMS:
            points = s[key][name]
            ax.plot([int(w) for w in points], [p["jobs_per_s"] for p in points.values()], marker="o", label=name)
        if key == "scale_out":
            ideal = s[key]["voxlog"]
            ax.plot([int(w) for w in ideal], [p["ideal_jobs_per_s"] for p in ideal.values()], "k--", label="ideal")
        ax.set_xticks([int(w) for w in s[key]["voxlog"]])
        ax.set(title=title, xlabel="workers", ylabel="jobs per second")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    paths.append(out / "throughput.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(11, 4))
    labels = [label.split(" (")[0] for _, label in LIGHT_ROWS]
    width = 0.2
    for i, (name, stat) in enumerate(
        (("voxlog", "median_ms"), ("voxlog", "p99_ms"), ("baseline", "median_ms"), ("baseline", "p99_ms"))
    ):
        values = [s["light"][name][key].get(stat, 0.0) for key, _ in LIGHT_ROWS]
        ax.bar([x + (i - 1.5) * width for x in range(len(labels))], values, width, label=f"{name} {stat[:-3]}")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set(title="(b) per-job latency at light load", ylabel="milliseconds")
    ax.grid(axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    paths.append(out / "latency.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def _top_cpu(cpu: dict[str, float]) -> str:
    parts = {name: cpu[name] for name in CPU_ROWS if name in cpu}
    top = max(parts, key=lambda name: parts[name])
    return f"{top} ({parts[top]:.1f} of {sum(parts.values()):.1f} ms)"


def _headline(s: dict[str, Any]) -> list[str]:
    top = max(s["throughput"]["voxlog"], key=int)
    vx, bl = s["throughput"]["voxlog"][top], s["throughput"]["baseline"][top]
    light_vx, light_bl = s["light"]["voxlog"]["overhead"], s["light"]["baseline"]["overhead"]
    sat, c, f = s["saturation"], s["coalescing"], s["first_audio"]
    limit = _limit(sat)
    wide = max(s["scale_out"]["voxlog"], key=int)
    so_vx, so_bl = s["scale_out"]["voxlog"][wide], s["scale_out"]["baseline"][wide]
    return [
        f"- **Orchestration ceiling** (zero-time engine, {top} workers): voxlog {vx['jobs_per_s']:.1f} jobs/s, "
        f"baseline {bl['jobs_per_s']:.1f} jobs/s ({_ratio(vx['jobs_per_s'], bl['jobs_per_s'])}x). "
        f"CPU per job, all processes: voxlog {sum(vx['cpu_ms_per_job'].get(n, 0.0) for n in CPU_ROWS):.1f} ms, "
        f"baseline {sum(bl['cpu_ms_per_job'].get(n, 0.0) for n in CPU_ROWS):.1f} ms; the largest share is "
        f"{_top_cpu(vx['cpu_ms_per_job'])} for voxlog and {_top_cpu(bl['cpu_ms_per_job'])} for the baseline.",
        f"- **Per-job overhead at light load** (median): voxlog {_ms(light_vx, 'median_ms')} ms, "
        f"baseline {_ms(light_bl, 'median_ms')} ms.",
        f"- **Real model, backlog:** the engine was busy {sat['voxlog']['busy_fraction']:.0%} of the wall time "
        f"under voxlog and {sat['baseline']['busy_fraction']:.0%} under the baseline; audio per wall second was "
        f"{sat['voxlog']['audio_s_per_wall_s'] / limit:.0%} and {sat['baseline']['audio_s_per_wall_s'] / limit:.0%} "
        "of the engine alone (the better of its two tight loops; the other gave "
        f"{min(sat[k]['audio_s_per_wall_s'] for k in ('engine_alone', 'engine_alone_again')) / limit:.0%}).",
        f"- **Coalescing:** {c['voxlog']['submissions']} submissions over {c['voxlog']['distinct_texts']} texts gave "
        f"{c['voxlog']['syntheses']} syntheses on voxlog and {c['baseline']['syntheses']} on the baseline.",
        f"- **Scale-out** ({wide} workers, 200 ms engine): voxlog {so_vx['efficiency']:.0%} of ideal, baseline "
        f"{so_bl['efficiency']:.0%}; voxlog's busiest worker had {so_vx['busiest_worker_jobs']} of "
        f"{so_vx['jobs']} jobs (an even split is {so_vx['jobs'] / int(wide):.0f}).",
        f"- **Time to first audio** (median): voxlog {_ms(f['voxlog']['first_audio'], 'median_ms')} ms, baseline "
        f"{_ms(f['baseline']['first_audio'], 'median_ms')} ms, the engine alone "
        f"{_ms(f['engine_alone']['first_audio'], 'median_ms')} ms.",
        *_replay_headline(s),
    ]


def _replay_headline(s: dict[str, Any]) -> list[str]:
    r = s.get("replay")  # runs before the replay scenario existed have none
    if not r:
        return []
    return [
        f"- **Replay** ({r['events']:,} events): `voxlog replay` {r['replay_events_per_s']:,.0f} events/s, the live "
        f"projector {r['live_events_per_s']:,.0f} events/s "
        f"({r['replay_events_per_s'] / r['live_events_per_s']:.1f}x); the baseline has no log to replay."
    ]


METHOD = """\
## How it is measured

- **Both systems, one run.** Each scenario deploys voxlog (API, projector,
  workers, on fresh topics and a fresh schema) and then the baseline (its API
  and workers, on a fresh schema), against the same Kafka broker and
  PostgreSQL server, which the command starts on loopback and stops at the end.
- **The baseline** (`bench/baseline/`) is the Postgres job queue voxlog
  replaces, tuned as we would tune it: a jobs table claimed with
  `UPDATE … FROM (SELECT … FOR UPDATE SKIP LOCKED LIMIT 1)`, workers woken by
  LISTEN/NOTIFY with a 1 s fallback poll, segments upserted on
  `(job_id, segment_index)` with the claim fenced in the same statement,
  duplicates coalesced by a unique index on the fingerprint of live jobs,
  pooled connections whose statements asyncpg prepares once. It validates
  requests with voxlog's code and drives the same engine objects, FIFO, WAV
  encoding and blob store.
- **The benchmark engine** `bench-sleep` splits text as the real engines do
  (one character standing in for one phoneme id), sleeps a fixed time per
  segment (0, 100 or 200 ms; no scenario here adds a time per character) and
  returns a tone about as long as the segment would take to say; in (n) it
  takes a GPU's batched pace instead (a time per forward of up to 32 segments
  and per phoneme id in it). It exists for these benchmarks only and is never
  a default. Scenarios (c) and (f) use
  the real kokoro-onnx int8 model.
- **Clocks.** Submission time is the client's clock before the HTTP request;
  "visible" is the commit time of the row the API reads
  (`track_commit_timestamp`), never earlier than the answer to the
  submission; claimed and completed are the systems' own records. Engine time
  comes from the workers' Prometheus counters (`voxlog_synthesis_seconds`).
  Throughput is jobs over the time from the first submission to the last
  job visible; every job is then read back through the HTTP API.
- **Warm-up.** Before any figure, each system runs a few thousand unmeasured
  jobs (`broker_warmup_jobs`), and each deployment a hundred more: a fresh
  broker JVM needs thousands of requests before its JIT settles, and brokers
  in production run warm. The warm-up rates are kept in the results JSON.
- **Load.** The client, both services, Kafka and Postgres share the machine's
  cores, as they would on a single node; figures from a 2-core machine are
  lower bounds of what each design can do on more cores.
- **Noise.** On a shared virtual machine the same scenario can differ by tens
  of percent from one run to the next, for both systems alike: compare the two
  systems within a run (the ratios, the CPU per job), not one run's absolute
  figures with another's.
"""


def _replay(s: dict[str, Any]) -> list[str]:
    r = s.get("replay")
    if not r:
        return []
    return [
        "## (g) Replay",
        "",
        f"A log of {r['jobs']:,} completed jobs ({r['events']:,} events: queued, claimed, a segment, completed)",
        "is applied by the live projector from offset 0 (timed from its first applied batch), then rebuilt",
        "into a fresh schema by `voxlog replay` (read and fold in memory, then one `COPY` per table).",
        "The baseline has no counterpart: a job table keeps no history to rebuild from.",
        "",
        *_table(
            ["", "events", "seconds", "events/s"],
            [
                ["live projector", f"{r['events']:,}", f"{r['live_s']:.1f}", f"{r['live_events_per_s']:,.0f}"],
                [
                    f"`voxlog replay` (read and fold {r['replay_read_s']:.1f} s, copy {r['replay_write_s']:.1f} s)",
                    f"{r['events']:,}",
                    f"{r['replay_s']:.1f}",
                    f"{r['replay_events_per_s']:,.0f}",
                ],
                ["**replay / live**", "", "", f"**{r['replay_events_per_s'] / r['live_events_per_s']:.1f}x**"],
            ],
        ),
        "",
        *_shards(r),
    ]


def _shards(r: dict[str, Any]) -> list[str]:
    shards = r.get("shards")  # runs before the sharded projector have none
    if not shards:
        return []
    one = next((x["events_per_s"] for x in shards if x["replicas"] == 1), None)

    def rate(x: dict[str, Any]) -> str:
        return f"{x['events_per_s']:,.0f}" if x["events_per_s"] is not None else "applied before the group was stable"

    def ratio(x: dict[str, Any]) -> str:
        return f"{x['events_per_s'] / one:.2f}x" if one and x["events_per_s"] is not None else ""

    return [
        "### Projector replicas",
        "",
        "The same log applied again into a fresh schema by 1, 2 and 4 projector processes that split its",
        "partitions in one consumer group (`VOXLOG_PROJECTOR_GROUP`). None applies a record before the group is",
        "stable with every replica (the bench holds their offsets table locked until then), and the whole log is",
        "timed from that moment to the last stored offset.",
        *(
            [f"These figures come from a separate run ({r['shards_from']}), merged into this page's results."]
            if r.get("shards_from")
            else []
        ),
        "Every replica runs on this one machine, beside the broker and PostgreSQL: more replicas than cores",
        "measure the contention, not the sharding.",
        "",
        *_table(
            ["replicas", "events timed", "seconds", "events/s", "vs 1"],
            [[str(x["replicas"]), f"{x['events']:,}", f"{x['seconds']:.1f}", rate(x), ratio(x)] for x in shards],
        ),
        "",
    ]


def _warm_up(results: dict[str, Any]) -> list[str]:
    rates = results.get("warm_up", {}).get("jobs_per_s_by_batch", {})
    return [
        f"- Warm-up batches of {name} (jobs/s, in order): {', '.join(f'{r:.0f}' for r in batch)}."
        for name, batch in rates.items()
    ]


def _degraded(d: dict[str, Any] | None) -> list[str]:
    """Section (k), from ``python -m bench.degraded_throughput`` (its own run, merged into the results)."""
    if not d:
        return []
    full = d["settings"][0]
    rows = [
        [
            s["name"],
            f"{s['speed']:g}",
            str(s["sample_rate"]),
            f"{s['jobs_per_s']:.3f}",
            f"{s['jobs_per_s'] / full['jobs_per_s']:.2f}x",
            f"{s['speedup_median']:.2f}x ({s['speedup_range'][0]:.2f} to {s['speedup_range'][1]:.2f})",
            f"{s['audio_s_per_s']:.2f}",
            f"{s['audio_s_per_job']:.2f}",
            f"{s['cpu_ms_per_job']:.0f}",
            f"{s['kib_per_job']:.0f}",
        ]
        for s in d["settings"]
    ]
    header = ["setting", "speed", "Hz", "jobs/s", "vs full", "per sentence", "audio s/s", "audio s/job"]
    return [
        "## (k) Degraded mode",
        "",
        "What degraded mode (`VOXLOG_DEGRADED_SPEED_FACTOR`, `VOXLOG_DEGRADED_SAMPLE_RATE`) buys, measured by",
        f"`python -m bench.degraded_throughput` on {d['date'][:10]} (commit `{d['commit']}`, a run of its own",
        f"beside this page's): {d['sentences']} sentences of `short.txt` through {d['engine']} (int8, CPU,",
        f"{d['threads']} threads, voice `{d['voice']}`), one job at a time, every sentence at every setting, the",
        "settings in turn. A job is the worker's part (segment, speak, encode the model's 24 kHz WAV) and the",
        "API's render at the request's rate; the orchestration around it (about 10 ms, scenario (b)) is left",
        "out. *Per sentence*: the sentence's full-quality time over its time at the setting, median (range).",
        f"Machine: {d['machine']}, onnxruntime {d['onnxruntime']}; {d['duration_s']:.0f} s in all.",
        "",
        *_table([*header, "CPU ms/job", "KiB/job"], rows),
        "",
        "Kokoro always synthesizes at 24 kHz, so a lower sample rate saves bytes (the delivered file), not",
        "synthesis time; a faster speed makes shorter audio, and the model's time follows the audio's length.",
        "Jobs per second is how fast the fleet drains a backlog in degraded mode; each job says the same words",
        "in less audio. The wall times are as noisy as the machine was busy (the per-sentence range shows it;",
        "a setting that does the same synthesis as full quality, 16 kHz alone, reads the noise); the CPU time",
        "per job is steadier. Against full quality:",
        "",
        *(
            f"- {s['name']}: {_less(s['cpu_ms_per_job'], full['cpu_ms_per_job'])} CPU per job,"
            f" {_less(s['audio_s_per_job'], full['audio_s_per_job'])} audio,"
            f" {_less(s['kib_per_job'], full['kib_per_job'])} data delivered."
            for s in d["settings"][1:]
        ),
    ]


def _less(value: float, full: float) -> str:
    change = 1 - value / full
    return f"{change:.0%} less" if change >= 0.005 else f"{-change:.0%} more" if change <= -0.005 else "as much"


def write_docs(results: dict[str, Any], docs: Path) -> list[Path]:
    s = results["scenarios"]
    plots = _plots(s, docs / "benchmarks")
    lines = [
        "# Benchmarks",
        "",
        "Generated by `voxlog bench` (`--quick` runs every scenario at a small size, as a smoke run) from",
        "the results it measured, kept beside this page in `benchmarks/results.json`. Do not edit by",
        "hand: rerun the command.",
        "",
        *_environment(results),
        "",
        "## Goals",
        "",
        "Issue 14's goals, issue 15's priorities figure, issue 27's scheduling goals and issue 41's GPU pace"
        " and duplicates, beside this run's figures (each scenario's section says how it is measured).",
        "",
        *goals(s, [*fairness_goals(s), *gpu_pace_goals(s), *zipf_goals(s)]),
        "",
        "## Summary",
        "",
        *_headline(s),
        "",
        METHOD,
        *_warm_up(results),
        "",
        "## (a) Orchestration throughput",
        "",
        "A zero-time engine and a backlog submitted by 32 concurrent clients: jobs per second from the first",
        "submission to the last job completed and visible.",
        "",
        *_throughput(s),
        "",
        "CPU time per job by component (user + system seconds from `/proc`, divided by the jobs of the run):",
        "where a job's cost goes when the machine is saturated.",
        "",
        *_cpu(s),
        "",
        "![throughput](benchmarks/throughput.png)",
        "",
        "## (b) Per-job overhead at light load",
        "",
        "One job at a time, zero-time engine, one worker.",
        "",
        *_light(s),
        "",
        "Where the time goes, step by step (medians). *recorded*: voxlog's API built `JobQueued`, the",
        "baseline inserted the row; *accepted*: the client had the answer; *produced*: the worker had the",
        "first segment's audio in the blob store; *visible*: the commit of the completed row. A negative",
        "step means the later event came first: the baseline's worker, woken by NOTIFY at the commit,",
        "can claim a job before the HTTP answer reaches the client.",
        "",
        *_timeline(s),
        "",
        "![latency](benchmarks/latency.png)",
        "",
        "## (c) Saturation with the real model",
        "",
        "A backlog of `paragraphs.txt` through one kokoro-onnx worker (2 threads), against the same engine",
        "called in a tight loop in the benchmark process with nothing else running, before and after",
        "everything else; the better of the two is the limit, and their gap is this machine's run-to-run",
        "noise. Each of the four waits first until the machine is idle (below 15% busy for a second).",
        "",
        *_saturation(s),
        "",
        "## (d) Coalescing",
        "",
        "All submissions at once (64 concurrent clients), texts shuffled; 100 ms engine, one worker.",
        "",
        *_coalescing(s),
        "",
        "## (e) Scale-out",
        "",
        "A 200 ms engine; the ideal is workers / 0.2 s. A worker takes the jobs of the partitions it owns.",
        "voxlog places a new text in the partition with the least work not finished (producers/placement.py);",
        "*by key* is voxlog with every job in its fingerprint's partition (`VOXLOG_JOB_PLACEMENT=key`), so a",
        "worker's share is the jobs that hash to its partitions. The baseline hands the next job to",
        "whichever worker asks.",
        "",
        *_scale(s),
        "",
        "## (f) Time to first audio",
        "",
        "The paragraph of (c)'s backlog with the most sentences (the first in the corpus of those; first",
        "audio is its first sentence), streamed as pcm on an idle system (voxlog: `POST /v1/audio/speech`",
        "with `stream_format=audio`; baseline: `POST /speech`). voxlog's API reads the job again when the",
        "projector's NOTIFY names it; the baseline's polls every 100 ms. *Engine time in",
        "the stream* is the worker's synthesis counter over the stream: the part of the whole stream the",
        "model itself took. *Default request*: what the official `openai` client sends (mp3, no",
        "`stream_format`), first and last byte.",
        "",
        *_first_audio(s),
        "",
        *_replay(s),
        "",
        "## (h) Head-of-line blocking",
        "",
        *head_of_line(s),
        "",
        "## (i) Batch submission",
        "",
        *batches(s),
        "",
        "## (j) Priorities",
        "",
        *priorities(s),
        *([""] if results.get("degraded") else []),
        *_degraded(results.get("degraded")),
        "",
        "## (l) Short behind long",
        "",
        *short_behind_long(s),
        "",
        "## (m) Tenants",
        "",
        *tenants(s),
        "",
        "## (n) GPU pace",
        "",
        *gpu_pace(s),
        "",
        "## (o) Duplicates under a Zipf load",
        "",
        *zipf_load(s),
        *([""] if results.get("gpu") else []),
        *gpu_section(results.get("gpu")),
    ]
    page = docs / "benchmarks.md"
    page.write_text("\n".join(lines))
    data = docs / "benchmarks" / "results.json"
    data.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return [page, *plots, data]
