"""Outages cost next to nothing (foundation.outages, foundation.logging): one backoff rule, and few lines.

An orphaned worker whose broker was gone retried every 100 ms and logged 61,000 lines (10 MB) in 15 minutes.
"""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from foundation.lifecycle import Stopped
from foundation.logging import RepeatsHeldBack
from foundation.outages import Backoff, Outage, backoff_delay, until_available


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Lines:
    """A logger that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, object]]] = []

    def warning(self, event: str, **fields: object) -> None:
        self.lines.append(("warning", event, fields))

    def info(self, event: str, **fields: object) -> None:
        self.lines.append(("info", event, fields))

    def events(self) -> list[str]:
        return [event for _, event, _ in self.lines]


@pytest.mark.parametrize(("failures", "ceiling"), [(1, 0.5), (2, 1.0), (3, 2.0), (5, 8.0), (6, 10.0), (50, 10.0)])
def test_the_delay_doubles_per_failure_up_to_the_cap_with_equal_jitter(failures, ceiling):
    random.seed(failures)
    delays = [backoff_delay(0.5, 10.0, failures) for _ in range(200)]
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert max(delays) - min(delays) > ceiling / 4, (
        "jittered: processes that lost a broker together do not retry in step"
    )


def test_an_outage_of_days_does_not_overflow_the_backoff():
    backoff = Backoff(first_s=0.5, cap_s=10.0)
    delays = [backoff.next_delay() for _ in range(5000)]
    assert 5.0 <= delays[-1] <= 10.0


def test_regression_an_outage_is_said_once_summarized_every_interval_and_its_end_said_once():
    """The orphaned worker logged a line per retry: 61,000 lines in 15 minutes."""
    clock, said = Clock(), Lines()
    outage = Outage("Kafka (heartbeats)", clock=clock, logger=said)
    outage.summary_s = 60.0
    for _ in range(900):  # 15 minutes of a try a second
        outage.failed(ConnectionError("refused"))
        clock.now += 1.0
    outage.recovered()
    outage.recovered()  # up, and up again: nothing more to say
    events = said.events()
    assert events[0] == "waiting for Kafka (heartbeats)"
    assert events[-1] == "Kafka (heartbeats) available again"
    assert events[1:-1] == ["still waiting for Kafka (heartbeats)"] * 14, "one summary a minute"
    assert said.lines[1][2]["tries"] == 60
    assert said.lines[-1][2]["tries"] == 900
    assert len(events) == 16


def test_a_recovery_starts_the_backoff_over():
    outage = Outage("PostgreSQL", logger=Lines())
    delays = [outage.failed("down") for _ in range(8)]
    assert delays[-1] >= 5.0
    outage.recovered()
    assert outage.failed("down again") <= 0.5


def test_a_caller_on_demand_is_held_off_until_the_delay_is_over():
    clock = Clock()
    outage = Outage("PostgreSQL (lookups)", clock=clock, logger=Lines())
    assert not outage.holding_off()
    delay = outage.failed("down")
    assert outage.holding_off()
    clock.now += delay
    assert not outage.holding_off(), "time for the next try"
    assert outage.wait_s(2.0) == max(2.0, delay)


async def test_until_available_says_it_waits_once_and_gives_up_when_stopped():
    said, stop = Lines(), asyncio.Event()
    tries = 0

    async def attempt() -> str:
        nonlocal tries
        tries += 1
        if tries < 3:
            raise ConnectionError("refused")
        return "up"

    outage = Outage("Kafka", backoff=Backoff(first_s=0.001, cap_s=0.002), logger=said)
    assert await until_available("Kafka", attempt, stop, (ConnectionError,), outage) == "up"
    assert said.events() == ["waiting for Kafka"], "the caller's outage: the caller says when it is over"

    async def never() -> str:
        raise ConnectionError("refused")

    stop.set()
    with pytest.raises(Stopped):
        await until_available("Kafka", never, stop, (ConnectionError,))


def record(name: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_regression_a_librarys_repeated_complaints_pass_once_and_are_summarized_once_a_window():
    """aiokafka logs "Unable connect to node" every 100 ms while a broker is away."""
    clock, summaries = Clock(), []
    held_back = RepeatsHeldBack(60.0, clock, lambda event, **fields: summaries.append(fields))
    passed = []
    for i in range(6000):  # ten minutes at aiokafka's pace
        clock.now += 0.1
        passed.append(held_back.filter(record("aiokafka.client", "Unable connect to node with id %s: %s", 1, i)))
    assert passed.count(True) == 1, "the first passes: the outage is news"
    assert len(summaries) == 9, "then one summary a minute"
    (key, count), *_ = summaries[0]["held"].items()
    assert (key, 595 <= count <= 600) == ("aiokafka.client: Unable connect to node with id %s: %s", True)
    assert held_back.filter(record("voxlog.worker", "ours")), "voxlog's own lines always pass"
    clock.now += 61
    assert held_back.filter(record("aiokafka.client", "Unable connect to node with id %s: %s", 1, 0)), (
        "quiet for a whole window: a new outage is news again"
    )
