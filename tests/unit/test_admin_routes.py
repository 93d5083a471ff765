"""The operator's switches over HTTP (producers.admin_routes) on fakes: the admin scope, what each route hands
the operations port, and a purge that must say what it evicts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from foundation.errors import BrokerUnavailable
from producers.auth import KeyBook
from tests.support.api_fakes import Log, Reader, client, deps
from tests.unit.test_auth import Keys, bearer

pytestmark = pytest.mark.unit


class Operations:
    """What the routes asked for; ``broker_down`` refuses the switch as an unreachable Kafka would."""

    def __init__(self) -> None:
        self.switched: list[tuple[bool, str]] = []
        self.purged: list[float | None] = []
        self.broker_down = False

    async def set_mode(self, mode: str, enabled: bool, reason: str) -> None:
        if self.broker_down:
            raise BrokerUnavailable("cannot reach Kafka")
        self.switched.append((enabled, reason) if mode == "cache_only" else (mode, enabled, reason))

    async def mode(self, mode: str) -> dict[str, Any]:
        at = datetime(2026, 12, 1, tzinfo=UTC)
        return {
            mode: True,
            "switches": {"operator": {"enabled": True, "reason": "maintenance", "set_at": at}},
            "backlog": {"syntheses": 3, "chars": 120, "chars_per_s": None, "work_s": None},
        }

    async def purge_cache(self, older_than_s: float | None) -> tuple[int, int]:
        self.purged.append(older_than_s)
        return 2, 4096


def api(keys: Keys, operations: Operations):
    return client(deps(Reader(), Log(), keys=KeyBook(keys, cache_s=0), operations=operations))


async def test_the_switch_and_the_purge_need_the_admin_scope():
    keys, operations = Keys(), Operations()
    operator = keys.issue("acme", "submit", "read", "operator")
    async with api(keys, operations) as http:
        answers = [
            await http.get("/v1/admin/cache-only", headers=bearer(operator)),
            await http.post("/v1/admin/cache-only", json={"enabled": True}, headers=bearer(operator)),
            await http.post("/v1/admin/cache/purge", json={"all": True}, headers=bearer(operator)),
            await http.post("/v1/admin/cache/purge", json={"all": True}),
        ]
    assert [a.status_code for a in answers] == [403, 403, 403, 401]
    assert "admin" in answers[0].json()["detail"]
    assert (operations.switched, operations.purged) == ([], [])


async def test_a_switch_records_the_reason_given_or_names_the_key_that_asked():
    keys, operations = Keys(), Operations()
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        given = await http.post(
            "/v1/admin/cache-only", json={"enabled": True, "reason": "GPU maintenance"}, headers=bearer(admin)
        )
        unsaid = await http.post("/v1/admin/cache-only", json={"enabled": False}, headers=bearer(admin))
        status = await http.get("/v1/admin/cache-only", headers=bearer(admin))
    assert (given.status_code, unsaid.status_code) == (202, 202)
    assert operations.switched == [(True, "GPU maintenance"), (False, f"set over HTTP by key {admin.key_id}")]
    assert status.json()["switches"]["operator"]["reason"] == "maintenance"
    assert status.json()["backlog"]["work_s"] is None


async def test_a_switch_kafka_did_not_take_is_a_503_and_nothing_changed():
    keys, operations = Keys(), Operations()
    operations.broker_down = True
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        answer = await http.post("/v1/admin/cache-only", json={"enabled": True}, headers=bearer(admin))
    assert answer.status_code == 503
    assert "Retry-After" in answer.headers


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({}, 400, "exactly one of"),
        ({"all": True, "older_than_s": 60}, 400, "exactly one of"),
        ({"older_than_s": -1}, 400, "older_than_s"),
        # Regression: found by the conformance test, a 503 "PostgreSQL is unreachable" (timestamp out of range).
        ({"older_than_s": 3.9879249192874104e16}, 400, "older_than_s"),
        ({"all": True, "everything": True}, 400, "everything"),
    ],
)
async def test_a_purge_must_say_what_it_evicts(body, status, says):
    keys, operations = Keys(), Operations()
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        answer = await http.post("/v1/admin/cache/purge", json=body, headers=bearer(admin))
    assert answer.status_code == status, answer.text
    assert says in answer.text
    assert operations.purged == []


async def test_a_purge_of_all_or_of_the_older_results_is_handed_to_the_operations():
    keys, operations = Keys(), Operations()
    admin = keys.issue("ops", "admin")
    async with api(keys, operations) as http:
        every = await http.post("/v1/admin/cache/purge", json={"all": True}, headers=bearer(admin))
        older = await http.post("/v1/admin/cache/purge", json={"older_than_s": 3600}, headers=bearer(admin))
    assert every.json()["evicted"] == 2
    assert every.json()["bytes"] == 4096
    assert older.status_code == 200
    assert operations.purged == [None, 3600.0]


async def test_an_api_started_without_the_operations_answers_404():
    keys = Keys()
    admin = keys.issue("ops", "admin")
    async with client(deps(Reader(), Log(), keys=KeyBook(keys, cache_s=0))) as http:
        answer = await http.get("/v1/admin/cache-only", headers=bearer(admin))
    assert answer.status_code == 404
    assert "without the operator's actions" in answer.json()["detail"]


async def test_the_degraded_switch_needs_the_admin_scope_and_hands_its_mode_to_the_operations():
    keys, operations = Keys(), Operations()
    admin, operator = keys.issue("ops", "admin"), keys.issue("acme", "submit", "read", "operator")
    async with api(keys, operations) as http:
        refused = await http.post("/v1/admin/degraded", json={"enabled": True}, headers=bearer(operator))
        on = await http.post(
            "/v1/admin/degraded", json={"enabled": True, "reason": "launch day"}, headers=bearer(admin)
        )
        status = await http.get("/v1/admin/degraded", headers=bearer(admin))
        bad = await http.post("/v1/admin/degraded", json={"enabled": "maybe"}, headers=bearer(admin))
    assert (refused.status_code, on.status_code, status.status_code, bad.status_code) == (403, 202, 200, 400)
    assert operations.switched == [("degraded", True, "launch day")]
    assert status.json()["degraded"] is True
    assert status.json()["switches"]["operator"]["enabled"] is True
