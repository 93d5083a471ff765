"""Backpressure decisions: the API's admission (429, cache-only 503) and the sweeper's backlog switch."""

from __future__ import annotations

import pytest

from consumers.backlog_switch import BacklogSwitch
from contracts import Producer, ServiceMode, ServiceModeSet
from producers.admission import Admission
from producers.errors import Rejected
from projections.errors import ProjectionUnavailable
from projections.reads.backlog import Backlog

pytestmark = pytest.mark.unit
PRODUCER = Producer(service="sweeper", instance="test")


class Reader:
    """The projection as admission reads it: a backlog, the switches on, the fingerprints in flight."""

    def __init__(self, backlog: Backlog, modes: list[tuple[str, str]] | None = None) -> None:
        self.backlog_now = backlog
        self.modes = modes or []  # cache-only's switches
        self.degraded: list[tuple[str, str]] = []
        self.flying: set[str] = set()
        self.reads = 0
        self.down = False

    async def backlog(self) -> Backlog:
        if self.down:
            raise ProjectionUnavailable("PostgreSQL is down")
        self.reads += 1
        return self.backlog_now

    async def modes_on(self) -> dict[str, list[tuple[str, str]]]:
        return {mode: on for mode, on in (("cache_only", self.modes), ("degraded", self.degraded)) if on}

    async def in_flight(self, fingerprints: list[str]) -> set[str]:
        return self.flying & set(fingerprints)


def admission(reader: Reader, max_backlog_s: float = 10.0) -> Admission:
    return Admission(reader, max_backlog_s, refresh_s=3600)  # type: ignore[arg-type]


async def test_under_the_limit_everything_is_taken_and_counted_toward_the_next_decision():
    reader = Reader(Backlog(syntheses=1, chars=50, chars_per_s=10.0, tenants={"default": 50}))  # 5 s of work
    gate = admission(reader)
    await gate.admit({"a": 40})  # 9 s with it: taken
    with pytest.raises(Rejected) as refused:
        await gate.admit({"b": 20})  # 11 s: what this API accepted since its reading counts
    assert refused.value.status == 429
    assert refused.value.retry_after == 1
    assert "over VOXLOG_MAX_BACKLOG_S (10 s)" in str(refused.value)
    assert reader.reads == 1, "one reading of the projection serves every decision until it is stale"


async def test_regression_a_text_submitted_again_counted_its_work_again_and_refused_new_texts():
    """The estimate summed every request: 1,000 submissions of 161 texts refused 69 new texts while the real
    backlog was a quarter of the limit. A fingerprint accepted since the reading now counts once."""
    gate = admission(Reader(Backlog(syntheses=1, chars=50, chars_per_s=10.0, tenants={"default": 50})))  # 5 s of work
    for _ in range(50):
        await gate.admit({"same": 20})  # 7 s with it, however often it comes
    await gate.admit({"other": 25})  # 9.5 s: a new text still fits
    with pytest.raises(Rejected):
        await gate.admit({"third": 10})  # 10.5 s


async def test_retry_after_is_the_time_the_fleet_needs_to_bring_the_backlog_under_the_limit():
    gate = admission(
        Reader(Backlog(syntheses=10, chars=1000, chars_per_s=10.0, tenants={"default": 1000})), max_backlog_s=30
    )  # 100 s of work
    with pytest.raises(Rejected) as refused:
        await gate.admit({"new": 10})
    assert (refused.value.status, refused.value.retry_after) == (429, 71)
    assert refused.value.headers() == {"Retry-After": "71"}


async def test_a_duplicate_of_a_job_in_flight_is_taken_over_the_limit_and_in_cache_only_mode():
    reader = Reader(Backlog(syntheses=10, chars=1000, chars_per_s=1.0, tenants={"default": 1000}))
    reader.flying = {"running"}
    await admission(reader).admit({"running": 500})
    reader.modes = [("operator", "maintenance")]
    await admission(reader).admit({"running": 500})
    with pytest.raises(Rejected):  # a batch with one new synthesis among duplicates is refused
        await admission(reader).admit({"running": 5, "new": 5})


async def test_cache_only_mode_refuses_new_syntheses_with_503_and_says_who_set_it():
    reader = Reader(
        Backlog(syntheses=0, chars=0, chars_per_s=10.0, tenants={"default": 0}),
        modes=[("backlog", "the backlog is 4000 s")],
    )
    with pytest.raises(Rejected) as refused:
        await admission(reader).admit({"new": 10})
    assert refused.value.status == 503
    assert "cache-only mode (backlog: the backlog is 4000 s)" in str(refused.value)
    assert refused.value.headers() == {"Retry-After": "30"}


@pytest.mark.parametrize(
    ("backlog", "max_backlog_s"),
    [
        (
            Backlog(syntheses=10**6, chars=10**9, chars_per_s=None, tenants={"default": 10**9}),
            10.0,
        ),  # no worker has measured its speed
        (Backlog(syntheses=10**6, chars=10**9, chars_per_s=1.0, tenants={"default": 10**9}), 0.0),  # no limit
    ],
)
async def test_without_a_speed_or_a_limit_nothing_is_refused(backlog, max_backlog_s):
    await admission(Reader(backlog), max_backlog_s).admit({"x": 10**6})


async def test_while_the_projection_is_down_submissions_are_taken():
    reader = Reader(Backlog(syntheses=10, chars=10**6, chars_per_s=1.0, tenants={"default": 10**6}))
    reader.down = True
    await admission(reader).admit({"x": 10})


class Modes:
    def __init__(self, backlog: Backlog, on: bool = False) -> None:
        self.backlog_now, self.on = backlog, on
        self.published: list[ServiceModeSet] = []
        self.asked: list[str] = []  # the modes whose state was read

    async def backlog(self) -> Backlog:
        return self.backlog_now

    async def state(self, mode: str) -> bool:
        self.asked.append(mode)
        return self.on

    async def publish(self, event: ServiceModeSet) -> None:
        self.published.append(event)


def switch(modes: Modes, threshold_s: float = 100.0, mode: ServiceMode = "cache_only") -> BacklogSwitch:
    return BacklogSwitch(mode, threshold_s, modes.backlog, modes.state, modes.publish, PRODUCER)


async def test_the_backlog_switch_turns_on_above_its_threshold_and_off_only_under_half_of_it():
    modes = Modes(Backlog(syntheses=5, chars=1010, chars_per_s=10.0, tenants={"default": 1010}))  # 101 s
    keeper = switch(modes)
    assert await keeper.check() is True
    [on] = modes.published
    assert (on.payload.mode, on.payload.enabled, on.payload.source) == ("cache_only", True, "backlog")
    assert "101 s of work, over 100 s" in on.payload.reason
    modes.backlog_now = Backlog(
        syntheses=3, chars=600, chars_per_s=10.0, tenants={"default": 600}
    )  # 60 s: under the threshold, not half
    assert await keeper.check() is None, "no flapping between half and the threshold"
    modes.backlog_now = Backlog(syntheses=2, chars=400, chars_per_s=10.0, tenants={"default": 400})  # 40 s
    assert await keeper.check() is False
    assert [e.payload.enabled for e in modes.published] == [True, False]


async def test_the_backlog_switch_follows_the_projection_after_a_restart_and_ignores_an_unknown_speed():
    modes = Modes(
        Backlog(syntheses=1, chars=10, chars_per_s=10.0, tenants={"default": 10}), on=True
    )  # switched on by a previous leader
    assert await switch(modes).check() is False
    assert (
        await switch(Modes(Backlog(syntheses=10**6, chars=10**9, chars_per_s=None, tenants={"default": 10**9}))).check()
        is None
    )
    assert (
        await switch(
            Modes(Backlog(syntheses=1, chars=10**9, chars_per_s=1.0, tenants={"default": 10**9})), threshold_s=0
        ).check()
        is None
    )


@pytest.mark.parametrize("mode", ["cache_only", "degraded"])
async def test_each_mode_has_its_own_backlog_switch_reading_and_switching_that_mode_only(mode):
    modes = Modes(Backlog(syntheses=5, chars=1010, chars_per_s=10.0, tenants={"default": 1010}))  # 101 s
    keeper = switch(modes, mode=mode)
    assert await keeper.check() is True
    modes.backlog_now = Backlog(syntheses=1, chars=10, chars_per_s=10.0, tenants={"default": 10})
    modes.on, keeper._published = True, None  # a restarted leader: it reads the projection of its own mode
    assert await keeper.check() is False
    assert [(e.payload.mode, e.payload.enabled, e.payload.source) for e in modes.published] == [
        (mode, True, "backlog"),
        (mode, False, "backlog"),
    ]
    assert set(modes.asked) == {mode}


async def test_the_degraded_switch_is_off_by_default_however_large_the_backlog():
    modes = Modes(Backlog(syntheses=10**6, chars=10**9, chars_per_s=1.0, tenants={"default": 10**9}))
    from foundation.settings import SweeperSettings

    assert SweeperSettings.model_fields["degrade_backlog_s"].default == 0
    assert await switch(modes, threshold_s=0, mode="degraded").check() is None
    assert modes.published == []


async def test_degraded_mode_refuses_nothing_and_admission_says_who_holds_it_on():
    reader = Reader(Backlog(syntheses=0, chars=0, chars_per_s=10.0, tenants={"default": 0}))
    gate = admission(reader)
    assert await gate.degraded() is None
    reader.degraded = [("backlog", "the backlog is 400 s"), ("operator", "launch day")]
    gate = admission(reader)
    await gate.admit({"new": 10})
    assert await gate.degraded() == "backlog: the backlog is 400 s; operator: launch day"
    reader.down = True
    assert await admission(reader).degraded() is None, "nothing is degraded while the modes cannot be read"


async def test_regression_one_tenants_flood_is_refused_while_another_tenant_is_still_taken():
    """Issue 40, item 5: the backlog limit was fleet-wide, so one tenant's flood got every tenant a 429 while
    the workers scheduled fairly. Over the limit, a tenant is refused only past its share of it."""
    flood = Backlog(syntheses=500, chars=1000, chars_per_s=10.0, tenants={"mallory": 1000})  # 100 s, all hers
    gate = admission(Reader(flood), max_backlog_s=60)
    with pytest.raises(Rejected) as refused:
        await gate.admit({"more": 10}, "mallory")
    assert refused.value.status == 429
    assert "101 s of it is tenant mallory's, over its share (60 s)" in str(refused.value)
    await gate.admit({"alices": 100}, "alice")  # 10 s of alice's: under her share (30 s of 60, two tenants)
    await gate.admit({"alices-2": 150}, "alice")  # 25 s: still under
    with pytest.raises(Rejected) as over:
        await gate.admit({"alices-3": 100}, "alice")  # 35 s: past her share; the fleet is over too
    assert "tenant alice's, over its share (30 s)" in str(over.value)
    assert "mallory" not in str(over.value), "a refusal names no other tenant"
    await gate.admit({"bobs": 50}, "bob")  # three tenants with work: 20 s each, bob has 5 s


async def test_under_the_fleets_limit_a_tenant_past_its_share_is_still_taken():
    mostly_hers = Backlog(syntheses=5, chars=400, chars_per_s=10.0, tenants={"mallory": 350, "alice": 50})
    await admission(Reader(mostly_hers), max_backlog_s=60).admit({"more": 100}, "mallory")  # 50 s of 60


async def test_retry_after_for_a_tenant_past_its_share_is_its_own_excess_drained_at_its_share():
    backlog = Backlog(syntheses=10, chars=2000, chars_per_s=10.0, tenants={"mallory": 1300, "alice": 700})
    with pytest.raises(Rejected) as refused:
        await admission(Reader(backlog), max_backlog_s=100).admit({"x": 10}, "mallory")
    # The fleet: 201 s, 101 over. Mallory: 131 s, 81 over her 50 s share, drained at half the fleet: 162 s.
    assert refused.value.retry_after == 101
    with pytest.raises(Rejected) as alices:
        await admission(Reader(backlog), max_backlog_s=100).admit({"y": 10}, "alice")
    assert alices.value.retry_after == 42, "alice: 71 s, 21 over her share, at half the fleet's speed"
