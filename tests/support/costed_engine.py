"""A measurable engine on a fake clock: its forwards cost what a cost model says, so tests of what is measured
(``tts_node.batch_sizing``, ``tts_node.decoder_choice``) assert what was measured and chosen, not time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contracts.engine_info import EngineInfo
from tts_node.batch_sizing import PHONEMES
from tts_node.engine import Speech, SpeechRequest
from tts_node.errors import EngineFailure

GIB = 2**30


class CostedEngine:
    """A measurable engine whose forward costs ``fixed + per_id * count * longest`` seconds of a fake clock
    and takes ``per_id`` bytes of device memory a padded id; a forward of ``fails_at`` segments or more fails
    as an out-of-memory would."""

    def __init__(self, *, fixed: float, per_id: float, fails_at: int = 10**9, max_ids: int = 510) -> None:
        self.now, self.fixed, self.per_id, self.fails_at = 0.0, fixed, per_id, fails_at
        self.info = EngineInfo(
            name="costed", model_version="1", sample_rate=1000, voices=("a", "b"), languages=("en-us",), device="cuda:0"
        )
        self.max_ids = max_ids
        self.calls: list[tuple[int, int]] = []
        self.memory = FakeMemory()
        self.vocab = {ch: n for n, ch in enumerate(sorted(set(PHONEMES)), 1)}

    def phoneme_ids(self, phonemes: str) -> tuple[int, ...]:
        return tuple(self.vocab[ch] for ch in phonemes)

    def device_memory(self) -> FakeMemory:
        return self.memory

    def speak_batch(self, requests: Sequence[SpeechRequest]) -> list[Speech]:
        count, longest = len(requests), max(len(r.segment.token_ids) for r in requests)
        assert all(set(r.segment.token_ids) <= set(self.vocab.values()) for r in requests)
        self.calls.append((count, longest))
        if count >= self.fails_at:
            raise EngineFailure("CUDA out of memory")
        self.now += self.fixed + self.per_id * count * longest
        self.memory.peak = max(self.memory.peak, 10**9 + 1000 * count * longest)
        # A second of audio an id: the rate is ids over the forward's time.
        return [Speech(np.zeros(len(r.segment.token_ids) * 1000, dtype=np.float32), None) for r in requests]


class FakeMemory:
    def __init__(self) -> None:
        self.peak, self.released = 10**9, 0

    def synchronize(self) -> None:
        pass

    def reset_peak(self) -> None:
        self.peak = 10**9

    def peak_bytes(self) -> int:
        return self.peak

    def free_bytes(self) -> int:
        return 80 * GIB

    def allocated_bytes(self) -> int:
        return 10**9

    def release(self) -> None:
        self.released += 1
