"""Sentence-level reuse (consumers.segment_reuse and the job runner): a sentence said before is not
synthesized again, its audio must still be stored to be reused, and the log says which segments were."""

from __future__ import annotations

import uuid
from datetime import timedelta

import numpy as np
import pytest

from consumers.attempts import Attempt
from consumers.job_runner import JobRunner, RetryPolicy
from consumers.ledger import Ledger
from consumers.ports import PlannedSegment, Rendering
from consumers.segment_reuse import SegmentCache
from contracts import Producer, SegmentProduced, WordTiming
from contracts.engine_info import EngineInfo
from contracts.fingerprint import segment_key
from foundation.blobs import LocalBlobStore
from tests.support.events import segments_recorded
from tests.support.job_logs import _Builder
from tests.unit.test_job_runner import Log, call

pytestmark = pytest.mark.unit
DESCRIPTION = EngineInfo("fake", "m1", 24000, ("v", "w"), ("en-us",), "cpu")


class SentenceEngine:
    """One segment per sentence, its ids the sentence's characters; a tone per sentence."""

    description = DESCRIPTION

    def __init__(self) -> None:
        self.rendered: list[str] = []

    def plan(
        self, text: str, lang: str, normalize: bool = True, input_format: str = "text", pronunciations: object = None
    ) -> list[PlannedSegment]:
        sentences = [s.strip() + "." for s in text.split(".") if s.strip()]
        return [PlannedSegment(i, 0, len(s), s, None, tuple(map(ord, s))) for i, s in enumerate(sentences)]

    def render(self, segment: PlannedSegment, voice: str, speed: float) -> Rendering:
        self.rendered.append(segment.text)
        pitch = 100 + sum(segment.ids) % 500
        samples = (0.1 * np.sin(2 * np.pi * pitch * np.arange(2400) / 24000)).astype(np.float32)
        # One word: the whole segment, said over its 100 ms.
        return Rendering(samples, (WordTiming(start=segment.start, end=segment.end, start_ms=0, end_ms=100),))


async def run(
    runner: LoggedRunner, job_id: int, text: str, voice: str = "v", scope: str | None = None
) -> list[SegmentProduced]:
    log = runner.log
    before = len(log.events)
    job = _Builder(uuid.UUID(int=job_id), request_text=text)
    ledger = Ledger(timedelta(minutes=10))
    queued = job.queued()
    request = queued.payload.request.model_copy(update={"voice": voice, "cache_scope": scope})
    view = ledger.observe(queued.model_copy(update={"payload": queued.payload.model_copy(update={"request": request})}))
    assert (await runner.run(Attempt(view, view.request, 1, ledger))).kind == "completed"
    return segments_recorded(log.events[before:])


class LoggedRunner(JobRunner):
    """A runner over a test log, which the tests read."""

    def __init__(self, engine: SentenceEngine, blobs: LocalBlobStore) -> None:
        self.log = Log()
        super().__init__(
            engine, blobs, self.log, Producer(service="worker", instance="w"), "w", RetryPolicy(3, 0.0), call,
            segments=SegmentCache(None),
        )  # fmt: skip


def runner_with(engine: SentenceEngine, blobs: LocalBlobStore) -> LoggedRunner:
    return LoggedRunner(engine, blobs)


async def test_a_request_that_shares_sentences_with_an_earlier_one_costs_only_its_new_sentences(tmp_path):
    engine, blobs = SentenceEngine(), LocalBlobStore(tmp_path)
    runner = runner_with(engine, blobs)
    first = await run(runner, 1, "The same opening. A middle. The same ending.")
    second = await run(runner, 2, "The same opening. Another middle. The same ending.")
    assert engine.rendered == [
        "The same opening.", "A middle.", "The same ending.", "Another middle.",
    ]  # fmt: skip
    assert [s.payload.reused for s in second] == [True, False, True]
    assert [s.payload.reused for s in first] == [False, False, False]
    assert second[0].payload.audio == first[0].payload.audio
    assert second[2].payload.audio == first[2].payload.audio
    key = segment_key(engine="fake", model_version="m1", voice="v", speed=1.0, ids=tuple(map(ord, "A middle.")))
    assert first[1].payload.segment_key == key


async def test_another_voice_is_another_segment(tmp_path):
    engine = SentenceEngine()
    runner = runner_with(engine, LocalBlobStore(tmp_path))
    await run(runner, 1, "Said twice.")
    await run(runner, 2, "Said twice.", voice="w")
    assert engine.rendered == ["Said twice.", "Said twice."]


async def test_a_segment_whose_blob_the_sweeper_deleted_is_synthesized_again(tmp_path):
    engine, blobs = SentenceEngine(), LocalBlobStore(tmp_path)
    runner = runner_with(engine, blobs)
    [first] = await run(runner, 1, "Said twice.")
    assert blobs.remove_unused(first.payload.audio, idle_s=0.0)
    [again] = await run(runner, 2, "Said twice.")
    assert engine.rendered == ["Said twice.", "Said twice."]
    assert again.payload.reused is False
    assert blobs.get(again.payload.audio)[:4] == b"RIFF"


class PlacedSentenceEngine(SentenceEngine):
    """``SentenceEngine`` with each sentence's real place in the text."""

    def plan(
        self, text: str, lang: str, normalize: bool = True, input_format: str = "text", pronunciations: object = None
    ) -> list[PlannedSegment]:
        planned, at = [], 0
        for segment in super().plan(text, lang, normalize):
            at = text.index(segment.text.rstrip("."), at)
            planned.append(PlannedSegment(segment.index, at, at + len(segment.text), segment.text, None, segment.ids))
            at += len(segment.text)
        return planned


async def test_a_reused_segment_says_its_words_where_they_stand_in_its_own_request(tmp_path):
    runner = runner_with(PlacedSentenceEngine(), LocalBlobStore(tmp_path))
    first = await run(runner, 1, "A middle. Said again.")
    second = await run(runner, 2, "Something new comes first. Said again.")
    assert second[1].payload.reused
    (word,) = second[1].payload.words or ()
    assert (word.start, word.end) == (27, 38), "the characters of its own request, not the first's"
    (earlier,) = first[1].payload.words or ()
    assert (earlier.start, earlier.end) == (10, 21)
    assert (word.start_ms, word.end_ms) == (earlier.start_ms, earlier.end_ms) == (0, 100)


UNSCOPED_KEY = "0ecd8444c1d778fde371540bebdf2bf1277e2524c2ed56ea5b82500e379aba96"
"""segment_key(engine="kokoro-onnx", model_version="m1", voice="af_heart", speed=1.0, ids=(1, 2, 3)) as every
release before the scope was hashed computed it: the shared scope's stored keys stay valid."""


def test_an_unscoped_segment_key_is_the_one_stored_before_and_a_scope_makes_another():
    key = {"engine": "kokoro-onnx", "model_version": "m1", "voice": "af_heart", "speed": 1.0, "ids": (1, 2, 3)}
    assert segment_key(**key) == segment_key(**key, cache_scope=None) == UNSCOPED_KEY
    scoped = {segment_key(**key, cache_scope=tenant) for tenant in ("acme", "globex")}
    assert len(scoped) == 2
    assert UNSCOPED_KEY not in scoped


async def test_regression_under_tenant_cache_scope_another_tenants_sentence_is_not_reused(tmp_path):
    """Issue 40: with VOXLOG_CACHE_SCOPE=tenant the segment key left the scope out, so bob's job reused alice's
    sentence and said ``reused: true`` (whether another tenant had said a sentence, one sentence at a time). Now
    the scope is in the key: bob's sentence is synthesized again, and reused only within bob's own jobs."""
    engine = SentenceEngine()
    runner = runner_with(engine, LocalBlobStore(tmp_path))
    alices = await run(runner, 1, "A private sentence. From alice.", scope="alice")
    bobs = await run(runner, 2, "A private sentence. From bob.", scope="bob")
    bobs_again = await run(runner, 3, "A private sentence. Bob again.", scope="bob")
    assert [s.payload.reused for s in bobs] == [False, False], "nothing of alice's reused"
    assert bobs[0].payload.segment_key != alices[0].payload.segment_key
    assert engine.rendered.count("A private sentence.") == 2, "once for each tenant"
    assert [s.payload.reused for s in bobs_again] == [True, False], "a tenant's own sentences are still reused"
    assert engine.rendered.count("A private sentence.") == 2
    ids = tuple(map(ord, "A private sentence."))
    assert bobs[0].payload.segment_key == segment_key(
        engine="fake", model_version="m1", voice="v", speed=1.0, ids=ids, cache_scope="bob"
    )
