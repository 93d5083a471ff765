"""The benchmark harness end to end, on both systems: coalescing is a correctness property, so it is tested.

Only counts are asserted; the harness's timings are never compared with anything.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.gpu_pace import gpu_pace
from bench.profiles import QUICK
from bench.scenarios import Context, coalescing
from foundation.kafka_access import KafkaAccess

pytestmark = pytest.mark.slow


def _context(stack, tmp_path, corpus, profile) -> Context:
    lines = (corpus / "short.txt").read_text().splitlines()
    return Context(
        kafka=KafkaAccess(stack.bootstrap_servers),
        database_url=stack.database_url,
        home=tmp_path,
        profile=profile,
        short_texts=tuple(line for line in lines if line.strip()),
        paragraphs=(),
        say=lambda _: None,
        drop_data=True,
    )


async def test_bench_coalescing_synthesizes_each_distinct_text_once_on_both_systems(stack, tmp_path, corpus):
    profile = replace(QUICK, coalesce_submissions=40, coalesce_texts=4, coalesce_synth_ms=50.0)
    out = await coalescing(_context(stack, tmp_path, corpus, profile))
    for system in ("voxlog", "baseline"):
        result = out[system]
        assert result["syntheses"] == 4, (system, result)  # engine calls, from the workers' counters
        assert result["claims"] == 4, (system, result)
        assert result["originals"]["n"] == 4
        assert result["duplicates"]["n"] == 36


async def test_bench_gpu_pace_counts_every_job_in_the_engines_forwards_on_both_systems(stack, tmp_path, corpus):
    """Scenario (n): the batched pace reaches both systems' workers (on a GPU's device) and their engines'
    counters reach the figures: every job's one segment in some forward of at most 32."""
    profile = replace(QUICK, warmup_jobs=4, gpu_pace_jobs=60, gpu_pace_workers=2)
    out = await gpu_pace(_context(stack, tmp_path, corpus, profile))
    for system in ("voxlog", "baseline"):
        engine = out[system]["engine"]
        assert out[system]["jobs"] == 60, system
        assert engine["segments"] == 60, (system, engine)
        assert 60 / 32 <= engine["forwards"] <= 60, (system, engine)
        assert len(engine["per_worker"]) == 2
        assert out[system]["cores_allow"]["bound"] in ("cores", "engine")
