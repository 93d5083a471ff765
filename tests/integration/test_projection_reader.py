# ruff: noqa: RUF001
"""The API's reads of real projection tables (projections.reads.jobs and documents): typed rows.

The events go through the real projector into PostgreSQL; the reads are the
ones the routes make, so a column renamed in a migration, or a row type that
names a column its query does not select, fails here rather than as a 500.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from aiokafka.structs import TopicPartition

from contracts import (
    DocumentChapter,
    DocumentSubmitted,
    DocumentSubmittedPayload,
    JobEvent,
    JobQueued,
    JobState,
    LexiconEntryRemoved,
    LexiconEntryRemovedPayload,
    LexiconEntrySet,
    LexiconEntrySetPayload,
    NodeHeartbeat,
    NodeHeartbeatPayload,
    derive_event_id,
    document_part_job_id,
    encode_event,
    event_headers,
    node_event,
    utc_now,
)
from contracts.scheduling import HeldClaim, QueuedJob
from producers.dashboard_activity import activity_view
from producers.queue_place import place_view
from producers.views import QueuePlaceView
from projections.projector import Projector, ProjectorConfig
from projections.reads.activity import NodeLiveness
from projections.reads.documents import DocumentReader
from projections.reads.jobs import ProjectionReader
from tests.support.events import PRODUCER, T0, node_announced, request
from tests.support.job_logs import _Builder
from tests.support.records import RecordedDeadLetters, raw_record, record_of

CONFIG = ProjectorConfig(
    name="reads", jobs_topic="jobs", control_topic="control", cache_ttl=timedelta(days=3650), max_batch=500
)


async def project(pool, events: list[JobEvent], nodes: list = ()) -> None:  # type: ignore[assignment]
    projector = Projector(CONFIG, pool, consumer=None, partitions=[], dead_letter=RecordedDeadLetters())  # type: ignore[arg-type]
    batch = {TopicPartition("jobs", 3): [record_of(event, "jobs", 3, offset) for offset, event in enumerate(events)]}
    if not events:
        batch = {}
    if nodes:
        batch[TopicPartition("control", 0)] = [
            raw_record("control", 0, offset, encode_event(node), event_headers(node))
            for offset, node in enumerate(nodes)
        ]
    await projector.apply_batch(batch)


def keyed(builder: _Builder, key: str) -> JobEvent:
    queued = builder.queued()
    return queued.model_copy(update={"payload": queued.payload.model_copy(update={"idempotency_key": key})})


async def test_a_job_its_segments_its_progress_and_its_key_read_back_as_typed_rows(pool):
    made, hit = (
        _Builder(uuid.UUID(int=11), request_text="Read me."),
        _Builder(uuid.UUID(int=12), request_text="Read me."),
    )
    events = [keyed(made, "anon/k1"), made.claimed(1), made.segment(1, 0), made.segment(1, 1), made.completed(1, 2)]
    events += [hit.queued(), hit.completed(0, 2, cache_hit=True)]
    events[-1] = events[-1].model_copy(
        update={"payload": events[-1].payload.model_copy(update={"source_job_id": made.job_id})}
    )
    await project(pool, events, [node_announced()])
    reader = ProjectionReader(pool)

    job = await reader.job(made.job_id)
    assert job is not None
    assert (job.state, job.attempt, job.worker_id) == (JobState.COMPLETED, 1, "w1")
    assert job.request.text == "Read me."
    assert [s.segment_index for s in job.segments] == [0, 1]
    assert job.segments[0].audio.sha256 == "cd" * 32

    reused = await reader.job(hit.job_id)
    assert reused is not None
    assert reused.cache_hit
    assert reused.audio_job_id == made.job_id
    assert len(reused.segments) == 2, "a cache hit's audio is its source job's segments"

    state, later = await reader.progress(made.job_id, 1)
    assert state is not None
    assert state.state is JobState.COMPLETED
    assert [s.segment_index for s in later] == [1], "only the segments from the index asked for"
    assert await reader.progress(uuid.UUID(int=99), 0) == (None, [])

    by_key = await reader.jobs_by_keys(["anon/k1", "anon/unknown"])
    assert list(by_key) == ["anon/k1"]
    assert by_key["anon/k1"].job_id == made.job_id
    assert (await reader.partitions_of([made.job_id])) == {made.job_id: 3}
    assert set(await reader.cached_results([made.fingerprint])) == {made.fingerprint}
    [engine] = await reader.engines()
    assert engine.voices == ("jf_alpha",)


async def test_a_document_and_its_parts_read_back_as_typed_rows(pool):
    document_id = uuid.UUID(int=21)
    parts = [_Builder(document_part_job_id(document_id, i), request_text=f"Part {i}.") for i in range(3)]
    events: list[JobEvent] = [p.queued("batch") for p in parts]
    events += [parts[0].claimed(1), parts[0].segment(1, 0), parts[0].completed(1, 1)]
    submitted = DocumentSubmitted(
        event_id=derive_event_id(document_id, "DocumentSubmitted", 0),
        occurred_at=T0,
        producer=PRODUCER,
        payload=DocumentSubmittedPayload(
            document_id=document_id,
            title="A book",
            markup="markdown",
            chapters=(DocumentChapter(title="One", parts=1), DocumentChapter(title="Two", parts=2)),
            breaks="cpc",
            total_chars=21,
            request=request("A book"),
            priority="batch",
            submitted_at=T0,
        ),
    )
    await project(pool, events, [submitted])
    documents = DocumentReader(pool)
    document = await documents.document(document_id)
    assert document is not None
    assert [c.title for c in document.chapters] == ["One", "Two"]
    assert list(document.chapter_parts(1)) == [1, 2]
    read = await documents.parts(document_id, document.part_count)
    assert [p.state if p else None for p in read] == [JobState.COMPLETED, JobState.QUEUED, JobState.QUEUED]
    assert read[0] is not None
    assert read[0].chars == len("Part 0.")
    segments = await documents.segments([parts[0].job_id, parts[1].job_id])
    assert list(segments) == [parts[0].job_id], "only completed parts have audio"
    assert segments[parts[0].job_id][0].duration_ms == 100


async def test_regression_the_backlog_counted_every_duplicate_as_a_synthesis_of_its_own(pool):
    """Duplicates coalesce onto one synthesis, but the backlog summed the text of every live job."""
    same = [_Builder(uuid.UUID(int=30 + i), request_text="One text, wanted four times.") for i in range(4)]
    other = _Builder(uuid.UUID(int=40), request_text="Another.")
    await project(pool, [*(job.queued() for job in same), other.queued(), other.claimed(1)])
    backlog = await ProjectionReader(pool).backlog()
    assert (backlog.syntheses, backlog.chars) == (2, len("One text, wanted four times.") + len("Another."))


async def test_regression_the_backlog_counted_characters_not_what_they_cost_and_no_tenant_apart(pool):
    """Issue 40, items 4 and 5: speed 0.25 is four times the work of the same characters at 1.0, and admission
    judges each tenant's share of the backlog (a fingerprint is the work of the tenant that asked first)."""

    def queued(builder: _Builder, tenant: str, speed: float = 1.0) -> JobQueued:
        event = builder.queued()
        payload = event.payload.model_copy(
            update={"tenant": tenant, "request": event.payload.request.model_copy(update={"speed": speed})}
        )
        return event.model_copy(update={"payload": payload})

    text = "Sixty characters of text, said slowly or at the usual speed."
    assert len(text) == 60
    slow, usual = _Builder(uuid.UUID(int=50), request_text=text), _Builder(uuid.UUID(int=51), request_text=text + "!")
    later = _Builder(uuid.UUID(int=52), request_text=text + "!")  # bob asks for alice's text after her
    await project(pool, [queued(slow, "mallory", 0.25), queued(usual, "alice"), queued(later, "bob")])
    backlog = await ProjectionReader(pool).backlog()
    assert backlog.tenants == {"mallory": 240, "alice": 61}
    assert (backlog.syntheses, backlog.chars) == (2, 301)


def heartbeat(worker_id: str, silent_s: float, job_id: uuid.UUID | None = None) -> NodeHeartbeat:
    sent = utc_now() - timedelta(seconds=silent_s)
    payload = NodeHeartbeatPayload(
        worker_id=worker_id,
        engine="kokoro-onnx",
        model_version="6e742170d309",
        device="cpu",
        started_at=sent - timedelta(seconds=100),
        sent_at=sent,
        job_id=job_id,
        busy_s=78.0,
    )
    return node_event(NodeHeartbeat, PRODUCER, payload, at=sent)


async def test_regression_a_worker_killed_35_minutes_ago_was_listed_idle_and_78_percent_busy(pool):
    """The dashboard listed a worker killed 35 minutes earlier as idle, 78% busy, last heartbeat 2,103 s ago."""
    workers = ["live", "gone", "killed"]
    await project(
        pool,
        [],
        [
            *(node_announced(w) for w in workers),
            *(heartbeat(w, s) for w, s in zip(workers, (1, 60, 2103), strict=True)),
        ],
    )
    reader = ProjectionReader(pool, NodeLiveness(silent_after_s=15, forget_after_s=900))
    nodes = {node.worker_id: node for node in activity_view(await reader.activity(), reader.liveness).nodes}
    assert set(nodes) == {"live", "gone"}, "silent past VOXLOG_NODE_FORGET_AFTER_S: off the list"
    assert (nodes["live"].state, nodes["gone"].state) == ("live", "gone")
    assert (nodes["gone"].silent_s or 0) >= 60


async def test_the_live_workers_are_those_heard_from_within_the_heartbeat_timeout(pool):
    await project(pool, [], [node_announced("w1"), node_announced("w2"), heartbeat("w1", 1), heartbeat("w2", 60)])
    reader = ProjectionReader(pool, NodeLiveness(silent_after_s=15, forget_after_s=900))
    assert await reader.live_workers() == {("kokoro-onnx", "6e742170d309"): 1}
    await project(pool, [], [heartbeat("w2", 0)])
    assert await reader.live_workers() == {("kokoro-onnx", "6e742170d309"): 2}


def listing(
    worker_id: str, silent_s: float, claims: tuple[HeldClaim, ...], queue: tuple[QueuedJob, ...]
) -> NodeHeartbeat:
    """A version-2 heartbeat of ``worker_id``, ``silent_s`` old, holding ``claims`` with ``queue`` waiting."""
    beat = heartbeat(worker_id, silent_s)
    payload = beat.payload.model_copy(update={"claims": claims, "queue": queue, "chars_per_s": 50.0})
    return beat.model_copy(update={"payload": payload})


async def test_a_queued_jobs_place_is_read_from_the_newest_live_heartbeat_that_lists_it(pool):
    """The reads behind GET /v1/jobs/{id}'s ``queue``: the claims held and the jobs listed ahead, on real tables."""
    wanted, other, forgotten = uuid.UUID(int=71), uuid.UUID(int=72), uuid.UUID(int=75)
    held = (
        HeldClaim(job_id=uuid.UUID(int=70), fingerprint="ab" * 32, attempt=1, segments_done=1, segments_total=2,
                  text_chars=200, running=True),
    )  # fmt: skip
    ahead = (
        QueuedJob(job_id=other, tenant="acme", priority="interactive", text_chars=150),
        QueuedJob(job_id=uuid.UUID(int=73), tenant="globex", priority="batch", text_chars=250),
        QueuedJob(job_id=wanted, tenant="acme", priority="batch", text_chars=999),
    )
    await project(
        pool,
        [],
        [
            listing("w-old", 3, (), ahead[2:]),  # an older word of a rebalance: the newest heartbeat wins
            listing("w-new", 1, held, ahead),
            listing("w-dead", 60, (), (QueuedJob(job_id=forgotten, tenant="acme", priority="batch", text_chars=1),)),
        ],
    )
    reader = ProjectionReader(pool, NodeLiveness(silent_after_s=15, forget_after_s=900))
    now = utc_now()

    async def queue_place(job_id: uuid.UUID, now: datetime) -> QueuePlaceView | None:
        listed = await reader.queue_listing(job_id)
        return None if listed is None else place_view(listed, now)

    place = await queue_place(wanted, now)
    assert place is not None
    assert (place.worker, place.position) == ("w-new", 4), "one claim held, two jobs listed before it"
    assert place.estimated_start == now + timedelta(seconds=(100 + 150 + 250) / 50.0)
    assert 0.5 < place.heartbeat_age_s < 15
    assert await queue_place(uuid.UUID(int=74), now) is None, "listed by no worker"
    assert await queue_place(forgotten, now) is None, "a silent worker's listing is not read"
    first = await queue_place(other, now)
    assert first is not None
    assert first.position == 2


def lexicon_event(word: str, phonemes: str | None, at_ms: int) -> LexiconEntrySet | LexiconEntryRemoved:
    common = {"event_id": uuid.uuid4(), "occurred_at": T0 + timedelta(milliseconds=at_ms), "producer": PRODUCER}
    if phonemes is None:
        return LexiconEntryRemoved(payload=LexiconEntryRemovedPayload(word=word), **common)
    return LexiconEntrySet(payload=LexiconEntrySetPayload(word=word, phonemes=phonemes), **common)


async def test_a_jobs_read_names_the_words_of_its_pronunciations_the_lexicon_holds_or_held(pool):
    """Issue 40: the lexicon's entries showed in every tenant's request.pronunciations. The read of a job says
    which of its words are the lexicon's (a removed word too: it held it), for the answers to leave out."""
    said = _Builder(uuid.UUID(int=41), request_text="Acme and basil, gone.")
    queued = said.queued()
    request_said = queued.payload.request.model_copy(
        update={"pronunciations": {"acme": "ækmi", "basil": "bæzəl", "gone": "ɡɔn"}}
    )
    queued = queued.model_copy(update={"payload": queued.payload.model_copy(update={"request": request_said})})
    plain = _Builder(uuid.UUID(int=42), request_text="Nothing said as given.")
    nodes = [
        lexicon_event("acme", "ækmi", 1),
        lexicon_event("gone", "ɡɔn", 2),
        lexicon_event("gone", None, 3),
        lexicon_event("unsaid", "ʌnsɛd", 4),
    ]
    await project(pool, [queued, plain.queued()], nodes)
    reader = ProjectionReader(pool)
    job = await reader.job(said.job_id, "default")
    assert job is not None
    assert job.lexicon_words == ("acme", "gone")
    assert job.request.pronunciations == {"acme": "ækmi", "basil": "bæzəl", "gone": "ɡɔn"}, "the row keeps them"
    other = await reader.job(plain.job_id)
    assert other is not None
    assert other.lexicon_words == ()
