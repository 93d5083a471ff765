# ruff: noqa: RUF001, RUF002
"""What SSML inputs are said as: docs/ssml.md's table, kept here once.

Each row is an input and what the Kokoro engines' front end (the real espeak G2P and the model's phoneme
vocabulary, without the model) says it as: each segment's phonemes (``/G2P's/``, ``[<phoneme>'s]``,
``×rate`` when not 1), each pause in milliseconds. ``tests/unit/test_ssml.py`` checks every row;
``voxlog docs`` writes :func:`table` into docs/ssml.md (``voxlog docs --check`` fails while the page shows
anything else), and ``python -m tts_node.ssml_examples`` prints it.
"""

from __future__ import annotations

from typing import Final

from contracts.ssml import Phonemes, looks_like_ssml, parse
from tts_node.engine import EngineInfo, Segment
from tts_node.g2p import Phonemizer
from tts_node.model_files import load_vocab
from tts_node.segmenter import MAX_TOKENS
from tts_node.ssml import ssml_segments

RATE: Final = 24_000

SAID: Final[list[tuple[str, str]]] = [
    ("<speak>Hello<break time='500ms'/>world.</speak>", "/həlˈO/ · 500 ms · /wˈɜːld./"),
    ("<speak>Wait <break strength='strong'/> now <break/> go.</speak>", "/wˈAt/ · 700 ms · /nˈW/ · 500 ms · /ɡˈO./"),
    ("<speak><p><s>One.</s><s>Two.</s></p><p>Three.</p></speak>", "/wˌʌn./ · 250 ms · /tˈuː./ · 700 ms · /θɹˈiː./"),
    ("<speak>Room <say-as interpret-as='characters'>B12</say-as>.</speak>", "/ɹˈuːm bˈiːwˈʌntˈuː./"),
    (
        "<speak>I have <say-as interpret-as='cardinal'>1,024</say-as> cats.</speak>",
        "/I hæv wˈʌn θˈWzənd twˈɛntifˈɔːɹ kˈæts./",
    ),
    ("<speak>The <say-as interpret-as='ordinal'>21</say-as> time.</speak>", "/ðə twˈɛntifˈɜːst tˈIm./"),
    (
        "<speak>On <say-as interpret-as='date' format='mdy'>03/04/2027</say-as>.</speak>",
        "/ˌɔn mˈɑːɹʧ fˈɔːɹθ, twˈɛnti twˈɛntisˈɛvən./",
    ),
    (
        "<speak>Call <say-as interpret-as='telephone'>555-0199</say-as>.</speak>",
        "/kˈɔːl fˈIv fˈIv fˈIv,/ · /zˈiəɹO wˈʌn nˈIn nˈIn./",
    ),
    ("<speak><sub alias='World Wide Web'>WWW</sub></speak>", "/wˈɜːld wˈId wˈɛb/"),
    ("<speak>Say <phoneme ph='təmˈɑːtoʊ'>tomato</phoneme> again.</speak>", "/sˈA/ · [təmˈɑːtoʊ] · /ɐɡˈɛn./"),
    ("<speak>Fish &amp; chips</speak>", "/fˈɪʃ ænd ʧˈɪps/"),
    ("<speak>Now <prosody rate='slow'>slowly</prosody></speak>", "/nˈW/ · /slˈOli/ ×0.75"),
    (
        "<speak><prosody rate='150%'>Quick <prosody rate='x-fast'>quicker</prosody></prosody></speak>",
        "/kwˈɪk/ ×1.5 · /kwˈɪkɚ/ ×2.25",
    ),
    ("a <b> c", "plain text: /ɐ bˈiː sˈiː/"),
    ("x < y > z", "plain text: /ˈɛks wˈI zˈiː/"),
]
"""Each input and what it is said as, in the table's order."""


class Front:
    """The Kokoro engines' front end (real espeak G2P, the model's vocabulary) without the model: what an SSML
    text is said as, before any audio."""

    def __init__(self) -> None:
        self.vocab = load_vocab()
        self.phonemizer = Phonemizer(self.vocab)
        self.info = EngineInfo("front", "v", RATE, ("v",), ("en-us", "en-gb"), "cpu")

    def segment(self, text: str, lang: str, *, normalize: bool = True) -> list[Segment]:
        return self.phonemizer.segment(text, lang, MAX_TOKENS, normalize=normalize)

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        return self.phonemizer.phoneme_ids(phonemes)


def said(front: Front, ssml: str) -> str:
    """How the table writes what ``ssml`` is said as: each segment's phonemes (``/G2P's/``, ``[<phoneme>'s]``,
    ``×rate`` when not 1), each pause in milliseconds."""
    if not looks_like_ssml(ssml):
        return "plain text: " + " · ".join(f"/{_phonemes(front, s)}/" for s in front.segment(ssml, "en-us"))
    literal = {(p.text, p.ph) for p in parse(ssml).pieces if isinstance(p, Phonemes)}
    out = []
    for segment in ssml_segments(front, ssml, "en-us"):  # type: ignore[arg-type]  # a front end, no model
        if segment.silence:
            out.append(f"{round(segment.silence * 1000 / RATE)} ms")
            continue
        shown = _phonemes(front, segment)
        mark = f"[{shown}]" if (segment.text, shown) in literal else f"/{shown}/"
        out.append(mark + (f" ×{segment.rate:g}" if segment.rate != 1 else ""))
    return " · ".join(out)


def _phonemes(front: Front, segment: Segment) -> str:
    by_id = {i: c for c, i in front.vocab.items()}
    return "".join(by_id[i] for i in segment.token_ids)


def table() -> str:
    """docs/ssml.md's table: each input of :data:`SAID` and what it is said as, as the front end says it."""
    front = Front()
    rows = [f"| `{ssml}` | {said(front, ssml)} |" for ssml, _ in SAID]
    return "\n".join(["| input | said (`/G2P/`, `[<phoneme>]`, pauses, `×rate`) |", "|---|---|", *rows])


if __name__ == "__main__":
    print(table())
