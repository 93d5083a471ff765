"""The benchmark harness end to end, on both systems: coalescing is a correctness property, so it is tested.

Only counts are asserted; the harness's timings are never compared with anything.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from bench.profiles import QUICK
from bench.scenarios import Context, coalescing
from foundation.kafka_access import KafkaAccess

pytestmark = pytest.mark.slow


async def test_bench_coalescing_synthesizes_each_distinct_text_once_on_both_systems(stack, tmp_path, corpus):
    profile = replace(QUICK, coalesce_submissions=40, coalesce_texts=4, coalesce_synth_ms=50.0)
    lines = (corpus / "short.txt").read_text().splitlines()
    ctx = Context(
        kafka=KafkaAccess(stack.bootstrap_servers),
        database_url=stack.database_url,
        home=tmp_path,
        profile=profile,
        short_texts=tuple(line for line in lines if line.strip()),
        paragraphs=(),
        say=lambda _: None,
        drop_data=True,
    )
    out = await coalescing(ctx)
    for system in ("voxlog", "baseline"):
        result = out[system]
        assert result["syntheses"] == 4, (system, result)  # engine calls, from the workers' counters
        assert result["claims"] == 4, (system, result)
        assert result["originals"]["n"] == 4
        assert result["duplicates"]["n"] == 36
