"""Webhooks on real processes (issue 39, item 2): a job's outcome reaches its tenant's endpoint signed as the
standardwebhooks library verifies, is tried again after the endpoint answers 500, and again, with the same
webhook-id, after the delivery process is SIGKILLed while the endpoint holds the attempt; none is lost. An
endpoint that holds its deliveries delays no other tenant's, and an address the delivery process may not
call is refused at delivery, although the API took it. A document's outcome is one delivery, made when its
last part ends, and each part's own outcome names its document."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import httpx
import pytest
import standardwebhooks

from tests.support.apps import AppStack, bearer, create_key, start_pipeline, wait_ended
from tests.support.stack import free_port

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep"}
WEBHOOKS = {"VOXLOG_WEBHOOK_SIGNING_KEY": "w" * 32, "VOXLOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
AUTH = {"VOXLOG_AUTH": "on", "VOXLOG_AUTH_CACHE_S": "1"}
DELIVERS_TO = {**WEBHOOKS, "VOXLOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.1/32"}  # not 127.0.0.2: refused there


class Receiver:
    """An endpoint on loopback: each request recorded; answered from ``answers`` in turn (then 204), an
    answer of ``None`` held until ``release`` is set."""

    def __init__(self, answers: list[int | None]) -> None:
        self.answers = answers
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Condition()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                with receiver.arrived:
                    receiver.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                    status = receiver.answers.pop(0) if receiver.answers else 204
                    receiver.arrived.notify_all()
                if status is None:
                    receiver.release.wait(60)
                    status = 204
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, count: int, within_s: float = 90.0) -> list[tuple[dict[str, str], bytes]]:
        """The requests once ``count`` have arrived (bounded)."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= count, within_s), (
                f"{len(self.requests)} of {count} deliveries arrived within {within_s} s"
            )
            return list(self.requests)


async def delivery_rows(app: AppStack) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(
        app.env["VOXLOG_DATABASE_URL"], server_settings={"search_path": app.env["VOXLOG_DATABASE_SCHEMA"]}
    )
    try:
        return list(await conn.fetch("SELECT * FROM webhook_deliveries"))
    finally:
        await conn.close()


async def registered(client: httpx.AsyncClient, url: str, event_types: tuple[str, ...] = ("job.completed",)) -> str:
    """An endpoint for ``event_types``, once the projection lists it; its secret."""
    created = await client.post("/v1/webhooks", json={"url": url, "event_types": list(event_types)})
    assert created.status_code == 201, created.text
    endpoint = created.json()["endpoint"]["endpoint_id"]
    deadline = time.monotonic() + 30
    while (await client.get(f"/v1/webhooks/{endpoint}")).status_code != 200:
        assert time.monotonic() < deadline, "the endpoint was not listed within 30 s"
        await asyncio.sleep(0.2)
    return str(created.json()["secret"])


@pytest.mark.slow
async def test_a_webhook_is_signed_retried_after_a_500_and_after_the_delivery_process_is_killed(apps):
    app, voices = await start_pipeline(apps, **BENCH, **WEBHOOKS, **AUTH)
    app.start("deliver", ["deliver"], DELIVERS_TO)
    alice, bob = bearer(await create_key(app, "alice")), bearer(await create_key(app, "bob"))
    # The first job's delivery: answered 500, then 204. The second's: held by the endpoint while the
    # delivery process is SIGKILLed, then answered 204 to the new process's attempt.
    with Receiver([500, 204, None]) as receiver, Receiver([]) as bobs, Receiver([]) as documents:
        async with httpx.AsyncClient(base_url=app.api, timeout=60, headers=alice) as client:
            secret = await registered(client, receiver.url)
            first = (await client.post("/v1/jobs", json={"text": "Call me back.", "voice": voices[0]})).json()
            assert (await wait_ended(client, f"/v1/jobs/{first['job_id']}"))["state"] == "completed"
            retried = await asyncio.to_thread(receiver.wait_for, 2)
            second = (await client.post("/v1/jobs", json={"text": "Call me again.", "voice": voices[0]})).json()
            held = await asyncio.to_thread(receiver.wait_for, 3)
            pid = app.processes.pid("deliver")
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            app.start("deliver-2", ["deliver"], DELIVERS_TO)
            again = await asyncio.to_thread(receiver.wait_for, 4, 120.0)

            # Alice's endpoint now holds every delivery; bob's outcome is delivered all the same.
            receiver.answers, receiver.release = [None] * 5, threading.Event()
            third = (await client.post("/v1/jobs", json={"text": "Hold this one.", "voice": voices[0]})).json()
            await asyncio.to_thread(receiver.wait_for, 5)
        async with httpx.AsyncClient(base_url=app.api, timeout=60, headers=bob) as client:
            await registered(client, bobs.url)
            for target in ("http://169.254.169.254/latest/meta-data/", "https://10.0.0.1/hook", "http://[::1]:9/x"):
                ssrf = await client.post("/v1/webhooks", json={"url": target, "event_types": ["job.completed"]})
                assert ssrf.status_code == 422, (target, ssrf.text)  # refused at registration, nothing recorded
            unsafe = await client.post(
                "/v1/webhooks",
                json={"url": bobs.url.replace("127.0.0.1", "127.0.0.2"), "event_types": ["job.completed"]},
            )
            assert unsafe.status_code == 201, "the API allows 127.0.0.0/8; the delivery process only 127.0.0.1"
            bobs_job = (await client.post("/v1/jobs", json={"text": "Bob's own.", "voice": voices[0]})).json()
            (_, bobs_body), *_ = await asyncio.to_thread(bobs.wait_for, 1)
            assert json.loads(bobs_body)["data"]["job_id"] == bobs_job["job_id"]
            # A document's outcome: one delivery when its last part ends, to the endpoint that wants it.
            documents_secret = await registered(client, documents.url, ("document.completed", "document.failed"))
            text = "A first paragraph of the document.\n\n* * *\n\nA second paragraph, after a scene break."
            document = await client.post("/v1/documents", json={"text": text, "voice": voices[0], "format": "pcm"})
            assert document.status_code == 202, document.text
            document_id = document.json()["document_id"]
            (document_headers, document_body), *_ = await asyncio.to_thread(documents.wait_for, 1)
            state = (await client.get(f"/v1/documents/{document_id}")).json()
            await asyncio.to_thread(bobs.wait_for, 1 + state["parts"]["completed"])  # the parts' job.completed
            assert len(receiver.requests) == 5, "alice's endpoint still holds her third job's delivery"
            refused = await _refused(app, unsafe.json()["endpoint"]["endpoint_id"])
            assert refused["last_error"].startswith("refused: "), "judged again at delivery, and not called"
            assert refused["state"] == "pending", "tried again later: the operator may allow it meanwhile"
        receiver.release.set()

    hook = standardwebhooks.Webhook(secret)
    (failed, _), (delivered, body) = retried[0], retried[1]
    assert failed["webhook-id"] == delivered["webhook-id"], "a retry is the same delivery"
    payload = hook.verify(body, delivered)
    assert (payload["type"], payload["data"]["job_id"], payload["data"]["state"]) == (
        "job.completed",
        first["job_id"],
        "completed",
    )
    assert delivered["traceparent"].startswith("00-"), "the job's trace travels with its delivery"
    (killed, _), (after, body_again) = held[2], again[3]
    assert killed["webhook-id"] == after["webhook-id"], "tried again after the kill, as the same delivery"
    assert hook.verify(body_again, after)["data"]["job_id"] == second["job_id"]
    assert third["job_id"] not in {json.loads(b)["data"]["job_id"] for _, b in bobs.requests}
    told = standardwebhooks.Webhook(documents_secret).verify(document_body, document_headers)
    assert (told["type"], told["data"]["document_id"], told["data"]["state"]) == (
        "document.completed",
        document_id,
        "completed",
    )
    assert state["state"] == "completed", "delivered once the API, too, shows the document completed"
    assert told["data"]["parts"] == state["parts"]["total"]
    assert len({headers["webhook-id"] for headers, _ in documents.requests}) == 1, "one document, one delivery"
    parts = [json.loads(b)["data"] for _, b in bobs.requests if json.loads(b)["data"]["job_id"] != bobs_job["job_id"]]
    assert parts, "the parts' own outcomes reach the endpoint that wants job.completed"
    assert {part["document_id"] for part in parts} == {document_id}, "each names its document"


async def _refused(app: AppStack, endpoint_id: str, within_s: float = 60.0) -> asyncpg.Record:
    """The delivery to ``endpoint_id`` once an attempt of it is recorded (bounded)."""
    deadline = time.monotonic() + within_s
    while True:
        rows = [r for r in await delivery_rows(app) if str(r["endpoint_id"]) == endpoint_id and r["attempts"] > 0]
        if rows:
            return rows[0]
        assert time.monotonic() < deadline, f"no attempt to {endpoint_id} recorded within {within_s} s"
        await asyncio.sleep(0.2)
