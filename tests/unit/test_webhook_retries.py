"""The retry schedule of webhook deliveries (consumers.webhook_retries) and their bodies
(contracts.webhook_payloads)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from consumers.webhook_retries import RetrySchedule
from contracts.webhook_payloads import JobOutcome, WebhookBody

pytestmark = pytest.mark.unit
T0 = datetime(2026, 12, 5, tzinfo=UTC)


def test_the_ceiling_doubles_up_to_an_hour_and_the_delay_is_drawn_below_it():
    schedule, asked = RetrySchedule(), []

    def top(low: float, high: float) -> float:
        asked.append(high)
        return high

    for attempts in range(1, 12):
        schedule.next_attempt(T0, attempts, T0, draw=top)
    assert asked == [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600]
    low = schedule.next_attempt(T0, 3, T0, draw=lambda lo, hi: lo)
    assert low == T0, "full jitter: anywhere from now to the ceiling"


def test_retry_after_is_a_floor_and_the_window_ends_the_retries():
    schedule = RetrySchedule(retry_for=timedelta(hours=1))
    assert schedule.next_attempt(T0, 1, T0, retry_after_s=120, draw=lambda lo, hi: 0) == T0 + timedelta(seconds=120)
    late = T0 + timedelta(minutes=59, seconds=50)
    assert schedule.next_attempt(T0, 9, late, draw=lambda lo, hi: hi) is None, "past the window: given up"
    assert schedule.next_attempt(T0, 9, late, draw=lambda lo, hi: 5) == late + timedelta(seconds=5)


def test_a_body_is_the_standard_webhooks_shape_and_reads_back():
    job = uuid.uuid4()
    body = WebhookBody(
        type="job.completed",
        timestamp=T0,
        data=JobOutcome(job_id=job, state="completed", fingerprint="ab" * 32, total_duration_ms=1200,
                        audio_url=f"/v1/jobs/{job}/audio"),
    )  # fmt: skip
    again = WebhookBody.model_validate_json(body.model_dump_json())
    assert again == body
    assert set(body.model_dump(mode="json")) == {"type", "timestamp", "data"}
