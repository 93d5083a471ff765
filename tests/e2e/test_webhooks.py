"""Webhooks on real processes (issue 39, item 2): a job's outcome reaches its tenant's endpoint signed as the
standardwebhooks library verifies, is tried again after the endpoint answers 500, and again, with the same
webhook-id, after the delivery process is SIGKILLed while the endpoint holds the attempt; none is lost."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import standardwebhooks

from tests.support.apps import start_pipeline, wait_ended
from tests.support.stack import free_port

BENCH = {"VOXLOG_ENGINE": "bench-sleep", "VOXLOG_DEFAULT_ENGINE": "bench-sleep"}
WEBHOOKS = {"VOXLOG_WEBHOOK_SIGNING_KEY": "w" * 32, "VOXLOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}


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


async def registered(client: httpx.AsyncClient, url: str) -> str:
    """An endpoint for job.completed, once the projection lists it; its secret."""
    created = await client.post("/v1/webhooks", json={"url": url, "event_types": ["job.completed"]})
    assert created.status_code == 201, created.text
    endpoint = created.json()["endpoint"]["endpoint_id"]
    deadline = time.monotonic() + 30
    while (await client.get(f"/v1/webhooks/{endpoint}")).status_code != 200:
        assert time.monotonic() < deadline, "the endpoint was not listed within 30 s"
        await asyncio.sleep(0.2)
    return str(created.json()["secret"])


@pytest.mark.slow
async def test_a_webhook_is_signed_retried_after_a_500_and_after_the_delivery_process_is_killed(apps):
    app, voices = await start_pipeline(apps, **BENCH, **WEBHOOKS)
    app.start("deliver", ["deliver"], WEBHOOKS)
    # The first job's delivery: answered 500, then 204. The second's: held by the endpoint while the
    # delivery process is SIGKILLed, then answered 204 to the new process's attempt.
    with Receiver([500, 204, None]) as receiver:
        async with httpx.AsyncClient(base_url=app.api, timeout=60, headers=app.headers) as client:
            secret = await registered(client, receiver.url)
            first = (await client.post("/v1/jobs", json={"text": "Call me back.", "voice": voices[0]})).json()
            assert (await wait_ended(client, f"/v1/jobs/{first['job_id']}"))["state"] == "completed"
            retried = await asyncio.to_thread(receiver.wait_for, 2)
            second = (await client.post("/v1/jobs", json={"text": "Call me again.", "voice": voices[0]})).json()
            held = await asyncio.to_thread(receiver.wait_for, 3)
            pid = app.processes.pid("deliver")
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            app.start("deliver-2", ["deliver"], WEBHOOKS)
            again = await asyncio.to_thread(receiver.wait_for, 4, 120.0)

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
