"""Retry backoff (consumers.job_runner.RetryPolicy): exponential, capped, with equal jitter."""

from __future__ import annotations

import random

import pytest

from consumers.job_runner import RetryPolicy


@pytest.mark.parametrize(("attempt", "ceiling"), [(1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0), (30, 60.0)])
def test_the_delay_doubles_per_attempt_up_to_the_cap_and_keeps_at_least_half(attempt, ceiling):
    policy = RetryPolicy(max_attempts=30, base_delay_s=1.0, max_delay_s=60.0)
    random.seed(attempt)
    delays = [policy.backoff(attempt).total_seconds() for _ in range(200)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert max(delays) - min(delays) > ceiling / 4, "jittered: jobs that failed together do not retry together"


def test_a_zero_base_delay_retries_at_once():
    assert RetryPolicy(max_attempts=3, base_delay_s=0.0).backoff(3).total_seconds() == 0.0
