"""When each written word is said in a segment's audio, from the model's own predicted phoneme durations.

Kokoro's duration predictor says how many frames each phoneme id lasts, and its decoder renders every
frame as the same number of samples (600 at 24 kHz: the audio is exactly ``600 * sum(durations)``
long), so the durations place every id in the audio. Ids map to the words as written in two steps:

1. Spoken words to written ones. The G2P read the segment's spoken form, normalized ("2.5 kg" is "two
   point five kilograms"). The two word sequences are aligned (difflib, on lower-cased letters and
   digits): a word the normalizer left alone is its own entry; a run of written words it replaced is
   one entry spanning all their spoken words.
2. Ids to spoken words. espeak separates words by a space id: when it gave as many words as the spoken
   form has, the i-th run of ids is the i-th spoken word; otherwise (espeak joined or split words, as
   with a number read without normalization) each entry takes a share of the ids by its spoken letters.

An entry starts at its first phoneme id and ends after its last; the punctuation and space ids (pauses)
lie between entries, never in one. The sound comes ``LEAD_FRAMES`` earlier than its frames say: a
forced alignment of the real model's audio (pocketsphinx, docs/captions.md) heard words start 80 ms
(median) before their first frame, and Kokoro's own pipeline takes 3 frames off for the same reason.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from typing import Final

from tts_node.engine import Segment, WordTime

_WORD = re.compile(r"\S+")
LEAD_FRAMES: Final = 3  # 75 ms: how much earlier than its frames a phoneme is heard


@dataclass(frozen=True)
class Entry:
    """Characters ``[start, end)`` of a segment's text as written, and the spoken words they were read as."""

    start: int
    end: int
    spoken: tuple[str, ...]


def entries(written: str, spoken: str) -> list[Entry]:
    """The caption entries of ``written``, read aloud as ``spoken`` (see step 1)."""
    said = [word for word in spoken.split() if _key(word)]
    marks = [(m.start(), m.end(), _key(m.group())) for m in _WORD.finditer(written)]
    matcher = SequenceMatcher(None, [key for *_, key in marks], [_key(word) for word in said], autojunk=False)
    found: list[Entry] = []
    unclaimed: tuple[str, ...] = ()  # spoken words before any written one: the next entry said them
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "insert" and found:
            found[-1] = replace(found[-1], spoken=found[-1].spoken + tuple(said[j1:j2]))
            continue
        if tag == "insert":
            unclaimed += tuple(said[j1:j2])
            continue
        if tag == "delete":
            continue  # written words said as nothing (a symbol the normalizer dropped) have no entry
        if tag == "equal":
            new = [Entry(marks[i][0], marks[i][1], (said[j1 + i - i1],)) for i in range(i1, i2)]
        else:
            new = [Entry(marks[i1][0], marks[i2 - 1][1], tuple(said[j1:j2]))]
        if unclaimed:
            new[0] = replace(new[0], spoken=unclaimed + new[0].spoken)
            unclaimed = ()
        found.extend(new)
    return found


def id_runs(ids: Sequence[int], space_id: int | None, silent_ids: Collection[int]) -> list[list[int]]:
    """Positions in ``ids`` of each spoken word's phonemes: runs between space ids, punctuation left out."""
    runs: list[list[int]] = []
    run: list[int] = []
    for position, token in enumerate(ids):
        if token == space_id:
            if run:
                runs.append(run)
            run = []
        elif token not in silent_ids:
            run.append(position)
    if run:
        runs.append(run)
    return runs


def word_times(
    segment: Segment, durations: Sequence[int], samples: int, space_id: int | None, silent_ids: Collection[int]
) -> tuple[WordTime, ...] | None:
    """Each entry of ``segment`` placed in its audio of ``samples`` samples; ``durations`` are the model's
    frames per id with the boundary pad at both ends. None when they do not fit the segment's ids."""
    ids = segment.token_ids
    frames = sum(durations)
    if len(durations) != len(ids) + 2 or frames <= 0 or samples <= 0:
        return None
    # Frame k of the padded sequence starts at edges[k]; the audio's real length sets the frame's size.
    edges = list(itertools.accumulate(durations, initial=0))
    per_frame = samples / frames

    def sample(frame: int) -> int:
        return max(0, round((frame - LEAD_FRAMES) * per_frame))

    placed = _place(entries(segment.text, segment.spoken or segment.text), id_runs(ids, space_id, silent_ids))
    return tuple(
        WordTime(
            segment.start + entry.start,
            segment.start + entry.end,
            sample(edges[positions[0] + 1]),
            sample(edges[positions[-1] + 2]),
        )
        for entry, positions in placed
    )


def _place(found: list[Entry], runs: list[list[int]]) -> list[tuple[Entry, list[int]]]:
    """Each entry with the positions of its ids (step 2); an entry left with none is not placed."""
    if len(runs) == sum(len(entry.spoken) for entry in found):
        taken = iter(runs)
        exact = [(entry, [p for _ in entry.spoken for p in next(taken)]) for entry in found]
        return [(entry, positions) for entry, positions in exact if positions]
    flat = [position for run in runs for position in run]
    weights = list(itertools.accumulate(sum(len(_key(word)) for word in entry.spoken) for entry in found))
    if not flat or not weights or weights[-1] == 0:
        return []
    cuts = [0, *(round(len(flat) * weight / weights[-1]) for weight in weights)]
    shared = [(entry, flat[cuts[i] : cuts[i + 1]]) for i, entry in enumerate(found)]
    return [(entry, positions) for entry, positions in shared if positions]


def _key(word: str) -> str:
    return "".join(c for c in word.lower() if c.isalnum())
