"""The worker's segment writes (consumers.segment_stores.SegmentStores): the segments of one forward, asked in
one turn of the loop, are encoded and written in one hop to the thread pool; those asked while a hop runs go
together in the next; each segment gets its own outcome."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from consumers.segment_stores import SegmentStores
from contracts import AudioRef
from foundation.audio import encode_wav
from foundation.blobs import LocalBlobStore

pytestmark = pytest.mark.unit


def tone(n: int, level: float = 0.1) -> np.ndarray:
    return (level * np.sin(np.arange(n, dtype=np.float32) / 7)).astype(np.float32)


class HeldSink:
    """A blob store whose writes wait, in their thread, for a gate; counts each put, refuses marked data."""

    def __init__(self, store: LocalBlobStore) -> None:
        self.store = store
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.puts: list[bytes] = []
        self.refused: set[bytes] = set()

    def put(self, data: bytes, suffix: str) -> AudioRef:
        self.entered.set()
        assert self.gate.wait(30), "the test never opened the gate"
        self.puts.append(data)
        if data in self.refused:
            raise OSError(28, "No space left on device")
        return self.store.put(data, suffix)

    def touch(self, refs: Iterable[AudioRef]) -> bool:
        return self.store.touch(refs)


async def test_the_segments_asked_in_one_turn_are_written_in_one_hop(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    stores = SegmentStores(store)
    segments = [tone(100 + i) for i in range(8)]
    stored = await asyncio.gather(*(stores.store(s, 24_000) for s in segments))
    assert stores.hops == 1
    for samples, (ref, length) in zip(segments, stored, strict=True):
        wav = encode_wav(samples, 24_000)
        assert store.get(ref) == wav
        assert length == len(wav)


async def test_stores_asked_while_a_hop_runs_go_together_in_the_next(tmp_path: Path) -> None:
    sink = HeldSink(LocalBlobStore(tmp_path))
    stores = SegmentStores(sink)
    first = asyncio.ensure_future(stores.store(tone(50), 24_000))
    await asyncio.to_thread(sink.entered.wait, 30)  # the first hop is in its thread, held
    later = [asyncio.ensure_future(stores.store(tone(60 + i), 24_000)) for i in range(5)]
    await asyncio.sleep(0)  # they asked (a turn of the loop): their hop waits for the one in flight
    assert stores.hops == 1
    sink.gate.set()
    results = await asyncio.gather(first, *later)
    assert stores.hops == 2
    assert len({ref.sha256 for ref, _ in results}) == 6


async def test_one_refused_write_fails_its_own_segment_only(tmp_path: Path) -> None:
    sink = HeldSink(LocalBlobStore(tmp_path))
    sink.gate.set()
    stores = SegmentStores(sink)
    bad = tone(70, level=0.2)
    sink.refused.add(encode_wav(bad, 24_000))
    asked = [stores.store(tone(70), 24_000), stores.store(bad, 24_000), stores.store(tone(71), 24_000)]
    outcomes = await asyncio.gather(*asked, return_exceptions=True)
    assert isinstance(outcomes[1], OSError)
    assert not isinstance(outcomes[0], BaseException)
    assert not isinstance(outcomes[2], BaseException)
    assert stores.hops == 1


async def test_a_store_cancelled_before_its_hop_is_not_written(tmp_path: Path) -> None:
    sink = HeldSink(LocalBlobStore(tmp_path))
    stores = SegmentStores(sink)
    first = asyncio.ensure_future(stores.store(tone(80), 24_000))
    await asyncio.to_thread(sink.entered.wait, 30)
    given_up = asyncio.ensure_future(stores.store(tone(81), 24_000))
    kept = asyncio.ensure_future(stores.store(tone(82), 24_000))
    await asyncio.sleep(0)
    given_up.cancel()
    sink.gate.set()
    await asyncio.gather(first, kept)
    assert given_up.cancelled()
    assert encode_wav(tone(81), 24_000) not in sink.puts
    assert len(sink.puts) == 2
