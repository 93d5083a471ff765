"""The cache janitor's decisions (consumers.cache_janitor.plan) and the blob store's use-or-delete protocol."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from consumers.cache_janitor import JanitorConfig, plan
from consumers.coalescing import reusable_result
from consumers.ledger import Ledger
from contracts import AudioRef
from foundation import blobs as blob_module
from foundation.blobs import BlobNotFound, LocalBlobStore, StoredBlob
from projections.reads.sweeper import Entry
from projections.reads.worker import CachedResult
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def blob(name: str, size: int = 100, age: timedelta = 2 * DAY) -> StoredBlob:
    sha = hashlib.sha256(name.encode()).hexdigest()
    return StoredBlob(AudioRef(sha256=sha, uri=f"file:///b/{sha}.wav"), size, (NOW - age).timestamp())


def entry(name: str, *blobs: StoredBlob, expires_in: timedelta = DAY) -> Entry:
    return Entry(
        f"fp-{name}", uuid.uuid4(), NOW + expires_in, sum(b.size for b in blobs), frozenset(b.ref.sha256 for b in blobs)
    )


def config(max_bytes: int = 0) -> JanitorConfig:
    return JanitorConfig(job_retention=DAY, max_bytes=max_bytes, interval_s=30)


def deleted(decided) -> set[str]:
    return {b.ref.sha256 for b in decided.delete}


def test_an_expired_entry_is_evicted_and_its_blobs_go_once_unused_for_the_retention():
    old, fresh = blob("old"), blob("fresh", age=timedelta(hours=1))
    expired = entry("gone", old, fresh, expires_in=-timedelta(seconds=1))
    decided = plan([expired], [old, fresh], set(), NOW, config())
    assert decided.evict == [(expired, "expired")]
    assert deleted(decided) == {old.ref.sha256}, "a blob used within the retention stays for the jobs holding it"


def test_a_live_entry_and_an_attempt_in_flight_keep_their_blobs_however_old():
    cached, running, orphan = blob("cached"), blob("running"), blob("orphan")
    decided = plan([entry("live", cached)], [cached, running, orphan], {running.ref.sha256}, NOW, config())
    assert decided.evict == []
    assert deleted(decided) == {orphan.ref.sha256}


def test_over_the_cap_the_least_recently_used_entries_go_first_and_only_until_the_store_fits():
    blobs = [blob(f"b{i}", size=100, age=DAY + timedelta(hours=10 - i)) for i in range(4)]  # b0 is the oldest
    entries = [entry(f"e{i}", b) for i, b in enumerate(blobs)]
    decided = plan(list(reversed(entries)), blobs, set(), NOW, config(max_bytes=250))
    assert [(e.fingerprint, why) for e, why in decided.evict] == [("fp-e0", "capacity"), ("fp-e1", "capacity")]
    assert deleted(decided) == {blobs[0].ref.sha256, blobs[1].ref.sha256}
    assert (decided.stored_bytes, decided.kept_bytes, decided.over_cap_bytes) == (400, 200, 0)


def test_what_the_retention_pins_stays_beyond_the_cap_and_is_reported():
    recent = [blob(f"r{i}", size=100, age=timedelta(minutes=i)) for i in range(3)]
    decided = plan([entry(f"e{i}", b) for i, b in enumerate(recent)], recent, set(), NOW, config(max_bytes=150))
    assert decided.evict == [], "evicting results whose jobs keep their audio frees nothing"
    assert decided.delete == []
    assert decided.over_cap_bytes == 150


def test_a_blob_two_entries_share_stays_while_one_of_them_is_live():
    shared, own = blob("shared", size=500), blob("own", size=500, age=3 * DAY)
    older, newer = entry("older", shared, own), entry("newer", shared)
    decided = plan([older, newer], [shared, own], set(), NOW, config(max_bytes=600))
    assert [e.fingerprint for e, _ in decided.evict] == ["fp-older"]
    assert deleted(decided) == {own.ref.sha256}


def test_regression_a_sentence_every_result_shares_does_not_make_them_all_look_recently_used():
    """Recency was the newest of an entry's blobs, and a common last sentence (one blob, touched by every
    new result that says it) made every entry as recent as the newest: the cap evicted in no useful order."""
    common = blob("common", size=10, age=timedelta(seconds=1))
    own = [blob(f"own{i}", size=100, age=DAY + timedelta(hours=10 - i)) for i in range(4)]  # own0 is the oldest
    entries = [entry(f"e{i}", b, common) for i, b in enumerate(own)]
    decided = plan(list(reversed(entries)), [*own, common], set(), NOW, config(max_bytes=250))
    assert [e.fingerprint for e, _ in decided.evict] == ["fp-e0", "fp-e1"]
    assert deleted(decided) == {own[0].ref.sha256, own[1].ref.sha256}


def test_without_a_cap_nothing_live_is_evicted():
    blobs = [blob(f"b{i}", size=10**9) for i in range(3)]
    decided = plan([entry(f"e{i}", b) for i, b in enumerate(blobs)], blobs, set(), NOW, config(max_bytes=0))
    assert decided.evict == []
    assert decided.delete == []


# -- the blob store: a use racing a deletion either keeps the blob or finds it gone --------------------------


def stored(tmp_path, data: bytes = b"RIFF audio") -> tuple[LocalBlobStore, AudioRef]:
    store = LocalBlobStore(tmp_path)
    ref = store.put(data, ".wav")
    past = time.time() - 3600
    os.utime(store.path_for(ref.sha256, ".wav"), (past, past))
    return store, ref


def test_a_touch_before_the_deleter_decides_keeps_the_blob(tmp_path):
    store, ref = stored(tmp_path)
    assert store.touch([ref])
    assert not store.remove_unused(ref, idle_s=60)
    assert store.get(ref) == b"RIFF audio"


def test_after_the_deletion_a_touch_reports_the_result_gone_and_a_read_is_blob_not_found(tmp_path):
    store, ref = stored(tmp_path)
    assert store.remove_unused(ref, idle_s=60)
    assert not store.touch([ref])
    with pytest.raises(BlobNotFound):
        store.get(ref)


def test_a_read_while_the_deleter_holds_the_blob_renamed_waits_for_its_decision(tmp_path, monkeypatch):
    store, ref = stored(tmp_path)
    path = store.path_for(ref.sha256, ".wav")
    doomed = path.with_name(f".doomed-{path.name}")
    os.replace(path, doomed)  # where remove_unused stands between its rename and its decision
    waiting = threading.Event()

    def pause(seconds: float) -> None:
        waiting.set()
        time.sleep(seconds)

    monkeypatch.setattr(blob_module, "_pause", pause)
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(store.get(ref)))
    reader.start()
    assert waiting.wait(timeout=10), "the reader found the blob renamed away and waits"
    os.replace(doomed, path)  # the decision: in use, put back
    reader.join(timeout=10)
    assert result == [b"RIFF audio"]


def test_a_blob_a_crashed_deleter_left_renamed_is_put_back_by_the_next_listing(tmp_path, monkeypatch):
    store, ref = stored(tmp_path)
    path = store.path_for(ref.sha256, ".wav")
    os.replace(path, path.with_name(f".doomed-{path.name}"))
    monkeypatch.setattr(blob_module, "_ABANDONED_S", 0.0)
    assert store.scan() == []  # restored during this listing, listed at the next
    assert [b.ref.sha256 for b in store.scan()] == [ref.sha256]
    assert store.get(ref) == b"RIFF audio"


# -- the worker: a result is reused only with its audio still there ---------------------------------------------


class Lookup:
    def __init__(self, refs: list[AudioRef]) -> None:
        self.refs = refs

    async def request_of(self, job_id):
        return None

    async def result_blobs(self, job_id):
        return self.refs


async def test_the_worker_reuses_a_result_only_after_marking_its_blobs_used(tmp_path):
    store, ref = stored(tmp_path)
    job = _Builder(uuid.UUID(int=21))
    ledger = Ledger(DAY)
    view = ledger.observe(job.queued())
    source = CachedResult(uuid.UUID(int=22), 1, 100, NOW + DAY)
    before = store.path_for(ref.sha256, ".wav").stat().st_mtime
    assert await reusable_result(view, ledger, source, Lookup([ref]), store, NOW) == source
    assert store.path_for(ref.sha256, ".wav").stat().st_mtime > before
    assert store.remove_unused(ref, idle_s=0.0)  # the sweeper deletes it after all
    assert await reusable_result(view, ledger, source, Lookup([ref]), store, NOW) is None, "synthesized again"
