"""Does text normalization make Kokoro's numbers, dates and money easier to understand? A speech recognizer listens.

Each sentence of a held set (``bench/corpus/normalization_held.txt``: numbers, dates, money, units,
times, abbreviations; not the unit tests' corpus) is synthesized twice by the real Kokoro engine
(``kokoro-onnx``), with the request's normalization on and off, and recognized offline by
pocketsphinx (its bundled US English acoustic model, language model and dictionary). Each
hypothesis is scored by word error rate against what a listener should hear: the sentence's spoken
form (``tts_node.normalization.normalize``), lower-cased, without punctuation, hyphenated words split.

Prints the per-sentence figures and the means; ``--out FILE`` writes them as a markdown section.
Needs the ``asr`` extra (``pip install -e '.[asr]'``); a few minutes on 2 cores, no network.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from foundation.audio_formats import resample
from tts_node import Engine, load_engine
from tts_node.normalization import normalize

HELD: Final = Path(__file__).resolve().parent / "corpus" / "normalization_held.txt"
LANG: Final = "en-us"
ASR_RATE: Final = 16000  # pocketsphinx's en-us acoustic model is trained on 16 kHz speech
PAD_S: Final = 0.3  # silence around each utterance: the recognizer's voice detection wants a lead-in
PREFERRED_VOICE: Final = "af_heart"
_NOT_A_WORD: Final = re.compile(r"[^a-z0-9']+")


def spoken_words(text: str) -> list[str]:
    """``text`` as a list of words to compare: lower-cased, every character but letters, digits and
    apostrophes a word break (so hyphenated words split, "a.m." is "a m"), apostrophes kept only
    inside a word ("o'clock", not "'80s" or "dogs'")."""
    words = (word.strip("'") for word in _NOT_A_WORD.split(text.lower()))
    return [word for word in words if word]


def reference_words(sentence: str, lang: str = LANG) -> list[str]:
    """What a listener should hear of ``sentence``: its normalized spoken form, as words."""
    return spoken_words(normalize(sentence, lang))


def edit_distance(reference: Sequence[str], hypothesis: Sequence[str]) -> int:
    """Word-level Levenshtein distance: the fewest substitutions, deletions and insertions that turn
    ``reference`` into ``hypothesis``."""
    previous = list(range(len(hypothesis) + 1))
    for i, ref_word in enumerate(reference, start=1):
        current = [i]
        for j, hyp_word in enumerate(hypothesis, start=1):
            current.append(
                min(
                    previous[j] + 1,  # a reference word deleted
                    current[j - 1] + 1,  # a hypothesis word inserted
                    previous[j - 1] + (ref_word != hyp_word),  # substituted, or a match
                )
            )
        previous = current
    return previous[-1]


def word_error_rate(reference: Sequence[str], hypothesis: Sequence[str]) -> float:
    """Edit distance over the reference's length; over 1 when the hypothesis inserts enough words."""
    if not reference:
        raise ValueError("word error rate needs a reference with at least one word")
    return edit_distance(reference, hypothesis) / len(reference)


def to_pcm16(samples: npt.NDArray[np.float32], rate: int, *, pad_s: float = PAD_S) -> bytes:
    """Mono float ``samples`` at ``rate`` as 16 kHz signed 16-bit little-endian PCM, with ``pad_s``
    of silence either side (soxr resampling, the project's own; clipped to [-1, 1] first)."""
    audio = resample(np.clip(samples, -1.0, 1.0).astype(np.float32), rate, ASR_RATE)
    pad = np.zeros(round(pad_s * ASR_RATE), dtype=np.float32)
    audio = np.concatenate([pad, audio, pad])
    return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


class Recognizer:
    """pocketsphinx with its bundled US English model; one decoder, each utterance normalized on its own."""

    def __init__(self) -> None:
        try:
            from pocketsphinx import Decoder
        except ImportError as exc:  # the optional extra is not installed
            raise SystemExit("bench.normalization_wer needs pocketsphinx: pip install -e '.[asr]'") from exc
        self._decoder: Any = Decoder(samprate=ASR_RATE, loglevel="FATAL")
        config = self._decoder.config
        version = metadata.version("pocketsphinx")
        self.description = (
            f"pocketsphinx {version}, default en-us model "
            f"({Path(config['hmm']).name} acoustic model, {Path(config['lm']).name}, {Path(config['dict']).name})"
        )

    def __call__(self, pcm: bytes) -> str:
        """The best hypothesis for one whole utterance of 16 kHz 16-bit PCM ("" when it heard nothing)."""
        self._decoder.start_utt()
        self._decoder.process_raw(pcm, full_utt=True)
        self._decoder.end_utt()
        hyp = self._decoder.hyp()
        return "" if hyp is None else str(hyp.hypstr)


@dataclass(frozen=True)
class Scored:
    """One sentence, heard twice: with the request's normalization on and off."""

    sentence: str
    reference: str
    heard_on: str
    heard_off: str
    wer_on: float
    wer_off: float


def pick_voice(voices: Sequence[str]) -> str:
    """af_heart where the engine has it, else its first voice."""
    if not voices:
        raise ValueError("the engine offers no voices")
    return PREFERRED_VOICE if PREFERRED_VOICE in voices else voices[0]


def speak(engine: Engine, sentence: str, voice: str, *, normalize: bool) -> npt.NDArray[np.float32]:
    """The whole of ``sentence`` as one array of samples at the engine's rate."""
    segments = engine.segment(sentence, LANG, normalize=normalize)
    return np.concatenate([engine.synthesize(segment, voice, 1.0) for segment in segments]).astype(np.float32)


def score(
    engine: Engine, recognize: Callable[[bytes], str], sentences: Sequence[str], voice: str, say: Callable[[str], None]
) -> list[Scored]:
    rate = engine.info.sample_rate
    results = []
    for number, sentence in enumerate(sentences, start=1):
        reference = reference_words(sentence)
        heard = {
            on: spoken_words(recognize(to_pcm16(speak(engine, sentence, voice, normalize=on), rate)))
            for on in (True, False)
        }
        scored = Scored(
            sentence=sentence,
            reference=" ".join(reference),
            heard_on=" ".join(heard[True]),
            heard_off=" ".join(heard[False]),
            wer_on=word_error_rate(reference, heard[True]),
            wer_off=word_error_rate(reference, heard[False]),
        )
        say(f"{number:2d}/{len(sentences)} on {scored.wer_on:5.2f} off {scored.wer_off:5.2f}  {sentence}")
        results.append(scored)
    return results


@dataclass(frozen=True)
class Summary:
    sentences: int
    mean_on: float
    mean_off: float
    better: int  # normalization on has the lower WER
    worse: int
    equal: int

    @classmethod
    def of(cls, results: Sequence[Scored]) -> Summary:
        if not results:
            raise ValueError("nothing to summarize")
        return cls(
            sentences=len(results),
            mean_on=statistics.fmean(r.wer_on for r in results),
            mean_off=statistics.fmean(r.wer_off for r in results),
            better=sum(r.wer_on < r.wer_off for r in results),
            worse=sum(r.wer_on > r.wer_off for r in results),
            equal=sum(r.wer_on == r.wer_off for r in results),
        )

    @property
    def sign_test_p(self) -> float:
        """Two-sided exact sign test of better against worse (ties left out): how likely a split at least
        this uneven is if normalization made no difference."""
        return sign_test_p(self.better, self.worse)


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact binomial (p = 1/2) probability of a split of ``wins + losses`` at least as uneven."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "(nothing)"


def markdown(
    summary: Summary, results: Sequence[Scored], *, tts: str, asr: str, date: str, command: str, caveat: str = ""
) -> str:
    """The measurement as a markdown section: the figures, what they show and what they do not (plus ``caveat``)."""
    change = summary.mean_off - summary.mean_on
    direction = "lowered" if change > 0 else "raised" if change < 0 else "left"
    lines = [
        "# Text normalization and intelligibility (word error rate)",
        "",
        f"Measured {date} with `{command}` (`bench/normalization_wer.py`).",
        "",
        "| | |",
        "|---|---|",
        f"| sentences | {summary.sentences} (`bench/corpus/normalization_held.txt`) |",
        f"| mean WER, normalization on | {summary.mean_on:.3f} |",
        f"| mean WER, normalization off | {summary.mean_off:.3f} |",
        f"| normalization better / worse / equal | {summary.better} / {summary.worse} / {summary.equal} |",
        f"| sign test, better against worse (two-sided) | p = {summary.sign_test_p:.3f} |",
        f"| speech | {tts} |",
        f"| recognizer | {asr} |",
        "",
        f"Normalization {direction} the mean word error rate from {summary.mean_off:.3f} (off) to "
        f"{summary.mean_on:.3f} (on); it was better for {summary.better} of {summary.sentences} sentences "
        f"and worse for {summary.worse} (sign test p = {summary.sign_test_p:.2f}). Each sentence is "
        "synthesized with the request's normalization on and off, resampled to 16 kHz and recognized; "
        "the reference is what a listener should hear: the sentence's spoken form "
        "(`tts_node.normalization.normalize`), lower-cased, without punctuation, hyphenated words split.",
        "",
        "Limits: pocketsphinx is a weak recognizer (a GMM-HMM acoustic model and a general trigram "
        "language model), and Kokoro's voice is not the speech it was trained on, so the absolute WER is "
        "high and only the difference between on and off means anything; one recognizer error more or less "
        "moves a sentence's WER by about a tenth. The reference is the normalizer's own output, which "
        'favours normalization: where G2P without it reads a number another intelligible way ("2019" as '
        '"two thousand nineteen") that counts as errors, and where a rule reads something oddly or leaves '
        "it (an unknown abbreviation) the reference follows the rule. The set is small "
        f"({summary.sentences} sentences, one voice, one run): read the sign test before the means." + caveat,
        "",
        "<details><summary>Per sentence</summary>",
        "",
        "| sentence | WER on | WER off | heard (on) | heard (off) |",
        "|---|---:|---:|---|---|",
        *(
            f"| {_cell(r.sentence)} | {r.wer_on:.2f} | {r.wer_off:.2f} | {_cell(r.heard_on)} | {_cell(r.heard_off)} |"
            for r in results
        ),
        "",
        "</details>",
        "",
    ]
    return "\n".join(lines)


def read_sentences(path: Path) -> list[str]:
    """One sentence a line; blank lines and ``#`` comments skipped."""
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.normalization_wer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=HELD, help="one sentence a line (default: the held set)")
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    parser.add_argument("--voices-dir", type=Path, default=None, help=f"extra voice packs (such as {PREFERRED_VOICE})")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as a markdown section here")
    args = parser.parse_args(argv)
    began = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - began:6.1f}s] {message}", file=sys.stderr, flush=True)

    sentences = read_sentences(args.corpus)
    recognize = Recognizer()
    say("loading kokoro-onnx")
    engine = load_engine("kokoro-onnx", threads=args.threads, voices_dir=args.voices_dir)
    voice = pick_voice(engine.info.voices)
    say(f"voice {voice}; {recognize.description}")
    results = score(engine, recognize, sentences, voice, say)
    summary = Summary.of(results)
    print(f"{'on':>5} {'off':>5}  sentence")
    for r in results:
        print(f"{r.wer_on:5.2f} {r.wer_off:5.2f}  {r.sentence}")
        print(f"{'':12}reference: {r.reference}")
        print(f"{'':12}heard, on: {r.heard_on}")
        print(f"{'':11}heard, off: {r.heard_off}")
    print(
        f"mean WER: normalization on {summary.mean_on:.3f}, off {summary.mean_off:.3f}; "
        f"on better {summary.better}, worse {summary.worse}, equal {summary.equal} of {summary.sentences} "
        f"(sign test p = {summary.sign_test_p:.3f})"
    )
    if args.out is not None:
        info = engine.info
        tts = f"{info.name} (Kokoro-82M, model version `{info.model_version}`), voice `{voice}`, speed 1.0, {LANG}"
        command = f"python -m bench.normalization_wer --out {args.out}"
        if args.corpus != HELD:
            command += f" --corpus {args.corpus}"
        if args.voices_dir is not None:
            command += f" --voices-dir {args.voices_dir}"
        caveat = ""
        if voice != PREFERRED_VOICE:
            caveat = (
                f" `{PREFERRED_VOICE}` (American English) is not among this engine's voices"
                f" ({', '.join(info.voices)}), so its first, `{voice}`, speaks the English sentences, with its own"
                f" accent: one more reason for the high absolute WER (`--voices-dir` adds packs)."
            )
        date = datetime.now(UTC).strftime("%Y-%m-%d")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        section = markdown(
            summary, results, tts=tts, asr=recognize.description, date=date, command=command, caveat=caveat
        )
        args.out.write_text(section, encoding="utf-8")
        say(f"wrote {args.out}")
    say(f"done in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
