"""The fault campaign's webhook endpoint: what it counts of the deliveries it got (issue 39, item 2)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
import standardwebhooks

from consumers.webhook_sender import signed_headers
from contracts.webhook_signatures import endpoint_secret
from voxlog.chaos.webhooks import Received, Receiver, verifies

pytestmark = pytest.mark.unit

SECRET = endpoint_secret(b"k" * 32, uuid.UUID(int=1), 1)
OTHER = endpoint_secret(b"k" * 32, uuid.UUID(int=2), 1)


def delivery(webhook_id: str, job_id: str, event_type: str = "job.completed", secret: str = SECRET) -> Received:
    body = json.dumps({"type": event_type, "data": {"job_id": job_id}}).encode()
    headers = signed_headers([OTHER, secret], webhook_id, int(time.time()), body, None)
    return Received(webhook_id, headers["webhook-timestamp"], headers["webhook-signature"], body)


def test_a_signature_verifies_as_standard_webhooks_says_and_only_with_its_secret():
    received = delivery("msg_1", "j1")
    headers = {"webhook-id": "msg_1", "webhook-timestamp": received.timestamp, "webhook-signature": received.signatures}
    standardwebhooks.Webhook(SECRET).verify(received.body, headers)  # the library's own check agrees
    assert verifies(SECRET, received)
    assert not verifies(endpoint_secret(b"k" * 32, uuid.UUID(int=3), 1), received)
    assert not verifies(SECRET, Received("msg_1", received.timestamp, received.signatures, received.body + b" "))


def test_the_tally_counts_duplicates_and_names_the_outcomes_missing_or_under_two_ids():
    receiver = Receiver()
    try:
        receiver.received += [
            delivery("a", "j1"),
            delivery("a", "j1"),  # the same delivery again: a duplicate, allowed
            delivery("b", "j2", "job.failed"),
            delivery("c", "j3"),
            delivery("d", "j3"),  # one outcome under a second webhook-id
            delivery("e", "j4", secret=endpoint_secret(b"x" * 32, uuid.UUID(int=1), 1)),
        ]
        tally = receiver.tally(SECRET, {"j1": "completed", "j2": "failed", "j3": "completed", "j4": "completed"})
    finally:
        receiver.server.server_close()
    assert (tally.due, tally.delivered, tally.requests, tally.duplicates) == (4, 3, 6, 1)
    assert tally.missing == ["j4 (job.completed)"]
    assert len(tally.problems) == 2
    assert "webhook e: no signature verifies" in tally.problems[0]
    assert "j3's job.completed delivered under 2 webhook-ids" in tally.problems[1]
