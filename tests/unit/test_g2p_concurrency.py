"""espeak-ng under concurrency (issue 29, item 7): its C library keeps global state, and concurrent calls
corrupted each other's output elsewhere (kokoro-onnx #191). Every call of every Phonemizer in a process
goes through one lock; threads phonemizing in both languages through two Phonemizers give exactly what
the same calls give one after another."""

from __future__ import annotations

import threading

import pytest

from tts_node import g2p
from tts_node.g2p import Phonemizer
from tts_node.model_files import load_vocab

pytestmark = pytest.mark.unit

TEXTS = [
    f"The {word} number {i} was read at {i % 12 + 1}:{i % 60:02d} on the {i}th of May, {1900 + i}."
    for i, word in enumerate(["tomato", "schedule", "water", "laboratory", "dance", "route"] * 8)
]


def test_threads_in_both_languages_through_two_phonemizers_give_what_one_after_another_gives():
    vocab = load_vocab()
    first, second = Phonemizer(vocab), Phonemizer(vocab)
    expected = {lang: [first.phonemizer_for(lang)(t) for t in TEXTS] for lang in ("en-us", "en-gb")}
    assert expected["en-us"] != expected["en-gb"], "the languages differ, so a voice switched mid-call shows"
    seen: dict[tuple[int, str], list[list[int]]] = {}
    start = threading.Barrier(4)

    def phonemize(index: int, phonemizer: Phonemizer, lang: str) -> None:
        ids = phonemizer.phonemizer_for(lang)
        start.wait()
        seen[(index, lang)] = [ids(text) for text in TEXTS]

    threads = [
        threading.Thread(target=phonemize, args=(i, phonemizer, lang))
        for i, (phonemizer, lang) in enumerate(
            [(first, "en-us"), (second, "en-gb"), (second, "en-us"), (first, "en-gb")]
        )
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(seen) == 4
    for (_, lang), got in seen.items():
        assert got == expected[lang], lang


def test_every_phonemizer_holds_the_one_lock_of_the_process(monkeypatch):
    """Two instances with a lock each would let two threads into espeak-ng at once."""
    held: list[bool] = []

    class Probe:
        def __call__(self, text: str) -> tuple[str, object]:
            held.append(g2p._ESPEAK.locked())
            return "a", None

    phonemizers = [Phonemizer(load_vocab()), Phonemizer(load_vocab())]
    for phonemizer in phonemizers:
        phonemizer.ids(Probe(), "hello")
    assert held == [True, True]
