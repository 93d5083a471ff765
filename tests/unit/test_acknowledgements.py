"""Acknowledgement tracking (consumers.acknowledgements): events sent and not acknowledged yet, recorded in the
order they were sent, the held claim that goes with the next event, refusals, and discarding."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from consumers.acknowledgements import Acknowledgements
from contracts import JobEvent
from foundation.errors import BrokerUnavailable
from tests.support.job_logs import _Builder

pytestmark = pytest.mark.unit


@dataclass
class Appended:
    offset: int


class GatedLog:
    """A log that takes every event at once and acknowledges (or refuses) it when the test says."""

    def __init__(self) -> None:
        self.events: list[JobEvent] = []
        self.partitions: list[int | None] = []
        self.acks: list[asyncio.Future[Appended]] = []
        self.sent = asyncio.Event()

    async def send(self, event: JobEvent, partition: int | None = None) -> asyncio.Future[Appended]:
        self.events.append(event)
        self.partitions.append(partition)
        self.acks.append(asyncio.get_running_loop().create_future())
        self.sent.set()
        return self.acks[-1]

    def types(self) -> list[str]:
        return [event.type for event in self.events]


class Notes:
    """A ledger's stand-in: notes every event recorded, with its offset."""

    def __init__(self) -> None:
        self.recorded: list[tuple[str, int]] = []

    def record_own(self, event: JobEvent, offset: int) -> None:
        self.recorded.append((event.type, offset))


JOB = _Builder(uuid.UUID(int=1))


async def test_events_are_recorded_in_the_order_they_were_sent_whatever_order_their_acknowledgements_come_in():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    recorded = [await acks.send(event, 3, notes) for event in (JOB.claimed(1), JOB.segment(1, 0), JOB.completed(1, 1))]
    assert len(acks) == 3
    assert acks.fingerprints() == {JOB.fingerprint}
    waiting = asyncio.create_task(acks.wait_all())
    log.acks[2].set_result(Appended(12))  # the last sent comes back first
    log.acks[1].set_result(Appended(11))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not waiting.done(), "the wait is for all of them"
    assert notes.recorded == []
    log.acks[0].set_result(Appended(10))
    await asyncio.wait_for(waiting, 5)
    assert notes.recorded == [("JobClaimed", 10), ("SegmentProduced", 11), ("JobCompleted", 12)]
    assert [future.result() for future in recorded] == [True, True, True]
    assert len(acks) == 0
    assert acks.fingerprints() == set()
    assert log.partitions == [3, 3, 3]


async def test_a_refusal_among_several_records_the_others_raises_the_first_and_marks_none_recorded():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    recorded = [await acks.send(event, None, notes) for event in (JOB.claimed(1), JOB.segment(1, 0), JOB.segment(1, 1))]
    first, second = BrokerUnavailable("segment 0 refused"), BrokerUnavailable("segment 1 refused")
    log.acks[0].set_result(Appended(5))
    log.acks[1].set_exception(first)
    log.acks[2].set_exception(second)
    with pytest.raises(BrokerUnavailable) as raised:
        await acks.wait_all()
    assert raised.value is first
    assert notes.recorded == [("JobClaimed", 5)], "what was acknowledged counts; what was refused does not"
    assert [future.result() for future in recorded] == [False, False, False], "one refusal taints the whole wait"
    assert len(acks) == 0


async def test_a_refusal_that_came_back_already_is_seen_before_any_wait():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    await acks.send(JOB.claimed(1), None, notes)
    await acks.send(JOB.segment(1, 0), None, notes)
    assert acks.refusal() is None, "nothing has come back yet"
    log.acks[0].set_result(Appended(1))
    await asyncio.sleep(0)
    assert acks.refusal() is None, "an acknowledgement is no refusal"
    refused = BrokerUnavailable("no leader")
    log.acks[1].set_exception(refused)
    assert acks.refusal() is refused
    assert len(acks) == 2, "asking takes nothing away"


async def test_a_held_claim_goes_with_the_next_event_and_before_it():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    acks.hold(JOB.claimed(1), 7, notes)
    assert log.events == [], "held: not sent yet"
    assert len(acks) == 0
    await acks.send(JOB.segment(1, 0), 7, notes)
    assert log.types() == ["JobClaimed", "SegmentProduced"]
    assert log.partitions == [7, 7]
    for offset, ack in enumerate(log.acks):
        ack.set_result(Appended(offset))
    await acks.wait_all()
    assert notes.recorded == [("JobClaimed", 0), ("SegmentProduced", 1)]


async def test_a_wait_sends_the_held_claim_first():
    """Whatever ends an attempt (a release, say) waits: a claim held for the first segment is sent then."""
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    acks.hold(JOB.claimed(1), None, notes)
    waiting = asyncio.create_task(acks.wait_all())
    await asyncio.wait_for(log.sent.wait(), 5)
    assert log.types() == ["JobClaimed"]
    log.acks[0].set_result(Appended(4))
    await asyncio.wait_for(waiting, 5)
    assert notes.recorded == [("JobClaimed", 4)]


async def test_discarding_forgets_the_held_and_the_sent_unrecorded():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    recorded = await acks.send(JOB.claimed(1), None, notes)
    acks.hold(JOB.claimed(2), None, notes)
    acks.discard()
    assert recorded.result() is False, "not known to be recorded: its job is acted on again"
    assert len(acks) == 0
    assert acks.fingerprints() == set()
    log.acks[0].set_exception(BrokerUnavailable("refused after all"))
    await acks.wait_all()  # nothing left to wait for, nothing to raise, and the held claim is never sent
    assert log.types() == ["JobClaimed"]
    assert notes.recorded == []


async def test_a_wait_cut_short_leaves_nothing_known_recorded():
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    recorded = await acks.send(JOB.completed(1, 1), None, notes)
    waiting = asyncio.create_task(acks.wait_all())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert recorded.result() is False
    assert notes.recorded == []


async def test_regression_a_second_held_claim_replaced_the_first_which_was_never_sent():
    """With several claims held at once, two attempts each kept their claim back to ride with their first
    segment: the second claim replaced the first, whose segments and completion then reached the log without
    their claim, were fenced, and the job stayed queued for ever (the fault campaign's worker_kills lost 11
    jobs). Every held claim goes, in the order held."""
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    first, second = _Builder(uuid.UUID(int=11)), _Builder(uuid.UUID(int=12))
    acks.hold(first.claimed(1), 3, notes)
    acks.hold(second.claimed(1), 4, notes)
    await acks.send(first.segment(1, 0), 3, notes)
    assert [(e.type, e.job_id.int) for e in log.events] == [
        ("JobClaimed", 11),
        ("JobClaimed", 12),
        ("SegmentProduced", 11),
    ]
    assert log.partitions == [3, 4, 3]


async def test_regression_a_completion_another_attempt_was_waiting_for_looked_settled_to_a_duplicate():
    """With several claims held at once, one attempt's wait took every event sent, another job's completion
    among them: until Kafka answered, that completion was neither pending (so a duplicate did not wait for it)
    nor in the ledger (so the duplicate was not coalesced onto it), and the duplicate was synthesized again.
    A completion taken by a wait stays pending, and every wait waits for it to be recorded."""
    log, notes = GatedLog(), Notes()
    acks = Acknowledgements(log)
    other = _Builder(uuid.UUID(int=21))
    await acks.send(other.completed(1, 1), None, notes)
    first_wait = asyncio.create_task(acks.wait_all())  # an attempt's last event: it waits for all
    await asyncio.sleep(0)
    assert other.fingerprint in acks.fingerprints(), "still pending while its acknowledgement is awaited"
    second_wait = asyncio.create_task(acks.wait_all())  # a duplicate's worker waits before it looks
    await asyncio.sleep(0)
    assert not second_wait.done(), "the duplicate waits until the completion is recorded"
    log.acks[0].set_result(Appended(7))
    await asyncio.wait_for(asyncio.gather(first_wait, second_wait), 5)
    assert notes.recorded == [("JobCompleted", 7)]
    assert acks.fingerprints() == set()
