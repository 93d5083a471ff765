"""The API answers while it splits a document (issue 25): the split runs in a process of its own, not on the
event loop, where one POST of 30,000 full stops had held /healthz for 10 s.

The test holds the split of the slowest document the API accepts (its text at the raw limit, markup included,
two thousand parts once read) at a gate: a Unix socket the parsing connects to and waits on
(VOXLOG_DOCUMENT_GATE, read by tests.support.gated_api, the API's entry point for this test: no setting of
the API's), and asks /healthz while it waits there. No timing is asserted: only the order of events (the
split held, health answered, the document not yet answered, then answered 202).
A split on the event loop would hold the loop at the gate, and health would not answer at all.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

import httpx

from tests.support.apps import start_pipeline
from tests.support.document_gate import Gate

QUICK = {  # no synthesis time: the parts are queued and done with at once, nothing here waits for them
    "VOXLOG_ENGINE": "bench-sleep",
    "VOXLOG_DEFAULT_ENGINE": "bench-sleep",
    "VOXLOG_MAX_BACKLOG_S": "0",
}
GATED_API = (sys.executable, "-m", "tests.support.gated_api")  # `voxlog api`, its parsing held at the gate
RAW_LIMIT = 2 * 2_000_000  # twice VOXLOG_MAX_DOCUMENT_CHARS: the most text a document may have before splitting
_WORDS = (
    "river", "*stone*", "**lantern**", "[harbor](https://example.org/harbor/and/its/long/path)", "`meadow`",
    "quiet.", "engine,", "<b>letter</b>", "window", "<!-- note -->", "silver", "morning?", "![pic](p.png)",
)  # fmt: skip


def slowest_document() -> str:
    """Markdown just under the raw limit, every inline rule busy, and under every limit once read."""
    paragraphs, size = [], 0
    while True:
        i = len(paragraphs)
        words = (_WORDS[(i * 7 + k * 3) % len(_WORDS)] for k in range(260))
        paragraph = f"## Chapter {i // 40 + 1}" if i % 40 == 0 else " ".join(words)
        if size + len(paragraph) + 2 > RAW_LIMIT - 10_000:
            return "# The Slowest Book\n\n" + "\n\n".join(paragraphs)
        paragraphs.append(paragraph)
        size += len(paragraph) + 2


async def test_healthz_answers_while_the_slowest_accepted_document_is_split(apps, topics):
    text = slowest_document()
    gate = await Gate(Path(tempfile.mkdtemp(prefix="voxlog-gate-", dir="/tmp")) / "gate").start()  # a short path
    app, voices = await start_pipeline(apps, workers=1, api_program=GATED_API, VOXLOG_DOCUMENT_GATE=gate.path, **QUICK)
    async with httpx.AsyncClient(base_url=app.api, timeout=120) as client:
        body, headers = json.dumps({"text": text, "voice": voices[0]}), {"content-type": "application/json"}
        posted = asyncio.create_task(client.post("/v1/documents", content=body, headers=headers))
        held = asyncio.create_task(gate.held.wait())
        await asyncio.wait([posted, held], return_when=asyncio.FIRST_COMPLETED)
        assert held.done(), f"the document was answered without being held: {posted.result().text[:300]}"
        health = await client.get("/healthz", timeout=30)
        assert health.status_code == 200
        assert health.json() == {"status": "ok"}
        assert not posted.done()
        await gate.release()
        gate.close()
        answer = await posted
    assert answer.status_code == 202, answer.text[:500]
    assert answer.json()["parts"] > 2000
    assert answer.json()["chars"] < 2_000_000
