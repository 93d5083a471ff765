"""Tenants on real processes: every route of the live OpenAPI document hides one tenant's jobs from another,
the official openai client needs a key, usage is what the log says, and two API instances share their
revocations, rate limits and quotas."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
import pytest
import soundfile as sf

from contracts import (
    JobQueued,
    Producer,
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    decode_event,
    node_event,
    utc_now,
)
from foundation.kafka import KafkaEventPublisher
from tests.support.apps import AppStack, bearer, create_key, key_row, start_pipeline, until_key, wait_ended
from tests.support.cli import voxlog
from tests.support.kafka import read_to_end
from tests.support.stack import free_port

AUTH = {"VOXLOG_AUTH": "on", "VOXLOG_AUTH_CACHE_S": "1"}
WEBHOOKS = {"VOXLOG_WEBHOOK_SIGNING_KEY": "k" * 32, "VOXLOG_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
NOT_OWNED = {
    ("POST", "/v1/jobs"),
    ("POST", "/v1/batches"),
    ("POST", "/v1/documents"),
    ("POST", "/v1/audio/speech"),
    ("POST", "/dev/captioned_speech"),
    ("GET", "/v1/voices"),
    ("GET", "/v1/usage"),
    ("POST", "/v1/webhooks"),
    ("GET", "/v1/webhooks"),
    ("GET", "/v1/lag"),
    ("GET", "/v1/dashboard"),
    ("GET", "/metrics"),
    ("GET", "/v1/admin/cache-only"),
    ("POST", "/v1/admin/cache-only"),
    ("POST", "/v1/admin/cache/purge"),
    ("GET", "/v1/admin/degraded"),
    ("POST", "/v1/admin/degraded"),
    ("GET", "/v1/lexicon"),
    ("PUT", "/v1/lexicon/{word}"),
    ("DELETE", "/v1/lexicon/{word}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
}
"""Routes that name no job or document of a tenant's: submissions, the caller's own figures, operators' and
public ones. Every other route of the live document must be shown to hide another tenant's."""


def concrete(path: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace(f"{{{name}}}", value)
    return path.replace("{index}", "0")


def owned_routes(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """Each route that names a tenant's job or document, with the query variants it takes (as_of)."""
    routes, unclassified = [], []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            method = method.upper()
            owned = any(f"{{{name}}}" in path for name in ("job_id", "document_id", "endpoint_id"))
            if owned and (method, path) not in NOT_OWNED:
                routes.append((method, path, {}))
                if any(p["name"] == "as_of" for p in operation.get("parameters", [])):
                    routes.append((method, path, {"as_of": "2100-01-01T00:00:00Z"}))
            elif (method, path) not in NOT_OWNED:
                unclassified.append((method, path))
    assert not unclassified, f"classify these routes in NOT_OWNED or give them an owned id: {unclassified}"
    return routes


async def test_one_tenants_jobs_are_invisible_to_another_on_every_route_of_the_live_openapi_document(apps, topics):
    app, voices = await start_pipeline(apps, **AUTH, **WEBHOOKS)
    alice, bob = await create_key(app, "alice"), await create_key(app, "bob")
    text = "Tenants keep their own jobs."
    async with (
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=bearer(alice)) as a,
        httpx.AsyncClient(base_url=app.api, timeout=60, headers=bearer(bob)) as b,
    ):
        job = (await a.post("/v1/jobs", json={"text": text, "voice": voices[0]})).json()["job_id"]
        posted = await a.post("/v1/documents", json={"text": "# One\n\nFirst part.\n\n# Two\n\nSecond part.",
                                                      "voice": voices[0]})  # fmt: skip
        assert posted.status_code == 202, posted.text
        document = posted.json()["document_id"]
        assert (await wait_ended(a, f"/v1/jobs/{job}"))["state"] == "completed"
        assert (await wait_ended(a, f"/v1/documents/{document}"))["state"] == "completed"
        hook = await a.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hook", "event_types": ["job.failed"]})
        assert hook.status_code == 201, hook.text
        endpoint = hook.json()["endpoint"]["endpoint_id"]
        await _listed(a, endpoint)
        delivery = await _delivered(topics, a, endpoint, job)
        mine = {"job_id": job, "document_id": document, "endpoint_id": endpoint, "delivery_id": delivery}
        nobody = {name: str(uuid.uuid4()) for name in mine}
        assert (await b.get("/v1/webhooks")).json()["endpoints"] == [], "bob's list holds none of alice's"

        schema = (await httpx.AsyncClient(base_url=app.api).get("/schema/openapi.json")).json()
        routes = owned_routes(schema)
        assert len(routes) >= 11, routes
        for method, path, params in routes:
            if method == "DELETE":
                continue  # tried by bob below, after every read
            answer = await a.request(method, concrete(path, mine), params=params)
            ok = 202 if path.endswith("/redeliver") else 200  # a redelivery is recorded, then done
            assert answer.status_code == ok, (method, path, params, answer.text[:300])
            theirs = await b.request(method, concrete(path, mine), params=params)
            unknown = await b.request(method, concrete(path, nobody), params=params)
            assert theirs.status_code == unknown.status_code == 404, (method, path, theirs.text[:300])
            assert _without(theirs.text, mine) == _without(unknown.text, nobody), (method, path)
        for method, path, params in routes:
            if method == "DELETE":
                refused = await b.request(method, concrete(path, mine), params=params)
                assert refused.status_code == 404, (path, refused.text)
        assert (await a.get(f"/v1/jobs/{job}")).json()["state"] == "completed"
        assert (await a.get(f"/v1/documents/{document}")).json()["state"] == "completed"

        # The same request by bob coalesces onto alice's synthesis, and tells bob nothing of alice's job.
        cached = await b.post("/v1/jobs", json={"text": text, "voice": voices[0]})
        assert cached.status_code == 200, cached.text
        assert cached.json()["job_id"] != job
        bobs_job = cached.json()["job_id"]
        assert (await wait_ended(b, f"/v1/jobs/{bobs_job}"))["state"] == "completed"  # once projected
        assert (await b.get(f"/v1/jobs/{bobs_job}/audio")).status_code == 200
        # Every answer about bob's job, on every route of the live document (the history, as_of, the SSE
        # stream and the captions among them): every field of each, nothing of alice's (issue 40, item 3).
        bobs_routes = [(m, p, q) for m, p, q in routes if m == "GET" and "{job_id}" in p]
        assert {"/v1/jobs/{job_id}", "/v1/jobs/{job_id}/events", "/v1/jobs/{job_id}/captions"} <= {
            p for _, p, _ in bobs_routes
        }, bobs_routes
        as_of_now = {"as_of": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
        for _, path, params in [*bobs_routes, ("GET", "/v1/jobs/{job_id}", as_of_now)]:
            answer = await b.get(concrete(path, {"job_id": bobs_job}), params=params)
            assert answer.status_code == 200, (path, params, answer.text[:300])
            for alices in (job, document, "alice"):
                assert alices not in answer.text, (path, params, alices, answer.text[:600])
        sse = await b.post("/v1/audio/speech", json={"model": "tts-1", "input": text, "voice": voices[0],
                                                      "response_format": "wav", "stream_format": "sse"})  # fmt: skip
        assert sse.status_code == 200, sse.text[:300]
        assert "speech.audio.done" in sse.text
        for alices in (job, document, "alice"):
            assert alices not in sse.text, alices
        history = (await b.get(f"/v1/jobs/{bobs_job}/events")).json()
        assert history["tenant"] == "bob"
        assert history["reused_from"] is None, "a source of another tenant's is not named"
        for operator_route in (
            "/v1/lag",
            "/v1/dashboard",
            "/metrics",
            "/v1/admin/cache-only",
            "/v1/admin/degraded",
            "/v1/lexicon",
        ):
            assert (await b.get(operator_route)).status_code == 403, operator_route
        assert (await b.post("/v1/admin/cache/purge", json={"all": True})).status_code == 403
        assert (await b.put("/v1/lexicon/tomato", json={"phonemes": "tomato"})).status_code == 403

        # The official openai client: with a key it speaks, without one it is refused.
        keyed = openai.AsyncOpenAI(base_url=f"{app.api}/v1", api_key=alice, max_retries=0, timeout=180)
        wav = await keyed.audio.speech.create(model="tts-1", voice="alloy", input="With a key.", response_format="wav")
        samples, rate = sf.read(io.BytesIO(wav.content), dtype="float32")
        assert rate == 24000
        assert len(samples) > 2400
        anonymous = openai.AsyncOpenAI(base_url=f"{app.api}/v1", api_key="sk-anything", max_retries=0, timeout=60)
        with pytest.raises(openai.AuthenticationError):
            await anonymous.audio.speech.create(model="tts-1", voice="alloy", input="No key.", response_format="wav")

        # Usage is the log's: what each tenant queued, counted from the jobs topic, is what /v1/usage says.
        records = await read_to_end(app.kafka, app.env["VOXLOG_JOBS_TOPIC"])
        queued = [e for e in (decode_event(r.value) for r in records) if isinstance(e, JobQueued)]
        expected = {t: (sum(1 for e in queued if e.payload.tenant == t),
                        sum(len(e.payload.request.text) for e in queued if e.payload.tenant == t))
                    for t in ("alice", "bob")}  # fmt: skip
        parts = posted.json()["parts"]
        assert expected["alice"][0] == 2 + parts, "a job, each of the document's parts, and the openai client's"
        async with httpx.AsyncClient(base_url=app.api, timeout=60, headers=app.headers) as ops:
            usage = await _usage_when(ops, expected)
    bob_total = next(t for t in usage["totals"] if t["tenant"] == "bob")
    assert bob_total["syntheses"] == 0
    assert bob_total["audio_s_reused"] > 0, "bob's audio came from alice's synthesis"
    replayed = await asyncio.to_thread(voxlog, app.env, "replay", "--into", f"r_{uuid.uuid4().hex[:12]}", "--verify")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "no difference" in replayed.stdout, "usage_daily, like every table, is what a replay of the log gives"


async def _listed(client: httpx.AsyncClient, endpoint: str, within_s: float = 30.0) -> None:
    """Poll until the projector has applied the endpoint's registration."""
    deadline = time.monotonic() + within_s
    while (await client.get(f"/v1/webhooks/{endpoint}")).status_code != 200:
        assert time.monotonic() < deadline, f"endpoint {endpoint} not listed within {within_s} s"
        await asyncio.sleep(0.2)


async def _delivered(topics: Any, client: httpx.AsyncClient, endpoint: str, job: str, within_s: float = 30.0) -> str:
    """A delivery to the endpoint, recorded on the control topic as the delivery process records one it gave up
    (so that its owner may redeliver it), once the projector has applied it; its id."""
    payload = WebhookDeliveryRecordedPayload(
        delivery_id=uuid.uuid4(), endpoint_id=uuid.UUID(endpoint), tenant="alice", event_type="job.failed",
        job_id=uuid.UUID(job), body=json.dumps({"type": "job.failed", "data": {"job_id": job}}),
        created_at=utc_now(), state="given_up", attempts=1, last_error="connection refused",
    )  # fmt: skip
    async with KafkaEventPublisher(topics.kafka, topics.settings.control_topic) as nodes:
        await nodes.publish(node_event(WebhookDeliveryRecorded, Producer(service="test", instance="e2e"), payload))
    deadline = time.monotonic() + within_s
    while not (await client.get(f"/v1/webhooks/{endpoint}/deliveries")).json()["deliveries"]:
        assert time.monotonic() < deadline, f"delivery {payload.delivery_id} not listed within {within_s} s"
        await asyncio.sleep(0.2)
    return str(payload.delivery_id)


def _without(text: str, ids: dict[str, str]) -> str:
    for value in ids.values():
        text = text.replace(value, "ID")
    return text


async def _usage_when(ops: httpx.AsyncClient, expected: dict[str, tuple[int, int]]) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    seen: Any = None
    while time.monotonic() < deadline:
        seen = (await ops.get("/v1/usage", params={"tenant": "*"})).json()
        totals = {t["tenant"]: (t["requests"], t["chars"]) for t in seen["totals"]}
        if all(totals.get(t) == figures for t, figures in expected.items()):
            return dict(seen)
        await asyncio.sleep(0.3)
    raise AssertionError(f"usage {seen} never matched the log's {expected}")


LIMITS = json.dumps(
    {
        "metered": {"rate_per_s": 0.001, "rate_burst": 4},
        "quota": {"chars_per_day": 100, "max_live_jobs": 3},
    }
)


async def test_two_api_instances_share_revocations_rate_limits_and_quotas(apps):
    app, voices = await start_pipeline(apps, **AUTH, VOXLOG_TENANT_LIMITS=LIMITS)
    second = app.start_api("api-2", free_port())
    await app.wait_ready()
    apis = [app.api, second]
    metered, quota, revoked = [await create_key(app, tenant) for tenant in ("metered", "quota", "revoked")]
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for url in apis]
    try:
        await _rate_is_shared(clients, metered)
        await _live_jobs_and_quota_are_shared(app, clients, quota, voices[0])
        await _revocation_reaches_both(app, clients, revoked)
    finally:
        for client in clients:
            await client.aclose()


async def _rate_is_shared(clients: list[httpx.AsyncClient], key: str) -> None:
    answers = [await clients[i % 2].get("/v1/voices", headers=bearer(key)) for i in range(8)]
    assert sorted(a.status_code for a in answers) == [200] * 4 + [429] * 4, "a burst of 4 over both APIs"
    refused = next(a for a in answers if a.status_code == 429)
    assert int(refused.headers["Retry-After"]) >= 1
    assert refused.headers["RateLimit-Policy"].startswith('"requests";q=4;')
    assert refused.headers["RateLimit"].startswith('"requests";r=0;')


async def _live_jobs_and_quota_are_shared(
    app: AppStack, clients: list[httpx.AsyncClient], key: str, voice: str
) -> None:
    one, two = clients
    headers = bearer(key)

    def batch(*texts: str) -> dict[str, Any]:
        return {"requests": [{"text": t, "voice": voice} for t in texts]}

    worker = app.processes.pid("worker-0")
    assert worker is not None
    os.kill(worker, signal.SIGSTOP)  # the gate: the worker takes nothing, so every job stays live
    try:
        first = await one.post("/v1/batches", json=batch("One chars.", "Two chars."), headers=headers)
        assert first.status_code == 202, first.text
        over = await two.post("/v1/batches", json=batch("Red chars.", "Tan chars."), headers=headers)
        assert over.status_code == 429, over.text
        assert "has 2 jobs queued or running and this submission adds 2" in over.json()["detail"]
        assert over.headers["RateLimit-Policy"].startswith('"live-jobs";q=3;')
        third = await two.post("/v1/jobs", json={"text": "Six chars.", "voice": voice}, headers=headers)
        assert third.status_code == 202, third.text
    finally:
        os.kill(worker, signal.SIGCONT)
    for job in [*(j["job_id"] for j in first.json()["jobs"]), third.json()["job_id"]]:
        assert await _done(one, job, headers), f"job {job} did not complete once the worker went on"

    forty = [f"Forty characters of text, said at {hour}." for hour in ("night", "eight", "seven", "three")]
    assert {len(t) for t in forty} == {40}
    whole = await one.post("/v1/batches", json=batch(forty[0], forty[1]), headers=headers)
    assert whole.status_code == 429, whole.text
    assert "tenant quota has 30 characters today (UTC) and this submission adds 80" in whole.json()["detail"]
    assert whole.headers["RateLimit-Policy"].startswith('"chars-day";q=100;w=86400;qu="characters"')
    assert int(whole.headers["Retry-After"]) >= 1
    taken = await two.post("/v1/jobs", json={"text": forty[2], "voice": voice}, headers=headers)
    assert taken.status_code == 202, taken.text
    last = await one.post("/v1/jobs", json={"text": forty[3], "voice": voice}, headers=headers)
    assert last.status_code == 429, "the other API's admission counts before the projector shows it"
    assert "has 70 characters today" in last.json()["detail"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        usage = (await one.get("/v1/usage", headers=headers)).json()["totals"]
        if usage and (usage[0]["requests"], usage[0]["chars"]) == (4, 70):
            break
        await asyncio.sleep(0.3)
    else:
        raise AssertionError(f"usage {usage}: nothing refused may be recorded")


async def _done(client: httpx.AsyncClient, job: str, headers: dict[str, str]) -> bool:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        answer = await client.get(f"/v1/jobs/{job}", headers=headers)
        if answer.status_code == 200 and answer.json()["state"] == "completed":
            return True
        await asyncio.sleep(0.3)
    return False


async def _revocation_reaches_both(app: AppStack, clients: list[httpx.AsyncClient], key: str) -> None:
    key_id = key.split("_")[1]
    for client in clients:
        assert (await client.get("/v1/voices", headers=bearer(key))).status_code == 200
    revoked = await asyncio.to_thread(voxlog, app.env, "keys", "revoke", key_id, "--reason", "leaked")
    assert revoked.returncode == 0, revoked.stdout + revoked.stderr
    await until_key(app, key_id, lambda row: row is not None and row["revoked_at"] is not None, "revoked")
    projected = time.monotonic()
    bound = float(AUTH["VOXLOG_AUTH_CACHE_S"])
    refused_after: dict[int, float] = {}
    while len(refused_after) < 2 and time.monotonic() - projected < bound + 10:
        for i, client in enumerate(clients):
            if i not in refused_after:
                answer = await client.get("/v1/voices", headers=bearer(key))
                if answer.status_code == 401:
                    assert "was revoked" in answer.json()["detail"]
                    refused_after[i] = time.monotonic() - projected
        await asyncio.sleep(0.1)
    assert sorted(refused_after) == [0, 1], f"refused by {sorted(refused_after)} only"
    print(f"revocation refused {refused_after} s after the projector applied it (bound {bound} s)")
    assert (await key_row(app, key_id))["revoke_reason"] == "leaked"  # type: ignore[index]
