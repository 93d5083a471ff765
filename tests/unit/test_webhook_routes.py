"""A tenant's webhook endpoints over HTTP (producers.webhook_routes, producers.webhooks; issue 39, item 1):
registered as events on the log, judged against SSRF before anything is recorded, listed per tenant, the
secret shown once and verifiable with the standardwebhooks library, rotated, removed; and their deliveries
(issue 39, item 2): listed newest first a page at a time, redelivered as a new record of the same delivery.

The registry is the real one; its reads come from the real fold of what it published (an instant projector).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import standardwebhooks

from contracts import (
    WebhookDeliveryRecorded,
    WebhookDeliveryRecordedPayload,
    WebhookEndpointRemoved,
    WebhookEndpointSet,
    node_event,
    utc_now,
)
from contracts.webhook_signatures import signature
from foundation.outbound import parse_networks
from producers.auth import KeyBook
from producers.webhooks import MAX_ENDPOINTS, WebhookRegistry
from projections.accounts import delivery_recorded, webhook_event
from projections.rows import WebhookDeliveryRow, WebhookEndpointRow
from tests.support.api_fakes import PRODUCER, Log, Reader, client, deps
from tests.unit.test_auth import Keys, bearer

pytestmark = pytest.mark.unit
SIGNING_KEY = b"a server's signing key of at least thirty-two bytes"


class FoldedPool:
    """The projection's webhook_endpoints and webhook_deliveries as the real fold makes them of what ``log`` took
    (and of ``recorded``: what the delivery process would have published), read as the registry's SQL asks."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.recorded: list[WebhookDeliveryRecorded] = []

    def _rows(self) -> dict[uuid.UUID, WebhookEndpointRow]:
        rows: dict[uuid.UUID, WebhookEndpointRow] = {}
        for event in self.log.published:
            if isinstance(event, WebhookEndpointSet | WebhookEndpointRemoved):
                webhook_event(rows, event)
        return rows

    def _deliveries(self) -> dict[uuid.UUID, WebhookDeliveryRow]:
        rows: dict[uuid.UUID, WebhookDeliveryRow] = {}
        for event in [*self.recorded, *self.log.published]:
            if isinstance(event, WebhookDeliveryRecorded):
                delivery_recorded(rows, event)
        return rows

    async def fetch(self, sql: str, *args: Any, **options: Any) -> list[dict[str, Any]]:
        if "webhook_deliveries" in sql:  # endpoint, tenant, the cursor's created_at and id, limit; newest first
            endpoint_id, tenant, at, after_id, limit = args
            rows = [
                r for r in self._deliveries().values()
                if r.endpoint_id == endpoint_id and r.tenant == tenant
                and (at is None or (r.created_at, r.delivery_id.bytes) < (at, after_id.bytes))
            ]  # fmt: skip
            rows.sort(key=lambda r: (r.created_at, r.delivery_id.bytes), reverse=True)
            return [vars(r) for r in rows[:limit]]
        (tenant,) = args
        live = [r for r in self._rows().values() if r.tenant == tenant and r.removed_at is None]
        return [vars(r) for r in sorted(live, key=lambda r: r.created_at)]

    async def fetchrow(self, sql: str, *args: Any, **options: Any) -> dict[str, Any] | None:
        if "webhook_deliveries" in sql:
            delivery_id, endpoint_id, tenant = args
            found = self._deliveries().get(delivery_id)
            mine = found is not None and (found.endpoint_id, found.tenant) == (endpoint_id, tenant)
            return vars(found) if mine else None
        endpoint_id, tenant = args
        row = self._rows().get(endpoint_id)
        return vars(row) if row is not None and row.tenant == tenant else None


def api(
    signing_key: bytes = SIGNING_KEY, allowed: str = "", pool: FoldedPool | None = None
) -> tuple[httpx.AsyncClient, Log, Keys]:
    log, keys = Log(), Keys()
    if pool is not None:
        pool.log = log
    registry = WebhookRegistry(pool or FoldedPool(log), log, PRODUCER, signing_key, parse_networks(allowed))  # type: ignore[arg-type]
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


T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def recorded(
    endpoint_id: str, tenant: str, n: int, state: str = "given_up", *, at: datetime = T0, attempts: int = 3
) -> WebhookDeliveryRecorded:
    """The delivery process's record of delivery ``n`` of the endpoint, made ``n`` minutes after ``T0``."""
    made = at + timedelta(minutes=n)
    payload = WebhookDeliveryRecordedPayload(
        delivery_id=uuid.UUID(int=n + 1), endpoint_id=uuid.UUID(endpoint_id), tenant=tenant,
        event_type="job.failed", job_id=uuid.UUID(int=1000 + n),
        body=json.dumps({"type": "job.failed", "data": {"n": n}}), traceparent=f"00-{n + 1:032x}-{n + 1:016x}-01",
        created_at=made, state=state, attempts=attempts, next_attempt_at=None if state != "pending" else made,
        last_status=500 if state == "given_up" else 200, last_error="HTTP 500" if state == "given_up" else "",
        last_duration_ms=12,
    )  # fmt: skip
    return node_event(WebhookDeliveryRecorded, PRODUCER, payload, at=made + timedelta(seconds=30))


async def _endpoint(http: httpx.AsyncClient, headers: dict[str, str]) -> str:
    created = await http.post("/v1/webhooks", json=BODY, headers=headers)
    assert created.status_code == 201, created.text
    endpoint_id: str = created.json()["endpoint"]["endpoint_id"]
    return endpoint_id


async def test_an_endpoints_deliveries_are_listed_newest_first_a_page_at_a_time_and_only_to_its_tenant():
    pool = FoldedPool(Log())
    http, _, keys = api(pool=pool)
    acme, other = bearer(keys.issue("acme", "submit", "read")), bearer(keys.issue("globex", "submit", "read"))
    async with http:
        endpoint_id = await _endpoint(http, acme)
        others = await _endpoint(http, other)
        pool.recorded += [recorded(endpoint_id, "acme", n) for n in range(5)]
        pool.recorded.append(recorded(others, "globex", 9))
        pool.recorded.append(recorded(endpoint_id, "acme", 2, "delivered", attempts=4))  # its latest record
        first = await http.get(f"/v1/webhooks/{endpoint_id}/deliveries", params={"limit": 2}, headers=acme)
        assert first.status_code == 200, first.text
        cursor = first.json()["next_before"]
        second = await http.get(
            f"/v1/webhooks/{endpoint_id}/deliveries", params={"limit": 2, "before": cursor}, headers=acme
        )
        last = await http.get(
            f"/v1/webhooks/{endpoint_id}/deliveries",
            params={"limit": 2, "before": second.json()["next_before"]},
            headers=acme,
        )
        whole = (await http.get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=acme)).json()
        theirs = await http.get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=other)
        nobody = str(uuid.uuid4())
        unknown = await http.get(f"/v1/webhooks/{nobody}/deliveries", headers=acme)
        bad_cursor = await http.get(
            f"/v1/webhooks/{endpoint_id}/deliveries", params={"before": str(uuid.UUID(int=10))}, headers=acme
        )
        too_many = await http.get(f"/v1/webhooks/{endpoint_id}/deliveries", params={"limit": 101}, headers=acme)
    pages = [first.json(), second.json(), last.json()]
    listed = [d["delivery_id"] for page in pages for d in page["deliveries"]]
    assert listed == [str(uuid.UUID(int=n + 1)) for n in (4, 3, 2, 1, 0)], "newest first, none twice, none lost"
    assert pages[2]["next_before"] is None, "the last page says so"
    assert [d["delivery_id"] for d in whole["deliveries"]] == listed
    assert whole["next_before"] is None
    (two,) = [d for d in whole["deliveries"] if d["delivery_id"] == str(uuid.UUID(int=3))]
    assert (two["state"], two["attempts"], two["last_status"], two["last_error"]) == ("delivered", 4, 200, "")
    assert two["body"] == {"type": "job.failed", "data": {"n": 2}}, "the body as the JSON it is"
    assert (two["job_id"], two["event_type"]) == (str(uuid.UUID(int=1002)), "job.failed")
    assert set(two) == {
        "delivery_id", "event_type", "job_id", "document_id", "state", "attempts", "next_attempt_at", "last_status",
        "last_error", "last_duration_ms", "body", "created_at", "updated_at",
    }  # fmt: skip
    assert theirs.status_code == unknown.status_code == 404, "another tenant's endpoint is unknown"
    assert theirs.text.replace(endpoint_id, "ID") == unknown.text.replace(nobody, "ID")
    assert bad_cursor.status_code == 400, "an unknown cursor is the caller's mistake"
    assert "before" in bad_cursor.json()["detail"]
    assert too_many.status_code == 400


async def test_a_redelivery_records_the_same_delivery_pending_and_due_now_with_its_attempts_kept():
    pool = FoldedPool(Log())
    http, log, keys = api(pool=pool)
    acme, other = bearer(keys.issue("acme", "submit", "read")), bearer(keys.issue("globex", "submit", "read"))
    reader = bearer(keys.issue("acme", "read"))
    async with http:
        endpoint_id = await _endpoint(http, acme)
        # The delivery process's clock an hour ahead of the API's: the redelivery is still the newer record.
        ahead = utc_now() + timedelta(hours=1)
        pool.recorded += [recorded(endpoint_id, "acme", 0, at=ahead), recorded(endpoint_id, "acme", 1, "pending")]
        given_up = f"/v1/webhooks/{endpoint_id}/deliveries/{uuid.UUID(int=1)}/redeliver"
        pending = f"/v1/webhooks/{endpoint_id}/deliveries/{uuid.UUID(int=2)}/redeliver"
        theirs = await http.post(given_up, headers=other)
        unknown = await http.post(f"/v1/webhooks/{endpoint_id}/deliveries/{uuid.uuid4()}/redeliver", headers=acme)
        read_only = await http.post(given_up, headers=reader)
        before = utc_now()
        again = await http.post(given_up, headers=acme)
        assert again.status_code == 202, again.text
        twice = await http.post(given_up, headers=acme)
        busy = await http.post(pending, headers=acme)
        listed = (await http.get(f"/v1/webhooks/{endpoint_id}/deliveries", headers=acme)).json()["deliveries"]
    assert theirs.status_code == unknown.status_code == 404
    assert read_only.status_code == 403, "a redelivery needs the submit scope"
    assert busy.status_code == 409
    assert "pending already" in busy.json()["detail"]
    assert twice.status_code == 409, "once recorded pending, it is pending (the projection folded the record)"
    (first,) = [e for e in log.published if isinstance(e, WebhookDeliveryRecorded)]
    was = pool.recorded[0].payload
    now = first.payload
    assert now.state == "pending"
    assert now.next_attempt_at is not None
    assert before <= now.next_attempt_at <= utc_now(), "due now"
    unchanged = ("delivery_id", "endpoint_id", "tenant", "event_type", "job_id", "body", "traceparent", "created_at",
                 "attempts", "last_status", "last_error")  # fmt: skip
    assert {f: getattr(now, f) for f in unchanged} == {f: getattr(was, f) for f in unchanged}, (
        "the same webhook-id and body, so the receiver de-duplicates; its attempts and last outcome kept"
    )
    shown = again.json()["delivery"]
    assert (shown["state"], shown["attempts"], shown["delivery_id"]) == ("pending", 3, str(uuid.UUID(int=1)))
    assert [(d["delivery_id"], d["state"]) for d in listed] == [
        (str(uuid.UUID(int=1)), "pending"), (str(uuid.UUID(int=2)), "pending"),
    ], "listed by when each was made, the redelivered one as it stands now"  # fmt: skip


async def test_an_endpoint_the_delivery_process_disabled_shows_why_and_its_tenant_enables_it_again():
    http, log, keys = api()
    acme = bearer(keys.issue("acme", "submit", "read"))
    async with http:
        created = (await http.post("/v1/webhooks", json=BODY, headers=acme)).json()["endpoint"]
        endpoint_id = created["endpoint_id"]
        (registered,) = log.published
        why = "disabled at 2026-12-05 12:00:00 UTC: no delivery succeeded since ... (last: answered 503)"
        disabled = registered.model_copy(
            update={
                "event_id": uuid.uuid4(),
                "occurred_at": registered.occurred_at + timedelta(microseconds=1),
                "payload": registered.payload.model_copy(update={"disabled_reason": why}),
            }
        )
        log.published.append(disabled)  # as the delivery process records it
        shown = (await http.get(f"/v1/webhooks/{endpoint_id}", headers=acme)).json()
        assert shown["disabled_reason"] == why
        refused = await http.post(f"/v1/webhooks/{endpoint_id}/deliveries/{uuid.uuid4()}/redeliver", headers=acme)
        assert refused.status_code == 409, "nothing is redelivered to a disabled endpoint"
        assert f"/v1/webhooks/{endpoint_id}/enable first" in refused.json()["detail"]
        rotated = (await http.post(f"/v1/webhooks/{endpoint_id}/rotate-secret", headers=acme)).json()
        assert rotated["endpoint"]["disabled_reason"] == why, "a rotation does not enable it"
        enabled = await http.post(f"/v1/webhooks/{endpoint_id}/enable", headers=acme)
        assert enabled.status_code == 200, enabled.text
        assert enabled.json()["disabled_reason"] == ""
        assert (await http.get(f"/v1/webhooks/{endpoint_id}", headers=acme)).json()["disabled_reason"] == ""
        assert (await http.get(f"/v1/webhooks/{endpoint_id}", headers=acme)).json()["secret_generation"] == 2
        other = bearer(keys.issue("globex", "submit"))
        assert (await http.post(f"/v1/webhooks/{endpoint_id}/enable", headers=other)).status_code == 404
