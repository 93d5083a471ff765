"""A request that a live result completes at once is answered with the job the projection will show (issue 38,
item 1), on the real projection in PostgreSQL and the projector's own batch writer.

The API used to build that answer by hand from the source job's row (its own clock for the times, no
idempotency key): the ``GET`` that followed, once the projector had read the hit's records, showed another
job. The answer is now the API's published records folded by the projector's fold
(``projections.reads.published``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from aiokafka.structs import TopicPartition

from contracts import JobEvent, JobQueued
from projections.projector import Projector, ProjectorConfig
from projections.reads.jobs import ProjectionReader
from projections.reads.rows import EngineVoices
from tests.support.api_fakes import ENGINES, Log, client, deps
from tests.support.job_logs import _Builder
from tests.support.records import RecordedDeadLetters, record_of

TTL = timedelta(days=3650)  # the source job's records are stamped in 2026 (tests.support.job_logs)


class Announced(ProjectionReader):
    """The projection in PostgreSQL, with the fakes' engines announced (no worker runs here)."""

    async def engines(self) -> list[EngineVoices]:
        return ENGINES


async def project(topics: Any, pool: Any, events: Sequence[JobEvent], first_offset: int) -> None:
    """``events`` into the projection as the projector writes a batch of partition 0 read from ``first_offset``."""
    config = ProjectorConfig(
        name="cached-answer", jobs_topic=topics.jobs, control_topic=topics.settings.control_topic, cache_ttl=TTL,
        max_batch=500,
    )  # fmt: skip
    projector = Projector(config, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    records = [record_of(e, topics.jobs, 0, first_offset + n) for n, e in enumerate(events)]
    await projector.apply_batch({TopicPartition(topics.jobs, 0): records})


async def test_regression_a_cache_hits_answer_is_the_row_the_projection_then_shows(topics, pool):
    """Before: the answer's submitted and completed times were the API's clock at answering, not its records',
    and its idempotency key was dropped, so the 200 and the GET after it disagreed."""
    log = Log()
    body = {"text": "Said once, and then asked again.", "voice": "af_heart"}
    async with client(deps(Announced(pool), log)) as http:  # type: ignore[arg-type]
        first = await http.post("/v1/jobs", json=body)
        assert first.status_code == 202, first.text
        (queued,) = log.published
        assert isinstance(queued, JobQueued)
        source = _Builder(queued.job_id)
        source.fingerprint = queued.fingerprint
        made = [queued, source.claimed(1), source.segment(1, 0), source.segment(1, 1), source.completed(1, 2)]
        await project(topics, pool, made, 0)

        hit = await http.post("/v1/jobs", json=body, headers={"Idempotency-Key": "asked-again"})
        assert hit.status_code == 200, hit.text
        published = log.published[1:]
        assert [type(e).__name__ for e in published] == ["JobQueued", "JobCompleted"]
        await project(topics, pool, published, len(made))
        shown = await http.get(f"/v1/jobs/{hit.json()['job_id']}")
    assert shown.status_code == 200, shown.text
    answered = hit.json()
    assert (answered["state"], answered["cache_hit"], answered["source_job_id"]) == (
        "completed",
        True,
        str(queued.job_id),
    )
    assert [s["index"] for s in answered["segments"]] == [0, 1], "the source's audio"
    assert answered == shown.json()
