"""What degraded mode buys: jobs per second of the real model at the full and at the degraded settings.

Each setting (a speed, an output sample rate) synthesizes the same sentences of the corpus
(``short.txt``) with the real ``kokoro-onnx`` int8 model, one job at a time, doing what a job costs
the fleet: the worker's part (segment, ``speak`` each segment, encode the model's 24 kHz WAV it
stores) and the API's (resample and encode the whole at the request's rate, as ``GET
/v1/jobs/{id}/audio`` does). Per setting: jobs per wall second, seconds of audio per wall second,
CPU seconds per job (this process, every thread: less sensitive than wall time to what else runs
on the machine) and the bytes delivered per job. The settings take turns sentence by sentence, so
that the machine's drift over the run falls on all of them alike, and each sentence's full-quality time
over its time at a setting (the sentence's length cancels) gives the speed-up's spread.

The orchestration around a job (the log, the projection, the HTTP answer) is left out: about 10 ms a
job (scenario (b) of docs/benchmarks.md), against some hundreds of ms of synthesis.

``--results FILE`` merges the figures into a ``voxlog bench`` results JSON under ``degraded``;
``--docs DIR`` then renders that results file into ``DIR/benchmarks.md`` (section (k)), as
``voxlog bench --render`` does. A few minutes on 2 cores, no network.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np

from bench.environment import _commit, _cpu_model
from bench.normalization_wer import pick_voice, read_sentences
from bench.report import write_docs
from foundation.audio import encode_wav
from foundation.audio_formats import encode
from tts_node import Engine, load_engine
from voxlog.corpus import corpus_dir

ROOT: Final = Path(__file__).resolve().parent.parent
LANG: Final = "en-us"


@dataclass(frozen=True)
class Setting:
    name: str
    speed: float
    sample_rate: int


SETTINGS: Final = (
    Setting("full quality", 1.0, 24000),
    Setting("16 kHz alone", 1.0, 16000),
    Setting("x1.15 and 16 kHz (the defaults)", 1.15, 16000),
    Setting("x1.3 and 16 kHz", 1.3, 16000),
)


@dataclass(frozen=True)
class Job:
    wall_s: float
    cpu_s: float
    engine_s: float
    audio_s: float
    delivered_bytes: int


def one_job(engine: Engine, text: str, voice: str, setting: Setting) -> Job:
    """A job's work, timed: the worker's part and the API's render at the request's rate."""
    native = engine.info.sample_rate
    wall, cpu = time.perf_counter(), time.process_time()
    engine_s, parts = 0.0, []
    for segment in engine.segment(text, LANG):
        began = time.perf_counter()
        samples = np.asarray(engine.speak(segment, voice, setting.speed).audio, dtype=np.float32)
        engine_s += time.perf_counter() - began
        encode_wav(samples, native)  # the segment's blob, as the worker stores it
        parts.append(samples)
    whole = np.concatenate(parts)
    delivered = encode(whole, native, "wav", setting.sample_rate)  # the API's render at the request's rate
    return Job(time.perf_counter() - wall, time.process_time() - cpu, engine_s, len(whole) / native, len(delivered))


def measure(engine: Engine, texts: Sequence[str], voice: str, say: Callable[[str], None]) -> dict[str, list[Job]]:
    """Every sentence at every setting, the settings in turn sentence by sentence (each takes each place), so
    that the machine's drift over the run falls on all of them alike."""
    for setting in SETTINGS:  # warm every setting once (onnxruntime's first runs of a shape are slower)
        one_job(engine, texts[0], voice, setting)
    jobs: dict[str, list[Job]] = {s.name: [] for s in SETTINGS}
    for i, text in enumerate(texts):
        for setting in SETTINGS[i % len(SETTINGS) :] + SETTINGS[: i % len(SETTINGS)]:
            jobs[setting.name].append(one_job(engine, text, voice, setting))
        say(f"sentence {i + 1}/{len(texts)}: " + ", ".join(f"{n} {j[-1].wall_s:.2f} s" for n, j in jobs.items()))
    return jobs


def summarize(jobs: dict[str, list[Job]]) -> list[dict[str, Any]]:
    full = jobs[SETTINGS[0].name]
    rows = []
    for setting in SETTINGS:
        done = jobs[setting.name]
        wall = sum(j.wall_s for j in done)
        # Paired by sentence: the full-quality job's time over this setting's (the sentence's length cancels).
        gains = [f.wall_s / j.wall_s for f, j in zip(full, done, strict=True)]
        rows.append(
            {
                **asdict(setting),
                "jobs": len(done),
                "jobs_per_s": len(done) / wall,
                "audio_s_per_s": sum(j.audio_s for j in done) / wall,
                "cpu_ms_per_job": 1000 * sum(j.cpu_s for j in done) / len(done),
                "engine_ms_per_job": 1000 * sum(j.engine_s for j in done) / len(done),
                "audio_s_per_job": sum(j.audio_s for j in done) / len(done),
                "kib_per_job": sum(j.delivered_bytes for j in done) / 1024 / len(done),
                "speedup_median": statistics.median(gains),
                "speedup_range": [min(gains), max(gains)],
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.degraded_throughput", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=10, help="how many sentences of short.txt")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    parser.add_argument("--results", type=Path, default=None, help="merge the figures into this results JSON")
    parser.add_argument("--docs", type=Path, default=None, help="then render that results JSON into this folder")
    args = parser.parse_args(argv)
    if args.docs is not None and args.results is None:
        parser.error("--docs renders the results file: give --results too")
    began = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - began:6.1f}s] {message}", file=sys.stderr, flush=True)

    texts = read_sentences(corpus_dir() / "short.txt")[: args.sentences]
    say("loading kokoro-onnx")
    engine = load_engine("kokoro-onnx", threads=args.threads)
    voice = pick_voice(engine.info.voices)
    rows = summarize(measure(engine, texts, voice, say))
    for row in rows:
        print(
            f"{row['name']:<34} {row['jobs_per_s']:6.2f} jobs/s {row['audio_s_per_s']:6.2f} audio s/s"
            f" {row['cpu_ms_per_job']:7.0f} ms CPU/job {row['kib_per_job']:6.1f} KiB/job"
        )
    figures = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(ROOT),
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores, {platform.platform()}",
        "onnxruntime": metadata.version("onnxruntime"),
        "engine": f"{engine.info.name} {engine.info.model_version}",
        "voice": voice,
        "threads": args.threads,
        "sentences": len(texts),
        "duration_s": round(time.monotonic() - began, 1),
        "settings": rows,
    }
    if args.results is not None:
        results = json.loads(args.results.read_text()) if args.results.exists() else {}
        results["degraded"] = figures
        args.results.write_text(json.dumps(results, indent=2, default=str) + "\n")
        say(f"merged into {args.results}")
        if args.docs is not None:
            for path in write_docs(results, args.docs):
                say(f"wrote {path}")
    say(f"done in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
