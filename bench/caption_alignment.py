"""Do the captions say a word when it is heard? A forced aligner listens to a long real-model document.

The corpus's paragraphs (``tests/corpus/paragraphs.txt``, or the shared copy), repeated in rotating order
to about ``--minutes`` of speech, are each planned and rendered as a document's part is: by the real
Kokoro engine (``kokoro-onnx``) through the worker's engine adapter, so each segment's words are the ones
a ``SegmentProduced`` would carry. The parts are stitched as ``GET /v1/documents/{id}/audio`` stitches
them (a paragraph's pause after each) and captioned by the API's own timeline
(:func:`producers.captions.timeline`). pocketsphinx (its bundled US English model) then force-aligns
the caption text to the audio in windows of about 20 s, each cut at the quietest 10 ms near its
boundary in the audio itself, never at a caption time, so captions that drifted would put words in the
wrong window and show it. Each word's offset is its caption start minus the aligner's start.

Prints the median and 95th percentile of the offsets, and their median in the first and last two
minutes (drift); ``--out FILE`` writes them as markdown. Needs the ``asr`` extra.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from contracts.pauses import PAUSE_MS
from contracts.word_timings import words_json
from foundation.audio import encode_wav
from foundation.audio_formats import resample
from producers.captions import Part, Word, timeline
from projections.reads.rows import StoredSegment
from tts_node import load_engine
from voxlog.engine_adapter import TtsNodeSpeechEngine

ASR_RATE: Final = 16000
WINDOW_S: Final = 20.0
SEARCH_S: Final = 1.5
WORDS_PER_MINUTE: Final = 150
CORPORA: Final = (
    Path(__file__).resolve().parents[1] / "tests" / "corpus" / "paragraphs.txt",
    Path("/work/shared/corpus/paragraphs.txt"),
)


@dataclass(frozen=True)
class Offset:
    word: str
    at_s: float  # where the aligner heard it start
    offset_ms: float  # the caption's start minus the aligner's


def document_text(minutes: float) -> list[str]:
    corpus = next((p for p in CORPORA if p.is_file()), None)
    if corpus is None:
        raise SystemExit("no paragraphs.txt corpus found")
    paragraphs = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: list[str] = []
    words, turn = 0, 0
    while words < minutes * WORDS_PER_MINUTE:
        rotated = paragraphs[turn % len(paragraphs) :] + paragraphs[: turn % len(paragraphs)]
        for paragraph in rotated:
            out.append(paragraph)
            words += len(paragraph.split())
        turn += 1
    return out


def render(paragraphs: list[str], voice: str) -> tuple[npt.NDArray[np.float32], list[Word], float]:
    """The stitched audio, its captions and the seconds spent synthesizing."""
    engine = TtsNodeSpeechEngine(load_engine("kokoro-onnx", threads=2))
    rate = engine.description.sample_rate
    parts: list[Part] = []
    audio: list[npt.NDArray[np.float32]] = []
    started = time.perf_counter()
    for paragraph in paragraphs:
        segments = []
        for planned in engine.plan(paragraph, "en-us"):
            rendered = engine.render(planned, voice, 1.0)
            samples = rendered.samples
            segments.append(
                StoredSegment(
                    segment_index=planned.index,
                    audio_sha256="0" * 64,
                    audio_uri="mem://",
                    span_start=planned.start,
                    duration_ms=round(1000 * samples.size / rate),
                    span_text=planned.text,
                    sample_rate=rate,
                    byte_length=len(encode_wav(samples, rate)),
                    words=words_json(rendered.words),
                )
            )
            audio.append(samples)
        audio.append(np.zeros(round(rate * PAUSE_MS["p"] / 1000), dtype=np.float32))
        parts.append((segments, "p"))
    spent = time.perf_counter() - started
    words, _ = timeline(parts)
    return np.concatenate(audio), words, spent


def _cuts(samples: npt.NDArray[np.float32], rate: int) -> list[int]:
    """Window boundaries: the quietest 10 ms within ``SEARCH_S`` of every ``WINDOW_S``."""
    frame = rate // 100
    energy = np.square(samples[: samples.size // frame * frame].reshape(-1, frame)).mean(axis=1)
    cuts, at = [0], WINDOW_S
    while at * 100 < energy.size - SEARCH_S * 100:
        lo, hi = int((at - SEARCH_S) * 100), int((at + SEARCH_S) * 100)
        cuts.append((lo + int(np.argmin(energy[lo:hi]))) * frame)
        at = cuts[-1] / rate + WINDOW_S
    return [*cuts, samples.size]


def _dictionary_form(text: str) -> list[str]:
    return [w for w in re.split(r"[^a-z']+", text.lower().replace("-", " ")) if w.strip("'")]


def align(samples: npt.NDArray[np.float32], rate: int, words: list[Word]) -> tuple[list[Offset], int, int]:
    """Each word's offset, and how many windows were aligned and skipped (a word the dictionary lacks)."""
    from pocketsphinx import Decoder

    decoder: Any = Decoder(samprate=ASR_RATE, loglevel="FATAL")
    offsets: list[Offset] = []
    aligned = skipped = 0
    cuts = _cuts(samples, rate)
    for lo, hi in itertools.pairwise(cuts):
        inside = [w for w in words if lo <= (w.start_ms + w.end_ms) / 2 * rate / 1000 < hi]
        spoken = [(w, _dictionary_form(w.text)) for w in inside]
        if not inside or any(len(forms) != 1 or decoder.lookup_word(forms[0]) is None for _, forms in spoken):
            skipped += 1
            continue
        pcm = (np.clip(resample(samples[lo:hi], rate, ASR_RATE), -1, 1) * 32767).astype("<i2").tobytes()
        decoder.set_align_text(" ".join(forms[0] for _, forms in spoken))
        decoder.start_utt()
        decoder.process_raw(pcm, full_utt=True)
        decoder.end_utt()
        found = decoder.seg() or []  # nothing when the window could not be aligned at all
        heard = [s for s in found if s.word not in ("<s>", "</s>", "<sil>") and not s.word.startswith("[")]
        if len(heard) != len(inside):
            skipped += 1
            continue
        aligned += 1
        for word, segment in zip(inside, heard, strict=True):
            at_s = lo / rate + segment.start_frame / 100
            offsets.append(Offset(word.text, at_s, word.start_ms - at_s * 1000))
    return offsets, aligned, skipped


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def report(offsets: list[Offset], minutes: float, aligned: int, skipped: int, spent: float) -> str:
    signed = [o.offset_ms for o in offsets]
    absolute = [abs(v) for v in signed]
    first = [o.offset_ms for o in offsets if o.at_s < 120]
    last = [o.offset_ms for o in offsets if o.at_s > minutes * 60 - 120]
    slope = float(np.polyfit([o.at_s / 60 for o in offsets], signed, 1)[0])
    return "\n".join(
        [
            f"- audio: {minutes:.1f} min of stitched document (kokoro-onnx, synthesized in {spent:.0f} s); "
            f"pocketsphinx {metadata.version('pocketsphinx')} forced alignment, {aligned} windows of about "
            f"{WINDOW_S:.0f} s aligned, {skipped} skipped (a word outside its dictionary, or a count mismatch)",
            f"- words compared: {len(offsets)}",
            f"- offset (caption start minus heard start): median {statistics.median(signed):+.0f} ms; "
            f"|offset| median {statistics.median(absolute):.0f} ms, p95 {_p95(absolute):.0f} ms",
            f"- drift: median offset {statistics.median(first):+.0f} ms in the first two minutes, "
            f"{statistics.median(last):+.0f} ms in the last two; fitted slope {slope:+.2f} ms per minute",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--voice", default="jf_alpha")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as markdown")
    parser.add_argument("--keep", type=Path, default=None, help="the rendering's .npz: reused when it exists")
    args = parser.parse_args()
    if args.keep is not None and args.keep.is_file():
        with np.load(args.keep) as kept:
            samples, spent = kept["samples"], float(kept["spent"])
            words = [
                Word(str(t), int(a), int(b)) for t, a, b in zip(kept["text"], kept["start"], kept["end"], strict=True)
            ]
    else:
        samples, words, spent = render(document_text(args.minutes), args.voice)
    if args.keep is not None and not args.keep.is_file():
        np.savez(
            args.keep, samples=samples, spent=spent, text=np.array([w.text for w in words]),
            start=np.array([w.start_ms for w in words]), end=np.array([w.end_ms for w in words]),
        )  # fmt: skip
    offsets, aligned, skipped = align(samples, 24_000, words)
    text = report(offsets, samples.size / 24_000 / 60, aligned, skipped, spent)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
