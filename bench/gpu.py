"""The device check: how much audio one model on one device makes a second, one segment at a time and batched.

``python -m bench.gpu --device cuda:0`` (about 5 minutes on one H200 before the decoder's compilations, 8 at
most; ``--tiny --device cpu`` in seconds here)
needs neither Kafka nor PostgreSQL. It measures, on the Kokoro-82M architecture (a random checkpoint whose
duration head makes a phoneme last about 3.3 frames, as in speech, unless ``--model-dir`` names real weights)
and on real segments of the corpus cut by voxlog's own G2P and segmenter (``bench/gpu_segments.json``):

- the engine alone: ``KokoroTorchEngine``'s forward one segment at a time (what the worker calls today), and
  batched by length (``tts_node.kokoro_batch``) at several batch sizes, for sentence-length segments (the
  worker's requests) and document-length ones (240 to 350 ids), with TF32 matrix products off and on;
- a synthesis loop under a backlog (``bench.gpu_loop``): document parts and one-sentence requests mixed,
  batches formed between forwards, interactive requests first, each segment's audio written to a
  content-addressed blob directory; the interactive requests' first-segment latency under that backlog
  against an idle device;
- the device memory each batch size takes (peak allocated);
- the worker's own start-up measurement (``tts_node.batch_sizing``): the curve it reads and the forward
  sizes it chooses from it (segments, padded ids), and how long it took;
- the decoder eager, under ``torch.compile`` and from CUDA graphs (``tts_node.decoder_choice``, what
  ``VOXLOG_DECODER=auto`` measures at start-up), and where one is kept, the document parts and the loop
  again with it.

Figures go to ``--out`` (JSON) and to standard output as the rows of docs/benchmarks.md's GPU section.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SEGMENTS_FILE = Path(__file__).with_name("gpu_segments.json")
DOCS = Path(__file__).resolve().parents[1] / "docs"
DOCUMENT_IDS = (240, 350)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0", help="cpu or cuda:N (default cuda:0)")
    parser.add_argument("--tiny", action="store_true", help="a few small batches: checks the script, not the device")
    parser.add_argument("--model-dir", type=Path, help="real Kokoro weights (config.json, .pth, voices/)")
    parser.add_argument("--out", type=Path, help="write the figures here as JSON")
    parser.add_argument("--write-segments", action="store_true", help=f"cut {SEGMENTS_FILE.name} from the corpus")
    parser.add_argument(
        "--merge",
        type=Path,
        help="a device run's --out JSON: merged into docs/benchmarks/results.json (its GPU section) and the page "
        "rendered again, here, where the device run could not write the docs",
    )
    parser.add_argument("--commit", help="with --merge: the commit the device run measured, if it could not tell")
    parser.add_argument("--date", help="with --merge: when the device run was made, if it did not say")
    args = parser.parse_args(argv)
    if args.write_segments:
        write_segments(SEGMENTS_FILE)
        return 0
    if args.merge:
        merge(args.merge, commit=args.commit, date=args.date)
        return 0
    out: Path | None = args.out

    def save(figures: dict[str, Any]) -> None:
        if out is not None:
            out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")

    figures = run(args.device, tiny=args.tiny, model_dir=args.model_dir, save=save)
    print(json.dumps(figures, indent=2))
    return 0


def write_segments(path: Path) -> None:
    """Sentence segments of the corpus, and document-length ones made of a paragraph's sentences run together."""
    from tts_node.g2p import Phonemizer
    from tts_node.model_files import load_vocab
    from tts_node.segmenter import MAX_TOKENS
    from voxlog.corpus import corpus_dir

    corpus = corpus_dir()
    vocab = load_vocab()
    phonemizer = Phonemizer(vocab)
    space = vocab[" "]
    sentences: list[list[int]] = []
    documents: list[list[int]] = []
    prose: list[list[int]] = []
    for name in ("short.txt", "normalization.txt", "unicode.txt", "duplicates.txt", "paragraphs.txt"):
        for line in (corpus / name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            cut = [list(s.token_ids) for s in phonemizer.segment(line, "en-us", MAX_TOKENS) if s.token_ids]
            sentences.extend(cut)
            if name == "paragraphs.txt":
                prose.extend(cut)
    # The paragraphs read as one document, from each of its sentences in turn: parts of 240 to 350 ids.
    for first in range(len(prose)):
        documents.extend(_run_together(prose[first:] + prose[:first], space))
    documents = [list(d) for d in dict.fromkeys(tuple(d) for d in documents)]
    data = {"made_by": "python -m bench.gpu --write-segments", "sentences": sentences, "documents": documents}
    path.write_text(json.dumps(data, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{path}: {len(sentences)} sentence segments, {len(documents)} document segments")


def _run_together(sentences: list[list[int]], space: int) -> Iterator[list[int]]:
    low, high = DOCUMENT_IDS
    part: list[int] = []
    for ids in sentences:
        if part and len(part) + 1 + len(ids) > high:
            if len(part) >= low:
                yield part
            part = []
        part = [*part, space, *ids] if part else list(ids)
    if len(part) >= low:
        yield part


def merge(figures_path: Path, *, commit: str | None, date: str | None) -> None:
    """Merge a device run's figures into the page's results and render docs/benchmarks.md again."""
    from bench.report import write_docs

    figures = json.loads(figures_path.read_text(encoding="utf-8"))
    if figures.get("commit", "unknown") == "unknown" and commit:
        figures["commit"] = commit
    if "date" not in figures and date:
        figures["date"] = date
    if "date" not in figures or "commit" not in figures:
        raise SystemExit(f"{figures_path} does not say when or at which commit it was measured: --date, --commit")
    results_path = DOCS / "benchmarks" / "results.json"
    results = json.loads(results_path.read_text(encoding="utf-8"))
    results["gpu"] = figures
    results_path.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")
    for path in write_docs(results, DOCS):
        print(f"wrote {path}", file=sys.stderr)


def _commit() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=DOCS.parent, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"  # a device machine gets the working tree without its history
    return found.stdout.strip()


def run(
    device: str, *, tiny: bool, model_dir: Path | None, save: Callable[[dict[str, Any]], None] = lambda _: None
) -> dict[str, Any]:
    """Every figure, ``save``d after each part as well: a run stopped at a device session's limit keeps what it
    measured (the decoder's compilations, last, are the part most likely to be cut)."""
    import torch

    from bench.gpu_loop import backlog_loop
    from tts_node import load_engine
    from tts_node.random_checkpoint import write_random_checkpoint

    _kokoro_model_only()
    segments = json.loads(SEGMENTS_FILE.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        if model_dir is None:
            model_dir = write_random_checkpoint(Path(tmp) / "model", voices=("af_a", "am_b"), frames_per_phoneme=3.3)
        started = time.perf_counter()
        engine = load_engine("kokoro", model_dir=model_dir, device=device, threads=2)
        figures: dict[str, Any] = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": _commit(),
            "device": _device_name(torch, device),
            "torch": torch.__version__,
            "weights": "random (3.3 frames a phoneme)" if model_dir.is_relative_to(tmp) else str(model_dir),
            "load_s": round(time.perf_counter() - started, 1),
        }
        sizes = (1, 2) if tiny else (1, 8, 16, 32, 64, 128)
        doc_sizes = (2,) if tiny else (1, 16, 32, 48)
        seconds = 0.1 if tiny else 8.0
        sentences = [tuple(ids) for ids in segments["sentences"]]
        documents = [tuple(ids) for ids in segments["documents"]]
        if tiny:
            # As few forwards as check every part (about ten; the CI runs this beside the rest of the suite).
            sentences, documents = [s[:4] for s in sentences[:4]], [d[:8] for d in documents[:2]]
        figures["sentence_ids_p50"] = statistics.median(len(s) for s in sentences)
        figures["document_ids_p50"] = statistics.median(len(d) for d in documents)
        warm = not tiny
        figures["sentences"] = [_throughput(torch, engine, sentences, size, seconds, warm) for size in sizes]
        figures["documents"] = [_throughput(torch, engine, documents, size, seconds, warm) for size in doc_sizes]
        if device.startswith("cuda"):
            best = max(figures["sentences"], key=lambda row: row["audio_s_per_s"])["batch"]
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            figures["sentences_tf32"] = [_throughput(torch, engine, sentences, best, seconds, warm)]
            figures["documents_tf32"] = [_throughput(torch, engine, documents, max(doc_sizes), seconds, warm)]
            torch.backends.cuda.matmul.allow_tf32 = False
        save(figures)
        figures["sizing"] = _sizing(engine, tiny)
        batch = 2 if tiny else max(figures["sentences"], key=lambda row: row["audio_s_per_s"])["batch"]
        figures["loop"] = backlog_loop(
            engine, sentences, documents, max_batch=batch, tiny=tiny, blobs=Path(tmp) / "blobs", sync=_sync(torch)
        )
        save(figures)
        figures["decoders"] = _decoders(engine, tiny)
        save(figures)
        if figures["decoders"]["chosen"] != "eager":
            # What a worker with VOXLOG_DECODER=auto runs: the loop and the document parts again, compiled.
            figures["documents_decoder"] = [
                _throughput(torch, engine, documents, max(doc_sizes), seconds, warm),
            ]
            figures["loop_decoder"] = backlog_loop(
                engine, sentences, documents, max_batch=batch, tiny=tiny, blobs=Path(tmp) / "blobs2", sync=_sync(torch)
            )
            save(figures)
    return figures


def _sizing(engine: Any, tiny: bool) -> dict[str, Any]:
    """What a worker on this device measures at start-up and chooses (on a GPU, with ``VOXLOG_BATCH_SEGMENTS``
    and ``VOXLOG_BATCH_IDS`` at 0)."""
    from tts_node.batch_sizing import choose_limits, measurable, measure_curve

    model = measurable(engine)
    assert model is not None, "the torch engine tells its device"
    started = time.perf_counter()
    curve = measure_curve(model, batches=(1, 2), lengths=(4, 8), rounds=1) if tiny else measure_curve(model)
    took = time.perf_counter() - started
    limits = choose_limits(curve)
    return {
        "seconds": round(took, 1),
        "segments": limits.segments,
        "padded_ids": limits.padded_ids,
        "free_mib": None if curve.free_bytes is None else round(curve.free_bytes / 2**20),
        "stopped": curve.stopped,
        "points": [
            {
                "ids": p.ids,
                "batch": p.batch,
                "audio_s_per_s": round(p.audio_s_per_s, 3),
                "peak_mib": None if p.peak_bytes is None else round(p.peak_bytes / 2**20),
            }
            for p in curve.points
        ],
    }


def _decoders(engine: Any, tiny: bool) -> dict[str, Any]:
    """What a worker with ``VOXLOG_DECODER=auto`` measures at start-up (``tts_node.decoder_choice``): eager,
    ``torch.compile`` and CUDA graphs on the batches a worker forms, and the one it keeps (the engine is left
    running it). The tiny check measures eager alone: inductor's compilation takes minutes on 2 cores."""
    from tts_node.decoder_choice import SwitchableEngine, choose_decoder

    model = getattr(engine, "inner", engine)
    assert isinstance(model, SwitchableEngine), "the torch engine runs its decoder more than one way"
    started = time.perf_counter()
    choice = choose_decoder(model, (), shapes=((4, 1), (8, 2)), rounds=1) if tiny else choose_decoder(model)
    return {
        "seconds": round(time.perf_counter() - started, 1),
        "chosen": choice.mode,
        "trials": [
            {
                "mode": t.mode,
                "audio_s_per_s": round(t.audio_s_per_s, 3),
                "seconds": round(t.seconds, 1),
                "max_difference": t.max_difference if t.max_difference != float("inf") else None,
                "failure": t.failure,
            }
            for t in choice.trials
        ],
    }


def _kokoro_model_only() -> None:
    """Where ``kokoro`` cannot be imported for want of its G2P (its package imports misaki and spaCy; a device
    image may have neither), load its model modules alone: this check needs ``KModel`` and no G2P (its
    segments were cut beforehand, ``--write-segments``)."""
    import importlib.util
    import types

    try:
        import kokoro  # noqa: F401
    except ImportError as exc:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or spec.submodule_search_locations is None:
            raise
        print(f"kokoro's G2P is missing here ({exc}): loading its model modules alone", file=sys.stderr)
        package = types.ModuleType("kokoro")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["kokoro"] = package
        from kokoro.model import KModel

        package.KModel = KModel  # type: ignore[attr-defined]


def _throughput(
    torch: Any, engine: Any, pool: Sequence[tuple[int, ...]], size: int, seconds: float, warm: bool
) -> dict[str, Any]:
    """Audio seconds a second over batches of ``size`` segments of similar length, for about ``seconds``
    (after a warm-up batch of the shape, unless ``warm`` is false: the tiny check's figures mean nothing)."""
    from tts_node import Segment
    from tts_node.engine import SpeechRequest, speak_batch

    ordered = sorted(pool, key=len)
    voices = engine.info.voices

    def batch_at(n: int) -> list[SpeechRequest]:
        start = (n * size) % max(1, len(ordered) - size + 1)
        picked = [ordered[(start + k) % len(ordered)] for k in range(size)]
        # Another voice or speed each round: the same ids would draw the same seeded noise, which is fine,
        # but the batches should not be one repeated computation the device could cache.
        return [
            SpeechRequest(Segment(k, 0, 0, "", ids), voices[(n + k) % len(voices)], 1.0 + 0.01 * ((n + k) % 7))
            for k, ids in enumerate(picked)
        ]

    sync = _sync(torch)
    if warm:
        speak_batch(engine, batch_at(0))  # kernels and allocator for this shape
    _reset_peak(torch)
    sync()
    rounds, audio, spent, per_batch = 0, 0.0, 0.0, []
    while spent < seconds or rounds < 2:
        requests = batch_at(rounds + 1)
        started = time.perf_counter()
        speeches = speak_batch(engine, requests)
        sync()
        took = time.perf_counter() - started
        per_batch.append(took)
        spent += took
        audio += sum(s.audio.size for s in speeches) / engine.info.sample_rate
        rounds += 1
    return {
        "batch": size,
        "audio_s_per_s": round(audio / spent, 3),  # a tiny run on a loaded CPU makes well under 0.05
        "ms_per_batch_p50": round(1000 * statistics.median(per_batch), 1),
        "batches": rounds,
        "peak_mib": _peak_mib(torch),
    }


def _device_name(torch: Any, device: str) -> str:
    if device.startswith("cuda"):
        return str(torch.cuda.get_device_name(torch.device(device)))
    return f"cpu ({torch.get_num_threads()} threads)"


def _sync(torch: Any) -> Any:
    return torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)


def _reset_peak(torch: Any) -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def _peak_mib(torch: Any) -> float | None:
    return round(torch.cuda.max_memory_allocated() / 2**20) if torch.cuda.is_available() else None


if __name__ == "__main__":
    sys.exit(main())
