# ruff: noqa: RUF001
"""SSML with the real Kokoro-82M int8 model (loaded once for the module): ``<phoneme ph>``'s ids reach the
model untouched by G2P, ``<sub>`` says its alias, pauses are exact silence, a faster rate is shorter audio."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tts_node.ssml import ssml_segments
from voxlog.engine_adapter import TtsNodeSpeechEngine

pytestmark = pytest.mark.unit

VOICE = "jf_alpha"


class Recording:
    """The engine's onnxruntime session, keeping the tokens of every run."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.tokens: list[list[int]] = []

    def run(self, names: Any, feeds: dict[str, np.ndarray]) -> Any:
        self.tokens.append(feeds["tokens"].reshape(-1).tolist())
        return self.session.run(names, feeds)


@pytest.fixture(scope="module")
def engine(kokoro_onnx):
    """The session's real model (tests/unit/conftest.py)."""
    return kokoro_onnx


@pytest.fixture
def recorded(engine):
    model = engine.inner  # load_engine's engine takes every speed (tts_node.stretching); the model is inside
    session = model._session
    model._session = Recording(session)
    yield model._session
    model._session = session


def test_phoneme_ids_reach_the_model_and_sub_says_its_alias(engine, recorded):
    ssml = (
        "<speak><phoneme ph='təmˈɑːtoʊ'>tomato</phoneme><break time='250ms'/>"
        "<sub alias='World Wide Web'>WWW</sub></speak>"
    )
    adapter = TtsNodeSpeechEngine(engine)
    plan = adapter.plan(ssml, "en-us", True, "ssml")
    rendered = [adapter.render(segment, VOICE, 1.0) for segment in plan]
    vocab = engine.inner._vocab
    assert recorded.tokens[0] == [0, *(vocab[c] for c in "təmˈɑːtoʊ"), 0], "ph's ids, padded, nothing else"
    alias = engine.segment("World Wide Web", "en-us")[0].token_ids
    assert recorded.tokens[1] == [0, *alias, 0], "the alias is said, not 'WWW'"
    assert engine.segment("WWW", "en-us")[0].token_ids != alias
    assert len(recorded.tokens) == 2, "the pause never reaches the model"
    pause = rendered[1].samples
    assert len(pause) == 6000
    assert not pause.any()
    assert all(np.sqrt(np.mean(np.square(r.samples))) > 0.01 for r in (rendered[0], rendered[2]))
    words = rendered[2].words
    assert words is not None
    span = plan[2]
    assert [span.text[w.start - span.start : w.end - span.start] for w in words] == ["World", "Wide", "Web"]


def test_a_faster_rate_is_shorter_audio_of_the_same_ids(engine):
    ssml = "<speak>The quick brown fox.<break/><prosody rate='200%'>The quick brown fox.</prosody></speak>"
    adapter = TtsNodeSpeechEngine(engine)
    normal, _, fast = adapter.plan(ssml, "en-us", True, "ssml")
    assert normal.ids == fast.ids
    assert fast.rate == 2.0
    slow_audio = adapter.render(normal, VOICE, 1.0).samples
    fast_audio = adapter.render(fast, VOICE, 1.0 * fast.rate).samples
    assert len(fast_audio) < 0.7 * len(slow_audio)


def test_the_segments_of_a_document_say_every_piece_in_order(engine):
    segments = ssml_segments(
        engine,
        "<speak><s>It costs <say-as interpret-as='cardinal'>5</say-as> dollars.</s><s>Done.</s></speak>",
        "en-us",
    )
    assert [(s.text, s.silence) for s in segments] == [("It costs five dollars.", 0), ("", 6000), ("Done.", 0)]
