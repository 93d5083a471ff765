"""One attempt of a webhook delivery (consumers.webhook_sender): signed as Standard Webhooks verifies, sent to
the address that was judged (the host in Host and TLS's server name), no redirect followed, and every outcome
said."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid

import httpx
import pytest
import standardwebhooks

from consumers.webhook_sender import Sender, signed_headers
from contracts.webhook_signatures import endpoint_secret
from foundation.outbound import parse_networks

pytestmark = pytest.mark.unit
SECRET = endpoint_secret(b"k" * 32, uuid.UUID(int=1), 1)
ROTATED = endpoint_secret(b"k" * 32, uuid.UUID(int=1), 2)


def headers(body: bytes, *secrets: str) -> dict[str, str]:
    return signed_headers(
        secrets or (SECRET,), "msg_1", int(time.time()), body, "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    )


async def test_a_delivery_is_pinned_to_the_judged_address_and_verifies_with_every_secret_in_force(monkeypatch):
    async def resolves(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.215.14", port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolves)
    seen: list[httpx.Request] = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    sender = Sender(transport=httpx.MockTransport(endpoint))
    body = json.dumps({"type": "job.completed"}).encode()
    try:
        attempted = await sender.send("https://hooks.example.com/in?x=1", body, headers(body, SECRET, ROTATED))
    finally:
        await sender.close()
    assert attempted.delivered
    assert attempted.status == 204
    (request,) = seen
    assert str(request.url) == "https://93.184.215.14/in?x=1", "connected to the address judged"
    assert request.headers["host"] == "hooks.example.com"
    assert request.extensions["sni_hostname"] == "hooks.example.com"
    assert request.headers["traceparent"].startswith("00-" + "a" * 32)
    for secret in (SECRET, ROTATED):  # either secret verifies while both are in force
        assert standardwebhooks.Webhook(secret).verify(request.content, dict(request.headers)) == {
            "type": "job.completed"
        }


@pytest.mark.parametrize(
    ("answer", "says", "retry_after"),
    [
        (httpx.Response(500, text="boom"), "answered 500: boom", None),
        (httpx.Response(429, headers={"Retry-After": "30"}), "answered 429", 30.0),
        (httpx.Response(302, headers={"Location": "http://169.254.169.254/"}), "answered 302", None),
    ],
)
async def test_an_answer_that_is_not_2xx_is_a_failed_attempt_saying_what_came(answer, says, retry_after):
    sender = Sender(parse_networks("127.0.0.0/8"), transport=httpx.MockTransport(lambda request: answer))
    try:
        attempted = await sender.send("http://127.0.0.1:9000/hook", b"{}", headers(b"{}"))
    finally:
        await sender.close()
    assert not attempted.delivered
    assert attempted.status == answer.status_code
    assert says in attempted.error
    assert attempted.retry_after_s == retry_after


async def test_regression_an_unsafe_address_at_delivery_is_refused_without_a_request():
    asked: list[httpx.Request] = []
    sender = Sender(transport=httpx.MockTransport(lambda request: asked.append(request) or httpx.Response(200)))
    try:
        attempted = await sender.send("https://169.254.169.254/latest/meta-data/", b"{}", headers(b"{}"))
        unreachable = Sender(parse_networks("127.0.0.0/8"), transport=httpx.MockTransport(_refuse))
        failed = await unreachable.send("http://127.0.0.1:9/hook", b"{}", headers(b"{}"))
        await unreachable.close()
    finally:
        await sender.close()
    assert (attempted.delivered, attempted.status) == (False, None)
    assert attempted.error.startswith("refused: ")
    assert asked == []
    assert (failed.delivered, failed.status) == (False, None)
    assert "ConnectError" in failed.error


def _refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)
