"""SynthesisQueue with the real Kokoro model: FIFO order, depth, cancellation, input errors."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tts_node import EngineInputError
from tts_node.fifo import QueueClosed, SynthesisQueue

DEADLINE = 60.0  # generous: the CPU is shared; nothing here waits on a clock otherwise
VOICE = "jf_alpha"
WORDS = ("One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight")


class CountingEngine:
    """The real engine, recording every call; ``hold(text)`` parks that text's segmentation until released.

    Holding the first request on the engine thread is what makes "the others are
    queued now" a fact rather than a race against a fast machine.
    """

    def __init__(self, inner):
        self.inner = inner
        self.segmented: list[str] = []
        self.synthesized: list[str] = []
        self.gates: dict[str, threading.Event] = {}
        self.synthesis_gates: dict[str, tuple[threading.Event, threading.Event]] = {}

    @property
    def info(self):
        return self.inner.info

    def hold(self, text: str) -> threading.Event:
        gate = self.gates[text] = threading.Event()
        return gate

    def hold_synthesis(self, text: str) -> tuple[threading.Event, threading.Event]:
        """Park the synthesis of the segment ``text``: (set once the engine thread is parked, the gate)."""
        entered, gate = self.synthesis_gates[text] = threading.Event(), threading.Event()
        return entered, gate

    def release_all(self) -> None:
        for gate in self.gates.values():
            gate.set()
        for _, gate in self.synthesis_gates.values():
            gate.set()

    def segment(self, text, lang):
        self.segmented.append(text)
        if (gate := self.gates.get(text)) is not None:
            gate.wait(DEADLINE)
        return self.inner.segment(text, lang)

    def synthesize(self, segment, voice, speed):
        self.synthesized.append(segment.text)
        if (held := self.synthesis_gates.get(segment.text)) is not None:
            held[0].set()
            held[1].wait(DEADLINE)
        return self.inner.synthesize(segment, voice, speed)


async def until(queue: SynthesisQueue, predicate) -> None:
    await asyncio.wait_for(queue.wait_until(predicate), DEADLINE)


async def speak(queue: SynthesisQueue, text: str, voice: str = VOICE, lang: str = "en-us"):
    return [segment async for segment in queue.stream(text, lang, voice, 1.0)]


@pytest.fixture(scope="module")
def kokoro(kokoro_onnx):
    """The session's real model (tests/unit/conftest.py)."""
    return kokoro_onnx


@pytest.fixture
async def engine(kokoro):
    return CountingEngine(kokoro)


@pytest.fixture
async def queue(engine):
    queue = SynthesisQueue(engine)
    await queue.start()
    yield queue
    engine.release_all()
    await queue.stop(grace_s=DEADLINE)


async def test_concurrent_requests_are_all_served_in_submission_order(queue, engine):
    gate = engine.hold(WORDS[0])
    finished: list[str] = []

    async def client(word: str):
        segments = await speak(queue, word)
        finished.append(word)
        return segments

    tasks = []
    for n, word in enumerate(WORDS, start=1):
        tasks.append(asyncio.create_task(client(word)))
        await until(queue, lambda q, n=n: q.submitted == n)
    assert queue.busy
    assert queue.depth == len(WORDS) - 1
    gate.set()
    results = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE)

    assert engine.segmented == list(WORDS)
    assert finished == list(WORDS)
    for word, segments in zip(WORDS, results, strict=True):
        assert [(s.index, s.text, s.sample_rate) for s in segments] == [(0, word, 24000)]
        assert segments[0].samples.size > 0
        assert segments[0].synth_ms > 0
    assert results[-1][0].queue_wait_ms > results[0][0].queue_wait_ms
    assert (queue.completed, queue.cancelled, queue.failed) == (len(WORDS), 0, 0)
    assert (queue.depth, queue.busy) == (0, False)


async def test_cancelling_a_queued_request_withdraws_it_unsynthesized(queue, engine):
    gate = engine.hold("Alpha")
    running = asyncio.create_task(speak(queue, "Alpha"))
    await until(queue, lambda q: q.busy)
    queued = asyncio.create_task(speak(queue, "Bravo"))
    await until(queue, lambda q: q.depth == 1)

    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert (queue.depth, queue.cancelled) == (0, 1)

    gate.set()
    assert len(await asyncio.wait_for(running, DEADLINE)) == 1
    await until(queue, lambda q: not q.busy)
    assert engine.segmented == ["Alpha"]
    assert engine.synthesized == ["Alpha"]
    assert (queue.completed, queue.cancelled) == (1, 1)


async def test_leaving_a_running_stream_stops_it_at_the_next_segment_boundary(queue, engine):
    text = "One. Two. Three."
    # A plain `break`, no aclosing(): the generator's finalizer must be enough.
    async for segment in queue.stream(text, "en-us", VOICE, 1.0):
        assert segment.index == 0
        break
    await until(queue, lambda q: not q.busy)
    assert engine.segmented == [text]
    # The next segment may already have been on the engine when we left; the third never is.
    assert engine.synthesized in (["One."], ["One.", "Two."])
    assert (queue.completed, queue.cancelled) == (0, 1)


async def test_input_errors_reach_the_caller_and_the_queue_goes_on(queue, engine):
    with pytest.raises(EngineInputError, match="known voices"):
        await speak(queue, "Hi.", voice="nobody")
    with pytest.raises(EngineInputError, match="en-us"):
        await speak(queue, "Bonjour.", lang="fr-fr")
    segments = await asyncio.wait_for(queue.call(engine.segment, "Hi there.", "en-us"), DEADLINE)
    assert [s.text for s in segments] == ["Hi there."]
    assert (queue.failed, queue.completed) == (2, 1)


async def test_stop_cancels_queued_requests_and_lets_the_running_one_finish(queue, engine):
    gate = engine.hold("Alpha")
    running = asyncio.create_task(speak(queue, "Alpha"))
    await until(queue, lambda q: q.busy)
    queued = asyncio.create_task(speak(queue, "Bravo"))
    await until(queue, lambda q: q.depth == 1)

    stopping = asyncio.create_task(queue.stop(grace_s=DEADLINE))
    with pytest.raises(QueueClosed, match="shutting down"):
        await asyncio.wait_for(queued, DEADLINE)
    gate.set()
    await asyncio.wait_for(stopping, DEADLINE)
    assert len(await running) == 1
    assert (queue.completed, queue.cancelled) == (1, 1)
    with pytest.raises(QueueClosed):
        await speak(queue, "Charlie")
    assert engine.segmented == ["Alpha"]
