"""API keys at the door (producers.auth, producers.api_keys) on fakes: who is let in, with which answer,
what a tenant may see of another's, and the rate headers every keyed answer carries."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import pytest

from contracts import JobQueued
from foundation.settings import ApiSettings
from producers.api_keys import NewKey, StoredKey, new_key
from producers.app import create_app
from producers.auth import KeyBook
from producers.limits_ledger import Bucket
from producers.rate_limit import RateLimiter
from producers.tenant_limits import Policies, TenantLimits
from projections.errors import ProjectionUnavailable
from projections.reads.rows import UsageRow
from tests.support.api_fakes import Log, Reader, client, deps
from voxlog.composition.api import server_config

pytestmark = pytest.mark.unit

TEXT = {"text": "Hello there.", "voice": "af_heart"}


class Keys:
    """The projection's api_keys; ``down`` makes it unreadable; ``reads`` counts what was read."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredKey] = {}
        self.down = False
        self.reads = 0

    def issue(self, tenant: str, *scopes: str, **changes: object) -> NewKey:
        key = new_key()
        stored = StoredKey(key.key_id, tenant, frozenset(scopes), key.secret_sha256, None, None)
        self.rows[key.key_id] = replace(stored, **changes)  # type: ignore[arg-type]
        return key

    async def api_key(self, key_id: str) -> StoredKey | None:
        self.reads += 1
        if self.down:
            raise ProjectionUnavailable("cannot read an API key from PostgreSQL")
        return self.rows.get(key_id)


def bearer(key: NewKey) -> dict[str, str]:
    return {"Authorization": f"Bearer {key.token}"}


def api(keys: Keys, reader: Reader | None = None, log: Log | None = None, **fields: object):
    return client(
        deps(reader or Reader(), log or Log(), keys=KeyBook(keys, cache_s=0, failures_per_minute=3), **fields)
    )


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({}, "this route needs an API key: send Authorization: Bearer <key> or X-API-Key: <key>"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "this route needs an API key"),
        ({"Authorization": "Bearer nope"}, "the API key is malformed: a key looks like vxl_<12 hex digits>_<43"),
        ({"X-API-Key": "vxl_0123456789ab_" + "A" * 43}, "API key 0123456789ab is not valid"),
    ],
)
async def test_no_key_or_a_bad_one_is_a_401_that_says_which(headers, says):
    async with api(Keys()) as http:
        answer = await http.get("/v1/voices", headers=headers)
    assert answer.status_code == 401
    assert says in answer.json()["detail"]
    assert answer.headers["WWW-Authenticate"] == 'Bearer realm="voxlog"'


async def test_a_wrong_secret_answers_as_an_unknown_key_and_revoked_and_expired_keys_say_so():
    keys = Keys()
    good = keys.issue("acme", "read")
    forged = NewKey(good.key_id, new_key().secret)
    revoked = keys.issue("acme", "read", revoked_at=datetime(2026, 1, 1, tzinfo=UTC))
    expired = keys.issue("acme", "read", expires_at=datetime.now(UTC) - timedelta(seconds=1))
    async with api(keys) as http:
        assert (await http.get("/v1/voices", headers=bearer(good))).status_code == 200
        wrong = await http.get("/v1/voices", headers=bearer(forged))
        gone = await http.get("/v1/voices", headers=bearer(revoked))
        late = await http.get("/v1/voices", headers={"X-API-Key": expired.token})
    assert wrong.json()["detail"] == f"API key {good.key_id} is not valid"
    assert gone.status_code == 401
    assert "was revoked at 2026-01-01" in gone.json()["detail"]
    assert late.status_code == 401
    assert "expired at" in late.json()["detail"]
    assert good.secret not in wrong.text


async def test_a_key_without_the_routes_scope_is_a_403_naming_it():
    keys = Keys()
    reader_only = keys.issue("acme", "read")
    async with api(keys) as http:
        answer = await http.post("/v1/jobs", json=TEXT, headers=bearer(reader_only))
        lag = await http.get("/v1/lag", headers=bearer(reader_only))
    assert answer.status_code == 403
    assert answer.json()["detail"] == (
        f"API key {reader_only.key_id} lacks the 'submit' scope this route needs (it has: read)"
    )
    assert lag.status_code == 403
    assert "'operator'" in lag.json()["detail"]


async def test_health_readiness_the_schema_and_the_dashboards_page_need_no_key():
    async with api(Keys()) as http:
        for path in ("/healthz", "/readyz", "/schema/openapi.json", "/dashboard"):
            assert (await http.get(path)).status_code == 200, path


async def test_regression_v1_dashboard_matched_the_pages_exclusion_and_answered_500():
    """The dashboard page's exclusion (``/dashboard$``) matched /v1/dashboard too: no principal was set, and
    its operator guard raised a 500. Anchored now, the data needs a key."""
    async with api(Keys()) as http:
        assert (await http.get("/v1/dashboard")).status_code == 401
        assert (await http.get("/v1/healthz-and-more")).status_code in {401, 404}


async def test_malformed_keys_from_one_address_are_refused_past_the_limit():
    async with api(Keys()) as http:
        for _ in range(3):
            assert (await http.get("/v1/voices", headers={"X-API-Key": "bad"})).status_code == 401
        refused = await http.get("/v1/voices", headers={"X-API-Key": "bad"})
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("too many failed authentications with malformed keys from 127.0.0.1")
    assert int(refused.headers["Retry-After"]) >= 1


async def test_one_clients_bad_keys_do_not_lock_out_other_clients_behind_one_proxy():
    """Issue 40, item 7: failures were counted per peer address and judged before the key, so behind a load
    balancer (every client one address) one client's bad keys answered every other client 429 for a minute.
    Here every request comes from one address, as through a proxy the API does not trust."""
    keys = Keys()
    mallory, alice, bob = keys.issue("m", "read"), keys.issue("acme", "read"), keys.issue("beta", "read")
    forged = {"X-API-Key": NewKey(mallory.key_id, new_key().secret).token}
    unknown = {"X-API-Key": "vxl_0123456789ab_" + "A" * 43}
    async with api(keys) as http:
        for _ in range(3):
            for bad in ({"X-API-Key": "bad"}, forged, unknown):
                assert (await http.get("/v1/voices", headers=bad)).status_code == 401
        for bad in ({"X-API-Key": "bad"}, forged, unknown):
            assert (await http.get("/v1/voices", headers=bad)).status_code == 429, bad
        assert (await http.get("/v1/voices", headers=bearer(alice))).status_code == 200
        bobs_typo = await http.get("/v1/voices", headers=bearer(NewKey(bob.key_id, new_key().secret)))
        assert (await http.get("/v1/voices", headers=bearer(mallory))).status_code == 200, "her good key too"
    assert bobs_typo.status_code == 401, "bob's own key id has its own count"


async def test_a_key_that_verifies_is_never_refused_by_the_failure_limit():
    keys = Keys()
    key = keys.issue("acme", "read")
    forged = bearer(NewKey(key.key_id, new_key().secret))
    async with api(keys) as http:
        for _ in range(3):
            assert (await http.get("/v1/voices", headers=forged)).status_code == 401
            assert (await http.get("/v1/voices", headers={"X-API-Key": "bad"})).status_code == 401
        reads = keys.reads
        refused = await http.get("/v1/voices", headers=forged)
        assert refused.status_code == 429
        assert keys.reads == reads, "past the limit a wrong secret is judged by what was read, not read again"
        assert (await http.get("/v1/voices", headers=bearer(key))).status_code == 200
        # A key tried before it was projected (read as unknown), past the limit, is read again once issued.
        late = new_key()
        for _ in range(4):
            await http.get("/v1/voices", headers=bearer(late))
        keys.rows[late.key_id] = StoredKey(late.key_id, "acme", frozenset({"read"}), late.secret_sha256, None, None)
        assert (await http.get("/v1/voices", headers=bearer(late))).status_code == 200


async def test_the_failure_map_of_the_api_is_bounded_by_its_setting():
    book = KeyBook(Keys(), cache_s=0, failures_per_minute=3, failure_entries=50)
    async with client(deps(Reader(), keys=book)) as http:
        for i in range(200):
            answer = await http.get("/v1/voices", headers={"X-API-Key": f"vxl_{i:012x}_" + "A" * 43})
            assert answer.status_code == 401
    assert len(book._failures) == 50


async def test_forwarded_for_is_trusted_only_from_trusted_proxies():
    """The client address is X-Forwarded-For's only from a peer in VOXLOG_TRUSTED_PROXIES (uvicorn's
    forwarded-allow-ips, as the API process serves the app), else the peer's own, even from 127.0.0.1."""
    ingress, direct = "10.0.0.5", "192.0.2.9"

    async def fail_until_refused(http: httpx.AsyncClient, forwarded: list[str]) -> httpx.Response:
        answers = [await http.get("/v1/voices", headers={"X-API-Key": "bad", "X-Forwarded-For": f}) for f in forwarded]
        assert [a.status_code for a in answers[:-1]] == [401] * (len(answers) - 1)
        return answers[-1]

    async with served(Keys(), "10.0.0.0/8, 2001:db8::/32", ingress) as (proxied, peer):
        one = ["198.51.100.7"] * 3 + ["203.0.113.1, 198.51.100.7"]  # the proxy appends the address it saw
        refused = await fail_until_refused(proxied, one)
        assert refused.status_code == 429
        assert "from 198.51.100.7:" in refused.json()["detail"]
        assert (await fail_until_refused(proxied, ["198.51.100.8"])).status_code == 401, "another client"
        spoofed = await fail_until_refused(peer(direct), [f"198.51.100.{i}" for i in range(20, 24)])
        assert spoofed.status_code == 429
        assert f"from {direct}:" in spoofed.json()["detail"], "an untrusted peer's header is ignored"
    async with served(Keys(), "", "127.0.0.1") as (local, _):
        refused = await fail_until_refused(local, [f"198.51.100.{i}" for i in range(30, 34)])
    assert refused.status_code == 429
    assert "from 127.0.0.1:" in refused.json()["detail"], "none trusted: not even uvicorn's default 127.0.0.1"


@asynccontextmanager
async def served(keys: Keys, trusted: str, peer: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    """A client of the app as the API process serves it (voxlog.composition.api.server_config), connecting
    from ``peer``; and a maker of clients connecting from another address."""
    app = create_app(deps(Reader(), keys=KeyBook(keys, cache_s=0, failures_per_minute=3)))
    config = server_config(app, ApiSettings(trusted_proxies=trusted))
    config.load()
    opened: list[httpx.AsyncClient] = []

    def from_(address: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=config.loaded_app, client=(address, 40000))
        opened.append(httpx.AsyncClient(transport=transport, base_url="http://api"))
        return opened[-1]

    try:
        yield from_(peer), from_
    finally:
        for http in opened:
            await http.aclose()


async def test_another_tenants_job_is_unknown_on_every_route_exactly_as_no_job():
    keys, reader, log = Keys(), Reader(), Log()
    alice, bob = keys.issue("alice", "submit", "read"), keys.issue("bob", "submit", "read")
    async with api(keys, reader, log) as http:
        submitted = await http.post("/v1/jobs", json=TEXT, headers=bearer(alice))
        assert submitted.status_code == 202, submitted.text
        (queued,) = [e for e in log.published if isinstance(e, JobQueued)]
        assert queued.payload.tenant == "alice"
        assert queued.payload.key_id == alice.key_id
        reader.project(queued)
        job, nobody = queued.job_id, uuid.uuid4()
        for path in ("/v1/jobs/{}", "/v1/jobs/{}/audio"):
            mine = await http.get(path.format(job), headers=bearer(alice))
            theirs = await http.get(path.format(job), headers=bearer(bob))
            unknown = await http.get(path.format(nobody), headers=bearer(bob))
            assert mine.status_code != 404, path
            assert theirs.status_code == unknown.status_code == 404, path
            assert theirs.text.replace(str(job), "ID") == unknown.text.replace(str(nobody), "ID"), path
        cancel = await http.delete(f"/v1/jobs/{job}", headers=bearer(bob))
    assert cancel.status_code == 404
    assert not [e for e in log.published if e.type == "JobCancelled"], "nothing was cancelled"


async def test_the_same_idempotency_key_of_two_tenants_names_two_jobs():
    keys, log = Keys(), Log()
    alice, bob = keys.issue("alice", "submit", "read"), keys.issue("bob", "submit", "read")
    async with api(keys, Reader(), log) as http:
        a = await http.post("/v1/jobs", json=TEXT, headers={**bearer(alice), "Idempotency-Key": "k1"})
        b = await http.post("/v1/jobs", json=TEXT, headers={**bearer(bob), "Idempotency-Key": "k1"})
    assert a.status_code == b.status_code == 202
    assert a.json()["job_id"] != b.json()["job_id"]


async def test_a_revocation_is_seen_once_what_was_read_of_the_key_is_older_than_the_cache():
    keys = Keys()
    key = keys.issue("acme", "read")
    book = KeyBook(keys, cache_s=3600)
    async with client(deps(Reader(), keys=book)) as http:
        assert (await http.get("/v1/voices", headers=bearer(key))).status_code == 200
        keys.rows[key.key_id] = replace(keys.rows[key.key_id], revoked_at=datetime.now(UTC))
        assert (await http.get("/v1/voices", headers=bearer(key))).status_code == 200, "within the cache's bound"
        keys.down = True  # and while PostgreSQL is down, a key read before is judged by what was read
        assert (await http.get("/v1/voices", headers=bearer(key))).status_code == 200
    assert keys.reads == 1
    async with client(deps(Reader(), keys=KeyBook(keys, cache_s=0))) as http:
        keys.down = False
        assert (await http.get("/v1/voices", headers=bearer(key))).status_code == 401
        keys.down = True
        never_read = keys.issue("acme", "read")
        assert (await http.get("/v1/voices", headers=bearer(never_read))).status_code == 503


class Buckets:
    def __init__(self, *answers: Bucket) -> None:
        self.answers = list(answers)

    async def take(self, key_id: str, rate_per_s: float, burst: int) -> Bucket:
        return self.answers.pop(0)


async def test_every_keyed_answer_says_where_its_rate_stands_and_an_empty_bucket_is_a_429():
    keys = Keys()
    key = keys.issue("acme", "read")
    limiter = RateLimiter(Buckets(Bucket(True, 9.0), Bucket(False, 0.0)), Policies(TenantLimits(rate_per_s=1), {}))
    async with api(keys, limiter=limiter) as http:
        taken = await http.get("/v1/voices", headers=bearer(key))
        refused = await http.get("/v1/voices", headers=bearer(key))
        health = await http.get("/healthz")
    assert taken.status_code == 200
    assert taken.headers["RateLimit-Policy"] == '"requests";q=40;w=40;qu="requests"'
    assert taken.headers["RateLimit"] == '"requests";r=9;t=31'
    assert refused.status_code == 429
    assert refused.headers["Retry-After"] == "1"
    assert refused.headers["RateLimit"].startswith('"requests";r=0;')
    assert "RateLimit" not in health.headers


async def test_usage_is_the_keys_own_tenants_unless_the_key_is_an_admins():
    keys, reader = Keys(), Reader()
    today = datetime.now(UTC).date()
    reader.usage_rows = [
        UsageRow(tenant="alice", day=today, requests=2, chars=30, syntheses=1, audio_ms_synthesized=1500,
                 audio_ms_reused=500),
        UsageRow(tenant="bob", day=today, requests=1, chars=7, syntheses=1, audio_ms_synthesized=900,
                 audio_ms_reused=0),
    ]  # fmt: skip
    alice, admin = keys.issue("alice", "read"), keys.issue("ops", "read", "admin")
    async with api(keys, reader, policies=Policies(TenantLimits(chars_per_day=500), {})) as http:
        own = (await http.get("/v1/usage", headers=bearer(alice))).json()
        other = await http.get("/v1/usage", params={"tenant": "bob"}, headers=bearer(alice))
        every = (await http.get("/v1/usage", params={"tenant": "*"}, headers=bearer(admin))).json()
        backwards = await http.get("/v1/usage", params={"since": "2026-02-01", "until": "2026-01-01"},
                                   headers=bearer(alice))  # fmt: skip
    assert own["tenant"] == "alice"
    assert [(d["tenant"], d["chars"], d["audio_s_reused"]) for d in own["days"]] == [("alice", 30, 0.5)]
    assert own["limits"]["chars_per_day"] == 500
    assert other.status_code == 403
    assert "admin scope" in other.json()["detail"]
    assert [t["tenant"] for t in every["totals"]] == ["alice", "bob"]
    assert every["limits"] is None
    assert backwards.status_code == 422
    assert date.fromisoformat(own["since"]) == today - timedelta(days=30)
