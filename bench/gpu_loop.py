"""The device check's synthesis loop: one model, one forward at a time, batches formed between forwards.

A backlog of held claims (document parts and one-sentence requests) and interactive requests arriving on a
clock while it drains. Before each forward the loop picks the next segments: every waiting interactive
request's first, then the next segment of held claims in turn (several of one long job when there is room),
from the length bucket that fills the batch best, so padding stays bounded. Each segment's audio is written
to a content-addressed blob directory on a thread while the next forward runs, as a worker stores it.

This loop stands in for the worker's scheduler in the device check; its figures are the device's with a
batch policy of this shape, not the whole worker's (no log, no database).
"""

from __future__ import annotations

import hashlib
import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass
class Claim:
    name: str
    segments: list[tuple[int, ...]]
    interactive: bool = False
    arrives: float = 0.0
    done: int = 0
    first_done: float | None = None
    taken: int = field(default=0)  # segments handed to the forward in flight or done


def backlog_loop(
    engine: Any,
    sentences: Sequence[tuple[int, ...]],
    documents: Sequence[tuple[int, ...]],
    *,
    max_batch: int,
    tiny: bool,
    blobs: Path,
    sync: Callable[[], None],
) -> dict[str, Any]:
    """Audio seconds a second of the loop over a mixed backlog, and interactive first-segment latency."""
    blobs.mkdir(parents=True, exist_ok=True)
    docs, parts, singles, interactive = (1, 2, 3, 1) if tiny else (24, 8, 1500, 20)
    backlog = [
        Claim(f"doc{d}", [documents[(d * parts + p) % len(documents)] for p in range(parts)]) for d in range(docs)
    ]
    backlog += [Claim(f"one{i}", [sentences[i % len(sentences)]]) for i in range(singles)]
    # Interleaved as a queue fills: document jobs spread among the requests.
    backlog.sort(key=lambda c: hash(c.name) % 997)
    asks = [sentences[(7 * i) % len(sentences)] for i in range(interactive)]
    idle = _idle_latencies(engine, asks, max_batch, blobs, sync)
    loaded = _run(engine, backlog, asks, max_batch, blobs, sync, spacing=0.05 if tiny else 0.25)
    return {
        "max_batch": max_batch,
        "claims": len(backlog),
        "segments": sum(len(c.segments) for c in backlog),
        **loaded,
        "interactive_idle_ms_p50": idle["p50"],
        "interactive_idle_ms_max": idle["max"],
    }


def _idle_latencies(
    engine: Any, asks: Sequence[tuple[int, ...]], max_batch: int, blobs: Path, sync: Callable[[], None]
) -> dict[str, float]:
    latencies = []
    for ids in asks:  # one at a time on an idle device
        result = _run(engine, [], [ids], max_batch, blobs, sync, spacing=0.0)
        latencies.append(result["interactive_first_ms_p50"])
    return {"p50": round(statistics.median(latencies), 1), "max": round(max(latencies), 1)}


def _run(
    engine: Any,
    backlog: list[Claim],
    asks: Sequence[tuple[int, ...]],
    max_batch: int,
    blobs: Path,
    sync: Callable[[], None],
    *,
    spacing: float,
) -> dict[str, Any]:
    from tts_node import Segment
    from tts_node.engine import SpeechRequest, speak_batch

    voices = engine.info.voices
    rate = engine.info.sample_rate
    held = deque(Claim(c.name, list(c.segments)) for c in backlog)
    start = time.perf_counter()
    arriving = deque(Claim(f"ask{i}", [ids], True, start + i * spacing) for i, ids in enumerate(asks))
    asked: list[Claim] = []
    audio = 0.0
    forwards, sizes, padding = 0, [], []
    writes: list[Future[None]] = []
    with ThreadPoolExecutor(2) as writer:
        while held or arriving or any(c.taken < len(c.segments) for c in asked):
            now = time.perf_counter()
            while arriving and arriving[0].arrives <= now:
                asked.append(arriving.popleft())
            picked = _pick(asked, held, max_batch)
            if not picked:
                time.sleep(max(0.0, arriving[0].arrives - now))  # an idle device waits for the next request
                continue
            requests = [
                SpeechRequest(Segment(n, 0, 0, "", ids), voices[n % len(voices)], 1.0)
                for n, (_, ids) in enumerate(picked)
            ]
            speeches = speak_batch(engine, requests)
            sync()
            finished = time.perf_counter()
            forwards += 1
            sizes.append(len(picked))
            longest = max(len(ids) for _, ids in picked)
            padding.append(1 - sum(len(ids) for _, ids in picked) / (longest * len(picked)))
            for (claim, _), speech in zip(picked, speeches, strict=True):
                claim.done += 1
                if claim.first_done is None:
                    claim.first_done = finished
                audio += speech.audio.size / rate
                writes.append(writer.submit(_store, blobs, speech.audio))
            held = deque(c for c in held if c.taken < len(c.segments))
        for write in writes:
            write.result()
    wall = time.perf_counter() - start
    firsts = [1000 * (c.first_done - c.arrives) for c in asked if c.first_done is not None]
    return {
        "audio_s_per_s": round(audio / wall, 1),
        "wall_s": round(wall, 2),
        "forwards": forwards,
        "batch_p50": statistics.median(sizes) if sizes else 0,
        "padding_share": round(statistics.mean(padding), 3) if padding else 0.0,
        "interactive_first_ms_p50": round(statistics.median(firsts), 1) if firsts else math.nan,
        "interactive_first_ms_max": round(max(firsts), 1) if firsts else math.nan,
    }


def _pick(asked: list[Claim], held: deque[Claim], max_batch: int) -> list[tuple[Claim, tuple[int, ...]]]:
    """The next batch: interactive segments first (in arrival order), then held claims' next segments from the
    length bucket that fills the batch best; a claim gives several segments when the batch has room."""
    picked: list[tuple[Claim, tuple[int, ...]]] = []
    for claim in asked:
        while claim.taken < len(claim.segments) and len(picked) < max_batch:
            picked.append((claim, claim.segments[claim.taken]))
            claim.taken += 1
    room = max_batch - len(picked)
    if room <= 0 or not held:
        return picked
    candidates = [
        (claim, i) for claim in held for i in range(claim.taken, min(len(claim.segments), claim.taken + room))
    ]
    buckets: dict[int, list[tuple[Claim, int]]] = {}
    for claim, i in candidates:
        buckets.setdefault(_bucket(len(claim.segments[i])), []).append((claim, i))
    if picked:
        wanted = _bucket(max(len(ids) for _, ids in picked))
        chosen = buckets.get(wanted) or max(buckets.values(), key=len)
    else:
        chosen = max(buckets.values(), key=len)
    for claim, i in chosen[:room]:
        if i == claim.taken:  # in order within a claim: a later segment only after its predecessor
            picked.append((claim, claim.segments[i]))
            claim.taken += 1
    return picked


def _bucket(ids: int) -> int:
    """Length buckets a factor of about 1.4 wide: padding within a bucket stays under about 30%."""
    return int(math.log(max(ids, 1), 1.4))


def _store(directory: Path, audio: np.ndarray) -> None:
    data = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    digest = hashlib.sha256(data).hexdigest()
    target = directory / digest[:2] / digest
    target.parent.mkdir(exist_ok=True)
    if not target.exists():
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(target)
