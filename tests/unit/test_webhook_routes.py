"""A tenant's webhook endpoints over HTTP (producers.webhook_routes, producers.webhooks; issue 39, item 1):
registered as events on the log, judged against SSRF before anything is recorded, listed per tenant, the
secret shown once and verifiable with the standardwebhooks library, rotated, removed.

The registry is the real one; its reads come from the real fold of what it published (an instant projector).
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
import standardwebhooks

from contracts import WebhookEndpointRemoved, WebhookEndpointSet
from contracts.webhook_signatures import signature
from foundation.outbound import parse_networks
from producers.auth import KeyBook
from producers.webhooks import MAX_ENDPOINTS, WebhookRegistry
from projections.accounts import webhook_event
from projections.rows import WebhookEndpointRow
from tests.support.api_fakes import PRODUCER, Log, Reader, client, deps
from tests.unit.test_auth import Keys, bearer

pytestmark = pytest.mark.unit
SIGNING_KEY = b"a server's signing key of at least thirty-two bytes"


class FoldedPool:
    """The projection's webhook_endpoints as the real fold makes it of what ``log`` took."""

    def __init__(self, log: Log) -> None:
        self.log = log

    def _rows(self) -> dict[uuid.UUID, WebhookEndpointRow]:
        rows: dict[uuid.UUID, WebhookEndpointRow] = {}
        for event in self.log.published:
            if isinstance(event, WebhookEndpointSet | WebhookEndpointRemoved):
                webhook_event(rows, event)
        return rows

    async def fetch(self, sql: str, tenant: str, **options: Any) -> list[dict[str, Any]]:
        live = [r for r in self._rows().values() if r.tenant == tenant and r.removed_at is None]
        return [vars(r) for r in sorted(live, key=lambda r: r.created_at)]

    async def fetchrow(self, sql: str, endpoint_id: uuid.UUID, tenant: str, **options: Any) -> dict[str, Any] | None:
        row = self._rows().get(endpoint_id)
        return vars(row) if row is not None and row.tenant == tenant else None


def api(signing_key: bytes = SIGNING_KEY, allowed: str = "") -> tuple[httpx.AsyncClient, Log, Keys]:
    log, keys = Log(), Keys()
    registry = WebhookRegistry(FoldedPool(log), log, PRODUCER, signing_key, parse_networks(allowed))  # type: ignore[arg-type]
    return client(deps(Reader(), Log(), keys=KeyBook(keys, cache_s=0), webhooks=registry)), log, keys


BODY = {"url": "https://93.184.215.14/hooks/voxlog", "event_types": ["job.completed", "job.failed"]}


async def test_an_endpoint_is_an_event_its_secret_is_shown_once_and_signs_as_standard_webhooks_verifies():
    http, log, keys = api()
    acme = bearer(keys.issue("acme", "submit", "read"))
    async with http:
        created = await http.post("/v1/webhooks", json={**BODY, "description": "billing"}, headers=acme)
        assert created.status_code == 201, created.text
        body = created.json()
        endpoint_id, secret = body["endpoint"]["endpoint_id"], body["secret"]
        listed = (await http.get("/v1/webhooks", headers=acme)).json()["endpoints"]
        one = await http.get(f"/v1/webhooks/{endpoint_id}", headers=acme)
    assert [e["endpoint_id"] for e in listed] == [endpoint_id]
    assert one.json()["event_types"] == ["job.completed", "job.failed"]
    assert secret not in one.text + str(listed), "the secret is in the registration's answer only"
    (recorded,) = log.published
    assert isinstance(recorded, WebhookEndpointSet)
    assert recorded.payload.tenant == "acme"
    assert secret not in recorded.model_dump_json(), "no secret is recorded on the log"
    payload, now = b'{"type":"job.completed"}', int(time.time())
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now),
               "webhook-signature": signature(secret, "msg_1", now, payload)}  # fmt: skip
    assert standardwebhooks.Webhook(secret).verify(payload, headers) == {"type": "job.completed"}


@pytest.mark.parametrize(
    "url",
    ["https://127.0.0.1/x", "https://169.254.169.254/latest/meta-data/", "https://10.0.0.5/", "http://93.184.215.14/"],
)
async def test_regression_an_ssrf_target_is_refused_at_registration_and_nothing_is_recorded(url):
    http, log, keys = api()
    async with http:
        refused = await http.post(
            "/v1/webhooks", json={**BODY, "url": url}, headers=bearer(keys.issue("acme", "submit"))
        )
    assert refused.status_code == 422, refused.text
    assert "url:" in refused.json()["detail"]
    assert log.published == []


async def test_an_operators_allowance_lets_a_receiver_on_loopback_in_over_http():
    http, _, keys = api(allowed="127.0.0.0/8")
    async with http:
        created = await http.post(
            "/v1/webhooks",
            json={**BODY, "url": "http://127.0.0.1:9000/hook"},
            headers=bearer(keys.issue("acme", "submit")),
        )
    assert created.status_code == 201, created.text


async def test_a_tenant_sees_and_removes_only_its_own_endpoints_and_a_retry_shows_the_same_secret():
    http, log, keys = api()
    acme, other = bearer(keys.issue("acme", "submit", "read")), bearer(keys.issue("globex", "submit", "read"))
    async with http:
        first = await http.post("/v1/webhooks", json=BODY, headers={**acme, "Idempotency-Key": "k1"})
        again = await http.post("/v1/webhooks", json=BODY, headers={**acme, "Idempotency-Key": "k1"})
        clash = await http.post(
            "/v1/webhooks", json={**BODY, "url": "https://93.184.215.15/"}, headers={**acme, "Idempotency-Key": "k1"}
        )
        endpoint_id = first.json()["endpoint"]["endpoint_id"]
        assert again.json()["endpoint"]["endpoint_id"] == endpoint_id
        assert again.json()["secret"] == first.json()["secret"], "a retried registration shows the same secret"
        assert clash.status_code == 409
        assert (await http.get("/v1/webhooks", headers=other)).json()["endpoints"] == []
        assert (await http.get(f"/v1/webhooks/{endpoint_id}", headers=other)).status_code == 404
        assert (await http.delete(f"/v1/webhooks/{endpoint_id}", headers=other)).status_code == 404
        assert (await http.post(f"/v1/webhooks/{endpoint_id}/rotate-secret", headers=other)).status_code == 404
        removed = await http.delete(f"/v1/webhooks/{endpoint_id}", headers=acme)
        assert removed.status_code == 202
        assert (await http.get("/v1/webhooks", headers=acme)).json()["endpoints"] == []
        assert (await http.delete(f"/v1/webhooks/{endpoint_id}", headers=acme)).status_code == 404
    assert [type(e).__name__ for e in log.published] == ["WebhookEndpointSet", "WebhookEndpointRemoved"]


async def test_a_rotation_shows_a_new_secret_and_the_previous_one_signs_for_a_day():
    http, _, keys = api()
    acme = bearer(keys.issue("acme", "submit", "read"))
    async with http:
        created = (await http.post("/v1/webhooks", json=BODY, headers=acme)).json()
        endpoint_id = created["endpoint"]["endpoint_id"]
        rotated = await http.post(f"/v1/webhooks/{endpoint_id}/rotate-secret", headers=acme)
    assert rotated.status_code == 200, rotated.text
    endpoint = rotated.json()["endpoint"]
    assert rotated.json()["secret"] != created["secret"]
    assert endpoint["secret_generation"] == 2
    grace = datetime.fromisoformat(endpoint["previous_secret_until"]) - datetime.fromisoformat(endpoint["updated_at"])
    assert grace == timedelta(days=1)
    assert endpoint["created_at"] == created["endpoint"]["created_at"]


async def test_a_tenant_holds_at_most_the_endpoints_the_server_allows_and_webhooks_off_is_a_404():
    http, _, keys = api()
    acme = bearer(keys.issue("acme", "submit", "read"))
    async with http:
        for n in range(MAX_ENDPOINTS):
            made = await http.post("/v1/webhooks", json={**BODY, "url": f"https://93.184.215.14/{n}"}, headers=acme)
            assert made.status_code == 201, made.text
        over = await http.post("/v1/webhooks", json=BODY, headers=acme)
    assert over.status_code == 409
    assert f"{MAX_ENDPOINTS} webhook endpoints" in over.json()["detail"]
    off, log, keys = api(signing_key=b"")
    async with off:
        refused = await off.post("/v1/webhooks", json=BODY, headers=bearer(keys.issue("acme", "submit")))
    assert refused.status_code == 404, "not a 503: retrying changes nothing"
    assert "VOXLOG_WEBHOOK_SIGNING_KEY" in refused.json()["detail"]
    assert log.published == []
