# ruff: noqa: RUF001
"""The lexicon through the log on real processes and the real Kokoro model (issue 29, item 3): a word added with
`voxlog lexicon add` is followed by the API, a new request that says it is a new job (its fingerprint names the
pronunciation, so the audio cached before is not served for it) said with the given phonemes; once the word is
removed the text is its old fingerprint again, answered from the cache; the audit shows what a job was said
with, and replay rebuilds the lexicon."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx

from projections.migrations import drop_schema
from tests.e2e.test_backpressure import until
from tests.support.apps import start_pipeline, wait_for_job
from tests.support.cli import voxlog
from tests.support.engines import REAL_MODEL

TEXT = "The tomato is red."
SAID = "tˈOmAtO"  # not espeak's reading of "tomato"


async def test_a_lexicon_word_round_trips_through_the_log(apps, stack):
    app, voices = await start_pipeline(apps, VOXLOG_LEXICON_CACHE_S="0", **REAL_MODEL)
    rebuilt = f"r_{uuid.uuid4().hex[:12]}"
    try:
        async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:

            async def lexicon() -> dict[str, str]:
                answer = await client.get("/v1/lexicon")
                assert answer.status_code == 200, answer.text
                return {e["word"]: e["phonemes"] for e in answer.json()["entries"]}

            async def speak() -> httpx.Response:
                return await client.post("/v1/jobs", json={"text": TEXT, "voice": voices[0]})

            first = await speak()
            assert first.status_code == 202, first.text
            before = await wait_for_job(client, first.json()["job_id"])
            assert before["state"] == "completed", before
            assert before["request"]["pronunciations"] == {}
            audio_before = (await client.get(f"/v1/jobs/{before['job_id']}/audio")).content

            added = await asyncio.to_thread(voxlog, app.env, "lexicon", "add", "Tomato", SAID, timeout_s=60)
            assert added.returncode == 0, added.stdout + added.stderr

            async def followed() -> bool:
                return (await lexicon()).get("tomato") == SAID

            await until("the lexicon entry to be projected", followed)

            second = await speak()
            assert second.status_code == 202, second.text  # a new job: not the cached result of the text
            after = await wait_for_job(client, second.json()["job_id"])
            assert after["state"] == "completed", after
            # Said with the lexicon's entry (a new fingerprint, other audio), which the answer does not list: the
            # lexicon is the operator's (GET /v1/lexicon, voxlog audit below), never shown in a tenant's request.
            assert after["request"]["pronunciations"] == {}
            assert after["fingerprint"] != before["fingerprint"]
            audio_after = (await client.get(f"/v1/jobs/{after['job_id']}/audio")).content
            assert audio_after != audio_before
            captions = (await client.get(f"/v1/jobs/{after['job_id']}/captions", params={"format": "json"})).json()
            assert [w["text"] for w in captions["words"]] == ["The", "tomato", "is", "red."]

            removed = await asyncio.to_thread(voxlog, app.env, "lexicon", "remove", "tomato", timeout_s=60)
            assert removed.returncode == 0, removed.stdout + removed.stderr

            async def gone() -> bool:
                return "tomato" not in await lexicon()

            await until("the removal to be projected", gone)
            third = await speak()
            assert third.status_code == 200, third.text  # the text's own fingerprint again: from the cache
            assert (third.json()["fingerprint"], third.json()["state"]) == (before["fingerprint"], "completed")
            again = await asyncio.to_thread(voxlog, app.env, "lexicon", "remove", "tomato", timeout_s=60)
            assert again.returncode == 1, again.stdout + again.stderr

        report = await asyncio.to_thread(voxlog, app.env, "audit", after["job_id"], timeout_s=120)
        assert report.returncode == 0, report.stdout + report.stderr
        [queued_line] = [line for line in report.stdout.splitlines() if " JobQueued " in line]
        assert f"pronunciations (tomato /{SAID}/)" in queued_line, report.stdout

        checked = await asyncio.to_thread(voxlog, app.env, "replay", "--into", rebuilt, "--verify", timeout_s=300)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "no difference" in checked.stdout
        conn = await asyncpg.connect(stack.database_url)
        try:
            row = await conn.fetchrow(f"SELECT word, phonemes, reason FROM {rebuilt}.lexicon")
        finally:
            await conn.close()
        assert row is not None
        assert (row["word"], row["phonemes"]) == ("tomato", None), "replay rebuilds the lexicon: the word removed"
        assert row["reason"].startswith("removed by ")
    finally:
        await drop_schema(stack.database_url, rebuilt)
