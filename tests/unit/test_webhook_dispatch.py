"""Webhook deliveries made from outcomes (consumers.webhook_outcomes) and tried by the leading delivery
process (consumers.webhook_dispatch): each endpoint on its own, every attempt recorded whole, retried on the
schedule, given up past the window or once the endpoint is removed, never taken twice while the projection
catches up."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks

from consumers.webhook_dispatch import Dispatcher
from consumers.webhook_outcomes import deliveries_of, delivery_id
from consumers.webhook_retries import RetrySchedule
from consumers.webhook_sender import Attempted
from contracts import WebhookDeliveryRecorded, WebhookEndpointSet
from contracts.webhook_signatures import endpoint_secret
from projections.reads.webhooks import Due, EndpointFacts, EndpointNow, JobFacts
from tests.support.api_fakes import PRODUCER, Log
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit
KEY = b"k" * 32
T0 = datetime(2026, 12, 5, 12, tzinfo=UTC)


def test_an_outcome_is_one_delivery_to_each_endpoint_that_wants_it_and_the_same_when_made_again():
    job = _Builder(uuid.UUID(int=1))
    completed = job.completed(1, 1)
    facts = JobFacts("acme", "completed", job.fingerprint, completed.occurred_at, total_duration_ms=900)
    wants, ignores = (
        EndpointFacts(uuid.UUID(int=7), ("job.completed",), completed.occurred_at - timedelta(days=1)),
        EndpointFacts(uuid.UUID(int=8), ("job.failed",), completed.occurred_at - timedelta(days=1)),
    )
    made = deliveries_of(completed, facts, [wants, ignores], PRODUCER, "00-" + "a" * 32 + "-" + "b" * 16 + "-01")
    assert [d.payload.endpoint_id for d in made] == [wants.endpoint_id]
    (delivery,) = made
    assert delivery.payload.delivery_id == delivery_id(wants.endpoint_id, completed.event_id)
    assert delivery.occurred_at == completed.occurred_at, "older than any attempt: made again, it undoes none"
    assert '"audio_url":"/v1/jobs/' in delivery.payload.body
    again = deliveries_of(completed, facts, [wants], PRODUCER, None)[0]
    assert (again.event_id, again.payload.delivery_id) == (delivery.event_id, delivery.payload.delivery_id)
    failed = JobFacts("acme", "failed", job.fingerprint, completed.occurred_at)
    assert deliveries_of(completed, failed, [wants], PRODUCER, None) == [], "not the outcome the job ended with"
    other = JobFacts("acme", "completed", job.fingerprint, completed.occurred_at + timedelta(seconds=1))
    assert deliveries_of(completed, other, [wants], PRODUCER, None) == [], "a second completion, fenced"
    later = EndpointFacts(uuid.UUID(int=9), ("job.completed",), completed.occurred_at + timedelta(seconds=1))
    assert deliveries_of(completed, facts, [later], PRODUCER, None) == [], "from before the endpoint was registered"


def endpoint(
    url: str, generation: int = 1, previous_until: datetime | None = None, removed: bool = False, disabled: str = ""
) -> EndpointNow:
    return EndpointNow("acme", url, ("job.completed",), "", generation, previous_until, T0 - timedelta(days=3),
                       removed, disabled)  # fmt: skip


class Store:
    def __init__(self, *due: Due) -> None:
        self.pending = list(due)
        self.endpoints: dict[uuid.UUID, EndpointNow] = {}
        self.succeeded_since: datetime | None = None

    async def delivered_since(self, endpoint_id: uuid.UUID, since: datetime) -> bool:
        return self.succeeded_since is not None and self.succeeded_since >= since

    async def due(self, now: datetime, limit: int) -> list[Due]:
        return list(self.pending)

    async def endpoint(self, endpoint_id: uuid.UUID) -> EndpointNow | None:
        return self.endpoints.get(endpoint_id)


class Endpoints:
    """Each URL's answers in turn; a URL held at a gate until it is let go."""

    def __init__(self) -> None:
        self.answers: dict[str, list[Attempted]] = {}
        self.gates: dict[str, asyncio.Event] = {}
        self.sent: list[tuple[str, dict[str, str], bytes]] = []

    async def send(self, url: str, body: bytes, headers: dict[str, str]) -> Attempted:
        self.sent.append((url, headers, body))
        if url in self.gates:
            await self.gates[url].wait()
        return self.answers.get(url, [Attempted(True, 204, "", 3)]).pop(0)


class Records(Log):
    """The nodes log, telling a waiting test when a record lands."""

    def __init__(self) -> None:
        super().__init__()
        self.landed = asyncio.Event()

    async def publish_all(self, events, partitions=None) -> None:  # type: ignore[no-untyped-def]
        await super().publish_all(events, partitions)
        self.landed.set()

    async def until(self, enough) -> None:  # type: ignore[no-untyped-def]
        while not enough(recorded(self)):
            self.landed.clear()
            await asyncio.wait_for(self.landed.wait(), 10)


class Leader:
    async def hold(self) -> bool:
        return True

    async def resign(self) -> None:
        return None


def due(endpoint: int, n: int = 0, attempts: int = 0) -> Due:
    return Due(delivery_id=uuid.UUID(int=100 + 10 * endpoint + n), endpoint_id=uuid.UUID(int=endpoint),
               tenant="acme", event_type="job.completed", job_id=uuid.UUID(int=50), body='{"type":"job.completed"}',
               created_at=T0, attempts=attempts, next_attempt_at=T0)  # fmt: skip


def dispatcher(store: Store, sender: Endpoints, log: Log, now: datetime = T0) -> Dispatcher:
    schedule = RetrySchedule(retry_for=timedelta(hours=1))
    return Dispatcher(store, sender, log, PRODUCER, KEY, schedule, Leader(), clock=lambda: now)


def recorded(log: Log) -> list[WebhookDeliveryRecorded]:
    return [e for e in log.published if isinstance(e, WebhookDeliveryRecorded)]


async def test_a_delivery_is_signed_with_the_endpoints_secrets_and_recorded_delivered():
    store, sender, log, now = Store(due(1)), Endpoints(), Log(), datetime.now(UTC)
    rotated_until = now + timedelta(hours=1)
    store.endpoints[uuid.UUID(int=1)] = endpoint("https://hooks.example.com/a", 2, rotated_until)
    record = await dispatcher(store, sender, log, now).attempt(due(1))
    assert (record.payload.state, record.payload.attempts, record.payload.last_status) == ("delivered", 1, 204)
    (_, headers, body) = sender.sent[0]
    assert headers["webhook-id"] == str(due(1).delivery_id)
    for generation in (2, 1):  # the new secret, and the previous one while it is in force
        secret = endpoint_secret(KEY, uuid.UUID(int=1), generation)
        assert standardwebhooks.Webhook(secret).verify(body, headers) == {"type": "job.completed"}


async def test_a_failed_attempt_is_pending_at_the_next_time_and_given_up_past_the_window():
    store, sender, log = Store(), Endpoints(), Log()
    store.endpoints[uuid.UUID(int=1)] = endpoint("https://hooks.example.com/a")
    sender.answers["https://hooks.example.com/a"] = [Attempted(False, 500, "answered 500: boom", 4)] * 2
    first = await dispatcher(store, sender, log).attempt(due(1))
    assert (first.payload.state, first.payload.attempts, first.payload.last_error) == (
        "pending",
        1,
        "answered 500: boom",
    )
    assert first.payload.next_attempt_at is not None
    assert T0 <= first.payload.next_attempt_at <= T0 + timedelta(seconds=5)
    late = dispatcher(store, sender, log, now=T0 + timedelta(hours=2))
    last = await late.attempt(due(1, attempts=7))
    assert (last.payload.state, last.payload.attempts) == ("given_up", 8)
    store.endpoints[uuid.UUID(int=1)] = endpoint("https://hooks.example.com/a", removed=True)
    removed = await dispatcher(store, sender, log).attempt(due(1, n=1))
    assert (removed.payload.state, removed.payload.last_error) == ("given_up", "its endpoint was removed")


async def test_regression_a_slow_endpoint_holds_only_its_own_queue():
    store, sender, log = Store(due(1, 0), due(1, 1), due(2, 0)), Endpoints(), Records()
    for n in (1, 2):
        store.endpoints[uuid.UUID(int=n)] = endpoint(f"https://hooks.example.com/{n}")
    sender.gates["https://hooks.example.com/1"] = asyncio.Event()  # endpoint 1 does not answer until let go
    run = dispatcher(store, sender, log)
    assert await run.look() == 3
    # The other endpoint's delivery is recorded while endpoint 1 holds its first.
    await log.until(lambda records: any(e.payload.endpoint_id == uuid.UUID(int=2) for e in records))
    assert [url for url, _, _ in sender.sent].count("https://hooks.example.com/1") == 1, "one at a time per endpoint"
    assert await run.look() == 0, "nothing queued or being tried is taken again"
    sender.gates["https://hooks.example.com/1"].set()
    await log.until(lambda records: len(records) == 3)
    # The projection does not show the attempts yet: the same rows are not taken again.
    assert await run.look() == 0
    store.pending = [due(1, 0, attempts=1)]  # it shows one now, delivered... and an older row is not re-taken
    assert await run.look() == 1, "a row that shows what was recorded here is the projection's again"


async def test_an_endpoint_failing_for_the_whole_window_is_disabled_with_why_and_delivers_nothing_more():
    store, sender, log = Store(), Endpoints(), Log()
    store.endpoints[uuid.UUID(int=1)] = endpoint("https://hooks.example.com/a")
    sender.answers["https://hooks.example.com/a"] = [Attempted(False, 503, "answered 503: down", 4)] * 2
    late = dispatcher(store, sender, log, now=T0 + timedelta(hours=2))  # past the hour's window
    store.succeeded_since = T0 + timedelta(minutes=90)  # a delivery succeeded within the window: kept
    await late.attempt(due(1, attempts=7))
    assert not [e for e in log.published if isinstance(e, WebhookEndpointSet)]
    store.succeeded_since = None
    await late.attempt(due(1, n=1, attempts=7))
    (disabled,) = [e for e in log.published if isinstance(e, WebhookEndpointSet)]
    assert disabled.payload.disabled_reason.startswith("disabled at ")
    assert "(last: answered 503: down)" in disabled.payload.disabled_reason
    assert (disabled.payload.url, disabled.payload.secret_generation) == ("https://hooks.example.com/a", 1)
    store.endpoints[uuid.UUID(int=1)] = endpoint("https://hooks.example.com/a", disabled="disabled at ...")
    given_up = await late.attempt(due(1, n=2))
    assert (given_up.payload.state, given_up.payload.last_error) == ("given_up", "its endpoint was disabled")
    assert len(sender.sent) == 2, "nothing is sent to a disabled endpoint"
