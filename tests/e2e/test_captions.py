"""Captions across real processes: a real-model job's words where its audio is loud, in every format and
Kokoro-FastAPI's captioned speech; a document's and a chapter's timed to their stitched audio, pauses in."""

from __future__ import annotations

import base64
import io
import itertools
import re
import statistics

import httpx
import numpy as np
import soundfile as sf

from tests.e2e.test_documents import PACED, wait_document
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.engines import REAL_MODEL

TEXT = "The old man walked along the river in the morning. He saw a boat near the bridge and waved to the children."


def frame_rms(samples: np.ndarray, rate: int, start_ms: int, end_ms: int) -> float:
    piece = samples[rate * start_ms // 1000 : rate * end_ms // 1000]
    return float(np.sqrt(np.mean(np.square(piece, dtype=np.float64)))) if piece.size else 0.0


async def test_a_real_model_jobs_words_are_said_where_its_audio_speaks_them(apps):
    app, voices = await start_pipeline(apps, **REAL_MODEL)
    async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:
        job_id = (await client.post("/v1/jobs", json={"text": TEXT, "voice": voices[0]})).json()["job_id"]
        job = await wait_for_job(client, job_id)
        assert job["state"] == "completed", job
        audio = await client.get(f"/v1/jobs/{job_id}/audio")
        captions = (await client.get(f"/v1/jobs/{job_id}/captions", params={"format": "json"})).json()
        srt = (await client.get(f"/v1/jobs/{job_id}/captions")).text
        vtt = await client.get(f"/v1/jobs/{job_id}/captions", params={"format": "vtt"})
        captioned = await client.post(
            "/dev/captioned_speech",
            json={"model": "tts-1", "input": TEXT, "voice": voices[0], "response_format": "wav", "stream": False},
        )
    samples, rate = sf.read(io.BytesIO(audio.content), dtype="float32")
    words = captions["words"]
    assert [w["text"] for w in words] == TEXT.split()
    assert abs(captions["duration_ms"] - 1000 * len(samples) / rate) <= 1, "the real length, not a rounded sum"
    assert all(a["end_ms"] <= b["start_ms"] for a, b in itertools.pairwise(words)), "in order"
    assert words[-1]["end_ms"] <= captions["duration_ms"]
    # Each word is said where the audio is loud; the lead-in before the first is quiet.
    loud = [frame_rms(samples, rate, w["start_ms"], w["end_ms"]) for w in words]
    assert min(loud) > 3 * frame_rms(samples, rate, 0, max(1, words[0]["start_ms"] - 50)), loud
    # The first sound (10 ms over a fiftieth of the loudest) and the first word's start agree.
    energy = np.square(samples[: len(samples) // 240 * 240].reshape(-1, 240)).mean(axis=1)
    onset_ms = 10 * int(np.argmax(energy > 0.02 * energy.max()))
    assert abs(onset_ms - words[0]["start_ms"]) < 100, (onset_ms, words[0])
    assert srt.startswith("1\n00:00:00,"), srt
    assert re.search(r"\n2\n00:00:0\d,\d{3} --> ", srt), srt
    assert vtt.text.startswith("WEBVTT\n\n00:00:00.")
    assert vtt.headers["content-type"].startswith("text/vtt")

    assert captioned.status_code == 200, captioned.text
    body = captioned.json()
    assert body["audio_format"] == "wav"
    assert base64.b64decode(body["audio"]) == audio.content, "the same request: the cached audio"
    assert [(t["word"], round(t["start_time"] * 1000), round(t["end_time"] * 1000)) for t in body["timestamps"]] == [
        (w["text"], w["start_ms"], w["end_ms"]) for w in words
    ]
    offsets = _recognized_offsets(samples, rate, words)
    if offsets:  # with the asr extra installed: a forced aligner's word starts
        assert statistics.median(abs(o) for o in offsets) < 100, offsets


def _recognized_offsets(samples: np.ndarray, rate: int, words: list[dict]) -> list[float]:
    try:
        from pocketsphinx import Decoder
    except ImportError:
        return []
    from foundation.audio_formats import resample

    decoder = Decoder(samprate=16000, loglevel="FATAL")
    decoder.set_align_text(" ".join(re.sub(r"[^a-z']", "", w["text"].lower()) for w in words))
    decoder.start_utt()
    decoder.process_raw((np.clip(resample(samples, rate, 16000), -1, 1) * 32767).astype("<i2").tobytes(), full_utt=True)
    decoder.end_utt()
    heard = [s for s in decoder.seg() if s.word not in ("<s>", "</s>", "<sil>")]
    return [w["start_ms"] - 10 * s.start_frame for w, s in zip(words, heard, strict=False)]


async def test_a_documents_captions_follow_its_stitched_audio_through_pauses_and_chapters(apps):
    app, voices = await start_pipeline(apps, **PACED)
    chapters = [
        ["First of the first chapter, said at dawn.", "A second paragraph, after a pause."],
        ["The other chapter opens here.", "And it closes here, at the very end."],
    ]
    text = "\n\n".join(f"# Chapter {n}\n\n" + "\n\n".join(paragraphs) for n, paragraphs in enumerate(chapters, 1))
    async with httpx.AsyncClient(base_url=app.api, timeout=60) as client:
        posted = await client.post("/v1/documents", json={"text": text, "voice": voices[0], "format": "pcm"})
        assert posted.status_code == 202, posted.text
        document_id = posted.json()["document_id"]
        await wait_document(client, document_id, {"completed"}, 120)
        whole = await client.get(f"/v1/documents/{document_id}/audio")
        toc = (await client.get(f"/v1/documents/{document_id}/toc")).json()
        captions = (await client.get(f"/v1/documents/{document_id}/captions", params={"format": "json"})).json()
        chapter = await client.get(f"/v1/documents/{document_id}/chapters/1/audio")
        in_chapter = (
            await client.get(f"/v1/documents/{document_id}/chapters/1/captions", params={"format": "json"})
        ).json()
        vtt = await client.get(f"/v1/documents/{document_id}/chapters/1/captions", params={"format": "vtt"})
    rate = 24000  # pcm at the bench engine's rate: two bytes a sample
    assert captions["duration_ms"] == round(1000 * len(whole.content) / 2 / rate)
    assert in_chapter["duration_ms"] == round(1000 * len(chapter.content) / 2 / rate)
    said = [w["text"] for w in captions["words"]]
    for paragraph in (p for paragraphs in chapters for p in paragraphs):
        first = said.index(paragraph.split()[0])
        assert said[first : first + len(paragraph.split())] == paragraph.split()
    # A chapter's captions are the whole document's, from the chapter's start (the table of contents sums
    # rounded durations: a millisecond a segment apart at most).
    tail = captions["words"][-len(in_chapter["words"]) :]
    assert [w["text"] for w in tail] == [w["text"] for w in in_chapter["words"]]
    shift = tail[0]["start_ms"] - in_chapter["words"][0]["start_ms"]
    assert abs(shift - toc["chapters"][1]["start_ms"]) <= 4, (shift, toc)
    assert all(abs(t["start_ms"] - c["start_ms"] - shift) <= 1 for t, c in zip(tail, in_chapter["words"], strict=True))
    assert vtt.status_code == 200
    assert vtt.text.startswith("WEBVTT")
