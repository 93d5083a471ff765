"""The count of failed authentications (producers.auth_failures) on a clock of the test's own."""

from __future__ import annotations

import pytest

from producers.auth_failures import FailureLimit

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_subject_is_refused_past_the_limit_until_its_oldest_failure_leaves_the_window():
    clock = Clock()
    limit = FailureLimit(3, window_s=60, clock=clock)
    subject = ("198.51.100.7", "0123456789ab")
    for _ in range(3):
        assert limit.failed(subject) is None
        clock.now += 10
    assert limit.over(subject)
    assert not limit.over(("198.51.100.7", None)), "malformed keys from the address count apart"
    assert not limit.over(("198.51.100.8", "0123456789ab")), "so does the same id from another address"
    assert limit.failed(subject) == 40, "the first of the three leaves the window 40 s on"
    clock.now += 30  # 60 s after the second failure; the refused one is counted too
    assert limit.over(subject)
    clock.now += 60
    assert not limit.over(subject)
    assert limit.failed(subject) is None


def test_the_failure_map_stays_bounded_under_100000_addresses():
    """Issue 40, item 7: the map of addresses was never pruned (86 MB per 100,000 addresses). Past its bound
    the address that failed least recently is forgotten, and an address silent for the window is dropped."""
    clock = Clock()
    limit = FailureLimit(3, window_s=60, max_entries=1000, clock=clock)
    for i in range(100_000):
        limit.failed((f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}", None))
        clock.now += 0.0001
    assert len(limit) == 1000
    latest = f"10.1.134.{99_999 & 255}"
    limit.failed((latest, None))
    limit.failed((latest, None))
    assert limit.over((latest, None)), "the most recent addresses are those kept"
    clock.now += 60
    limit.failed(("192.0.2.1", "0123456789ab"))
    assert len(limit) == 1, "entries older than the window are dropped"


def test_a_subject_holds_no_more_times_than_the_limit_however_often_it_fails():
    clock = Clock()
    limit = FailureLimit(5, window_s=60, clock=clock)
    for _ in range(10_000):
        limit.failed(("198.51.100.7", None))
    assert len(limit._failures[("198.51.100.7", None)]) == 5
