"""The GPU section of docs/benchmarks.md, from ``python -m bench.gpu``'s figures (a device run of its own,
merged into the page's results as ``gpu``). Every number printed comes from those figures."""

from __future__ import annotations

from typing import Any

from bench.report_goals import _table

# Issue 37's goals for one H200 (the suite never asserts timings).
LOOP_GOAL = 700.0  # audio s/s, the synthesis loop on a mix of one-sentence requests and document parts
DOCUMENT_GOAL = 850.0  # audio s/s, document parts alone
INTERACTIVE_GOAL = 2.0  # first segment under a full backlog, times the idle device's


def gpu_section(g: dict[str, Any] | None) -> list[str]:
    if not g:
        return []
    loop = g["loop"]
    # The goals count what a worker runs: with VOXLOG_DECODER=auto, the decoder it keeps where one was kept.
    best_loop = g.get("loop_decoder") or loop
    documents = g["documents"] + g.get("documents_tf32", []) + g.get("documents_decoder", [])
    docs_best = max(documents, key=lambda row: row["audio_s_per_s"])
    slowdown = best_loop["interactive_first_ms_p50"] / best_loop["interactive_idle_ms_p50"]
    return [
        "## GPU: one model, batched forwards",
        "",
        f"Measured by `python -m bench.gpu` on {g['date'][:10]} (commit `{g['commit']}`, a run of its own beside",
        f"this page's) on one {g['device']} with torch {g['torch']}; no Kafka or PostgreSQL there. Weights:",
        f"{g['weights']}, the Kokoro-82M architecture (the same compute per second of audio as the real",
        "weights, which cannot be fetched here). Segments: the corpus cut by voxlog's own G2P and segmenter",
        f"(`bench/gpu_segments.json`): sentences (median {g['sentence_ids_p50']:g} ids), and document parts of",
        f"240 to 350 ids (median {g['document_ids_p50']:g}). *Batch 1* is the engine's call one segment at a",
        "time; larger batches are one forward of `tts_node.kokoro_batch` over consecutive segments in order of",
        "length, each item equal to the segment alone: the larger the batch, the wider the lengths it spans",
        "(the file has a few dozen sentences, so 64 and 128 span all of them) and the more of it is padding,",
        "where the loop below takes a length bucket. *Peak* is the device memory the batch size took.",
        "",
        "Sentence-length segments (what one-sentence requests are):",
        "",
        *_rows(g["sentences"] + [{**r, "batch": f"{r['batch']} (TF32)"} for r in g.get("sentences_tf32", [])]),
        "",
        "Document parts:",
        "",
        *_rows(g["documents"] + [{**r, "batch": f"{r['batch']} (TF32)"} for r in g.get("documents_tf32", [])]),
        "",
        f"The synthesis loop (`bench/gpu_loop.py`): {loop['claims']} claims held ({loop['segments']} segments:",
        "document jobs of 8 parts among one-sentence requests), batches of up to",
        f"{loop['max_batch']} formed between forwards, interactive requests arriving every 0.25 s taken into",
        "the next forward, each segment's audio written to a content-addressed directory while the next",
        "forward runs. It stands in for the worker's scheduler (`consumers.engine_turns`), without its log or",
        "database.",
        "",
        *_table(
            [
                "decoder",
                "audio s/s",
                "wall s",
                "forwards",
                "batch p50",
                "padding",
                "interactive first segment p50 / max",
            ],
            [
                _loop_row("eager", loop),
                *([_loop_row(g["decoders"]["chosen"], g["loop_decoder"])] if g.get("loop_decoder") else []),
            ],
        ),
        *_sizing(g.get("sizing")),
        *_decoders(g.get("decoders"), g.get("documents_decoder")),
        "",
        "Against issue 37's goals for one H200:",
        "",
        *_table(
            ["goal", "measured", "met"],
            [
                _goal(
                    "the loop, sentences and document parts mixed",
                    f"≥ {LOOP_GOAL:.0f} audio s/s",
                    best_loop["audio_s_per_s"],
                    best_loop["audio_s_per_s"] >= LOOP_GOAL,
                ),
                _goal(
                    "document parts alone (best batch)",
                    f"≥ {DOCUMENT_GOAL:.0f} audio s/s",
                    docs_best["audio_s_per_s"],
                    docs_best["audio_s_per_s"] >= DOCUMENT_GOAL,
                ),
                [
                    f"interactive first segment under the backlog ≤ {INTERACTIVE_GOAL:g}x idle",
                    f"{slowdown:.1f}x",
                    "yes" if slowdown <= INTERACTIVE_GOAL else "no",
                ],
            ],
        ),
    ]


def _sizing(sizing: dict[str, Any] | None) -> list[str]:
    """The worker's own start-up measurement (``tts_node.batch_sizing``), where the run made it."""
    if not sizing:
        return []
    bound = f"{sizing['padded_ids']:,} padded ids" if sizing["padded_ids"] else "no bound on padded ids"
    return [
        "",
        "A worker on this device measures its forward sizes at start-up (`tts_node.batch_sizing`): here in",
        f"{sizing['seconds']:g} s it chose {sizing['segments']} segments a forward and {bound} (the knee of each",
        "curve: the smallest batch within 5% of the best; padded ids are a forward's segments times its longest).",
        *([f"It stopped early: {sizing['stopped']}."] if sizing["stopped"] else []),
        "",
        *_table(
            ["ids a segment", "batch", "audio s/s", "peak MiB"],
            [
                [
                    str(p["ids"]),
                    str(p["batch"]),
                    f"{p['audio_s_per_s']:.0f}",
                    "" if p["peak_mib"] is None else f"{p['peak_mib']:,}",
                ]
                for p in sizing["points"]
            ],
        ),
    ]


def _loop_row(decoder: str, loop: dict[str, Any]) -> list[str]:
    return [
        decoder,
        f"{loop['audio_s_per_s']:.0f}",
        f"{loop['wall_s']:.1f}",
        str(loop["forwards"]),
        f"{loop['batch_p50']:g}",
        f"{loop['padding_share']:.0%}",
        f"{loop['interactive_first_ms_p50']:.0f} / {loop['interactive_first_ms_max']:.0f} ms"
        f" (idle device {loop['interactive_idle_ms_p50']:.0f} / {loop['interactive_idle_ms_max']:.0f})",
    ]


def _decoders(decoders: dict[str, Any] | None, documents: list[dict[str, Any]] | None) -> list[str]:
    """The decoder measured each way (``tts_node.decoder_choice``), where the run measured it."""
    if not decoders:
        return [
            "",
            "This run did not measure the decoder's compiled ways (`VOXLOG_DECODER`: `torch.compile`, CUDA",
            "graphs; it predates them): the figures here are the eager decoder's.",
        ]
    return [
        "",
        "The decoder eager, under `torch.compile` and from CUDA graphs over bucketed frames",
        "(`tts_node.kokoro_compile`), as a worker with `VOXLOG_DECODER=auto` measures it at start-up: 16",
        "sentence-length segments a forward and 4 document parts, the first forward of each shape untimed (its",
        "compilation), *audio s/s* the two shapes' harmonic mean, *seconds* the whole trial with its compilations.",
        f"Kept: **{decoders['chosen']}** (a compiled decoder is kept where it makes 5% more and the same audio).",
        "",
        *_table(
            ["decoder", "audio s/s", "seconds", "largest sample difference from eager", "not kept because"],
            [
                [
                    t["mode"],
                    f"{t['audio_s_per_s']:.1f}",
                    f"{t['seconds']:g}",
                    "" if t["max_difference"] is None else f"{t['max_difference']:.1g}",
                    t["failure"],
                ]
                for t in decoders["trials"]
            ],
        ),
        *(["", f"Document parts with it: {_rows_inline(documents)}."] if documents else []),
    ]


def _rows_inline(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"batch {r['batch']}: {r['audio_s_per_s']:.0f} audio s/s" for r in rows)


def _goal(name: str, goal: str, value: float, met: bool) -> list[str]:
    return [f"{name} {goal}", f"{value:.0f}", "yes" if met else "no"]


def _rows(rows: list[dict[str, Any]]) -> list[str]:
    return _table(
        ["batch", "audio s/s", "ms a forward (p50)", "forwards", "peak MiB"],
        [
            [
                str(r["batch"]),
                f"{r['audio_s_per_s']:.0f}",
                f"{r['ms_per_batch_p50']:.0f}",
                str(r["batches"]),
                "" if r["peak_mib"] is None else f"{r['peak_mib']:,}",
            ]
            for r in rows
        ],
    )
