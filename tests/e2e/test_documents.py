"""Documents and cancellation on real processes: a book in, chapters of audio out; work nobody wants stops."""

from __future__ import annotations

import asyncio
import json
import re
import struct
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from contracts import document_part_job_id
from tests.support.apps import CLI, start_pipeline, wait_for_job
from tests.support.epub import epub

# 0.2 ms per character: a 500-character part takes 0.1 s, a document of 50,000 characters some seconds.
PACED = {
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_BENCH_MS_PER_CHAR": "0.2",
}
_WORDS = [
    "river",
    "stone",
    "lantern",
    "harbor",
    "meadow",
    "quiet",
    "engine",
    "letter",
    "window",
    "garden",
    "silver",
    "morning",
]


def paragraph(n: int, tag: str) -> str:
    """A distinct paragraph of about 500 characters (``n`` and ``tag`` make it unique)."""
    words = [_WORDS[(n * 7 + i * 3) % len(_WORDS)] for i in range(12)]
    sentence = f"In {tag} paragraph {n}, the " + " ".join(words) + " went on."
    return " ".join([sentence] * 5)


def book(tag: str, chapters: int, per_chapter: int, repeat_every: int = 0) -> str:
    lines = [f"# {tag.title()} book", ""]
    for c in range(chapters):
        lines += [f"# Chapter {c + 1}", ""]
        for p in range(per_chapter):
            n = c * per_chapter + p
            # A repeated paragraph: the same text as an earlier one, so the same part fingerprint.
            lines += [paragraph(n % repeat_every if repeat_every and n >= repeat_every else n, tag), ""]
    return "\n".join(lines)


async def parts_of(client: httpx.AsyncClient, document_id: str, count: int) -> list[dict[str, Any]]:
    ids = [document_part_job_id(uuid.UUID(document_id), i) for i in range(count)]
    return list(await asyncio.gather(*(wait_for_job(client, str(i), within_s=300) for i in ids)))


async def wait_document(client: httpx.AsyncClient, document_id: str, states: set[str], within_s: float) -> dict:
    deadline = time.monotonic() + within_s
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/documents/{document_id}")
        status = response.json()
        if response.status_code == 200 and status["state"] in states:
            return status
        await asyncio.sleep(0.25)
    raise AssertionError(f"document {document_id} did not reach {states} within {within_s}s: {status}")


def riff_chunks(wav: bytes) -> dict[bytes, tuple[int, int]]:
    """Each chunk of a (streamed) WAV: (offset of its data, declared size)."""
    chunks, at = {}, 12
    while at + 8 <= len(wav):
        tag, size = wav[at : at + 4], struct.unpack("<I", wav[at + 4 : at + 8])[0]
        chunks[tag] = (at + 8, size)
        if tag == b"data":
            break
        at += 8 + size + (size % 2)
    return chunks


async def test_a_long_markdown_document_fans_out_coalesces_and_stitches_and_a_cancelled_one_stops(apps, topics):
    app, voices = await start_pipeline(apps, workers=2, **PACED)
    text = book("first", chapters=10, per_chapter=10, repeat_every=70)  # paragraphs 70..99 repeat 0..29
    assert len(text) >= 50_000
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        first = await client.post("/v1/documents", json={"text": text, "voice": voices[0]})
        assert first.status_code == 202, first.text
        submitted = first.json()
        assert [c["title"] for c in submitted["chapters"]][:2] == ["First book", "Chapter 1"]
        second = await client.post(
            "/v1/documents", json={"text": book("second", chapters=4, per_chapter=15), "voice": voices[0]}
        )
        assert second.status_code == 202, second.text
        other_id, other_parts = second.json()["document_id"], second.json()["parts"]

        # Cancel the second document mid-way: some of its parts done, most not.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            progress = await client.get(f"/v1/documents/{other_id}")  # 404 until the projector shows it
            if progress.status_code == 200 and progress.json()["parts"]["completed"] >= 3:
                break
            await asyncio.sleep(0.1)
        cancelled = await client.delete(f"/v1/documents/{other_id}")
        cancelled_at = time.time()
        assert cancelled.status_code == 202, cancelled.text
        assert cancelled.json()["visible"] is True

        done = await wait_document(client, submitted["document_id"], {"completed"}, 300)
        parts = await parts_of(client, submitted["document_id"], submitted["parts"])
        stopped = await wait_document(client, other_id, {"cancelled"}, 60)
        other = await parts_of(client, other_id, other_parts)
        toc = (await client.get(f"/v1/documents/{submitted['document_id']}/toc")).json()
        whole = await client.get(f"/v1/documents/{submitted['document_id']}/audio")
        chapter = await client.get(f"/v1/documents/{submitted['document_id']}/chapters/1/audio")
        refused = await client.get(f"/v1/documents/{other_id}/audio")

    # Parts spread over both workers, and a repeated part was synthesized once (the others reused it).
    assert {p["worker_id"] for p in parts if not p["cache_hit"]} == {"w0", "w1"}
    by_text = Counter(p["request"]["text"] for p in parts)
    assert sum(1 for n in by_text.values() if n > 1) >= 25
    for repeated in (t for t, n in by_text.items() if n > 1):
        assert sum(1 for p in parts if p["request"]["text"] == repeated and not p["cache_hit"]) == 1

    # The cancelled document: some parts completed before, the rest cancelled, none started after the DELETE.
    states = Counter(p["state"] for p in other)
    assert states["completed"] >= 3
    assert states["cancelled"] >= 1
    assert set(states) <= {"completed", "cancelled"}
    assert stopped["parts"]["cancelled"] == states["cancelled"]
    for part in other:
        claimed = part["timings"]["claimed_at"]
        assert claimed is None or _epoch(claimed) < cancelled_at, f"part {part['job_id']} started after the DELETE"
    assert refused.status_code == 409

    # The stitched audio: every chapter marked, as long as the table of contents says.
    assert done["parts"] == {"total": submitted["parts"], "completed": submitted["parts"], "failed": 0, "cancelled": 0}
    assert [c["title"] for c in toc["chapters"]] == [c["title"] for c in submitted["chapters"]]
    starts = [c["start_ms"] for c in toc["chapters"]]
    assert starts == sorted(starts)
    assert starts[0] == 0
    assert sum(c["duration_ms"] for c in toc["chapters"]) == toc["duration_ms"]
    assert whole.status_code == 200
    assert whole.headers["content-type"].startswith("audio/wav")
    chunks = riff_chunks(whole.content)
    cue_at, _ = chunks[b"cue "]
    assert struct.unpack("<I", whole.content[cue_at : cue_at + 4])[0] == len(toc["chapters"])
    data_at, _ = chunks[b"data"]
    seconds = (len(whole.content) - data_at) / 2 / 24000
    assert abs(seconds * 1000 - toc["duration_ms"]) <= submitted["parts"] * 2  # per-segment ms rounding
    assert chapter.status_code == 200
    assert 0 < len(chapter.content) < len(whole.content)


def _epoch(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


# 30 segments (a sentence each) of 400 ms: 12 s of synthesis, in which a DELETE or a leaving client lands.
LONG = " ".join(f"Sentence number {i} of a long request that goes on and on." for i in range(30))
SLOW = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep", "VOXLOG_BENCH_SYNTH_MS": "400"}


async def first_segment(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/jobs/{job_id}")  # 404 until the projector shows it
        if response.status_code != 200:
            await asyncio.sleep(0.05)
            continue
        job = response.json()
        if job["segments"] or (job["state"] != "queued" and job["state"] != "claimed"):
            return dict(job)
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} produced no segment in time")


async def test_delete_stops_a_running_job_skips_a_queued_one_and_finishes_for_a_waiting_duplicate(apps, topics):
    # One claim at a time: a job submitted behind the running one stays queued (with several claims held, a
    # short job behind a long one is claimed at once and takes the engine at its next segment).
    app, voices = await start_pipeline(apps, workers=1, **SLOW, VOXLOG_HELD_CLAIMS="1")
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        running = (await client.post("/v1/jobs", json={"text": LONG, "voice": voices[0]})).json()["job_id"]
        queued = (await client.post("/v1/jobs", json={"text": "Queued, then not wanted.", "voice": voices[0]})).json()
        await first_segment(client, running)
        assert (await client.delete(f"/v1/jobs/{queued['job_id']}")).status_code == 202
        assert (await client.delete(f"/v1/jobs/{running}")).status_code == 202
        again = await client.delete(f"/v1/jobs/{running}")
        stopped = await _until(client, running, "cancelled")
        skipped = await _until(client, queued["job_id"], "cancelled")
        assert again.status_code in (200, 202)
        assert (await client.delete(f"/v1/jobs/{running}")).status_code == 200  # cancelled already

        # A duplicate waits behind: the cancelled job's synthesis goes on for it, and it reuses every segment.
        wanted = "A text two clients asked for. " + LONG
        leader = (await client.post("/v1/jobs", json={"text": wanted, "voice": voices[0]})).json()["job_id"]
        follower = (await client.post("/v1/jobs", json={"text": wanted, "voice": voices[0]})).json()["job_id"]
        await first_segment(client, leader)
        assert (await client.delete(f"/v1/jobs/{leader}")).status_code == 202
        served = await wait_for_job(client, follower, within_s=300)
        left = await _until(client, leader, "cancelled")
        finished = (await client.get(f"/v1/jobs/{stopped['job_id']}")).json()
        events = (await client.get(f"/v1/jobs/{running}/events")).json()

    assert 1 <= len(stopped["segments"]) < served["segment_count"]  # stopped at a segment boundary
    assert finished["state"] == "cancelled"
    assert skipped["attempt"] == 0
    assert skipped["timings"]["claimed_at"] is None
    assert not skipped["segments"]
    assert served["state"] == "completed"
    assert served["segments_reused"] == served["segment_count"]
    assert left["state"] == "cancelled"
    assert events["cancelled"].startswith("client")
    outcomes = [e["outcome"] for e in events["events"] if e["type"] == "JobCancelled"]
    # A second DELETE that came before the projection showed the first records the fact again (202): one
    # event id, the copy a duplicate. One that came after answers 200 and records nothing.
    assert sorted(outcomes) == (["applied", "duplicate"] if again.status_code == 202 else ["applied"])


async def _until(client: httpx.AsyncClient, job_id: str, state: str, within_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = await client.get(f"/v1/jobs/{job_id}")
        job = response.json()
        if response.status_code == 200 and job["state"] == state:
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} is not {state} after {within_s}s: {job.get('state')}")


async def test_a_streaming_client_that_leaves_cancels_its_job_unless_another_waits_for_it(apps, topics):
    app, voices = await start_pipeline(apps, workers=1, **SLOW)
    speech = {"model": "tts-1", "voice": voices[0], "response_format": "pcm"}
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        async with client.stream("POST", "/v1/audio/speech", json={**speech, "input": LONG}) as response:
            assert response.status_code == 200
            job_id = response.headers["x-voxlog-job-id"]
            await anext(response.aiter_raw())  # some audio, then the client goes away
        gone = await _until(client, job_id, "cancelled")

        # The second listener arrives while the stream runs, and is visible before the first leaves: with one
        # worker busy on the stream, it stays queued until then (submitted before the stream, it could be
        # claimed first and be finished by the time the stream begins, leaving nobody else to want the audio).
        shared = "Two listeners want this one. " + LONG
        async with client.stream("POST", "/v1/audio/speech", json={**speech, "input": shared}) as response:
            streamed_id = response.headers["x-voxlog-job-id"]
            audio = response.aiter_raw()  # held: a dropped iterator is finalized, and that closes the stream
            await anext(audio)
            second = {"text": shared, "voice": voices[0], "format": "pcm"}  # the same audio: one fingerprint
            waiting = (await client.post("/v1/jobs", json=second)).json()["job_id"]
            queued = await _until(client, waiting, "queued")
            streaming = (await client.get(f"/v1/jobs/{streamed_id}")).json()
        kept = await wait_for_job(client, streamed_id, within_s=300)
        other = await wait_for_job(client, waiting, within_s=300)
    assert gone["state"] == "cancelled"
    assert len(gone["segments"]) < 10
    assert queued["state"] == "queued"
    assert streaming["state"] == "claimed"  # still running when its client left
    assert kept["state"] == "completed"
    assert other["state"] == "completed"
    assert other["fingerprint"] == kept["fingerprint"]
    assert other["source_job_id"] == streamed_id  # served from the stream's synthesis, not a second one


def tiny_epub() -> bytes:
    """An EPUB 3 of two chapters, titled by its navigation document (not by the chapters' headings)."""

    def page(body: str) -> str:
        return f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>x</title></head><body>{body}</body></html>'

    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>The Lighthouse</dc:title></metadata>'
        '<manifest><item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
        '<item id="a" href="a.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="b" href="b.xhtml" media-type="application/xhtml+xml"/></manifest>'
        '<spine><itemref idref="a"/><itemref idref="b"/></spine></package>'
    )
    nav = page(
        '<nav xmlns:epub="http://www.idpf.org/2007/ops" epub:type="toc"><ol>'
        '<li><a href="a.xhtml">Arrival</a></li><li><a href="b.xhtml">The Storm</a></li></ol></nav>'
    )
    chapters = {
        "a.xhtml": page("<h1>One</h1>" + "".join(f"<p>{paragraph(n, 'epub')}</p>" for n in range(3))),
        "b.xhtml": page("<h1>Two</h1>" + "".join(f"<p>{paragraph(n, 'epub')}</p>" for n in range(3, 5))),
    }
    return epub({"content.opf": opf, "nav.xhtml": nav, **chapters})


async def test_voxlog_speak_reads_an_epub_through_the_running_stack_and_a_rerun_resumes_the_same_document(
    apps, topics, tmp_path
):
    app, _ = await start_pipeline(apps, workers=1, **PACED)
    book_path = tmp_path / "lighthouse.epub"
    book_path.write_bytes(tiny_epub())
    out = tmp_path / "audio"
    command = [*CLI, "speak", str(book_path), "--api", app.api, "--out", str(out), "--whole", "--no-progress"]
    env = {**app.env, "PYTHONPATH": str(Path.cwd())}

    async def speak() -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            *command, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        output, _ = await asyncio.wait_for(process.communicate(), timeout=240)
        return process.returncode or 0, output.decode()

    code, said = await speak()
    assert code == 0, said
    written = sorted(p.name for p in out.iterdir())
    toc = json.loads((out / "toc.json").read_text())
    again_code, again_said = await speak()  # the same file and options: the same document, nothing new

    assert written == ["01-arrival.wav", "02-the-storm.wav", "the-lighthouse.wav", "toc.json"], said
    assert [c["title"] for c in toc["chapters"]] == ["Arrival", "The Storm"]
    chapters = [(out / name).read_bytes() for name in written[:2]]
    whole = (out / "the-lighthouse.wav").read_bytes()
    for audio in (*chapters, whole):
        assert audio[:4] == b"RIFF"
        assert audio[8:12] == b"WAVE"
    assert len(whole) > max(len(c) for c in chapters)
    submitted = re.search(r"submitted document ([0-9a-f-]{36})", said)
    resumed = re.search(r"resuming document ([0-9a-f-]{36})", again_said)
    assert submitted is not None, said
    assert again_code == 0, again_said
    assert resumed is not None, again_said
    assert resumed.group(1) == submitted.group(1), again_said
