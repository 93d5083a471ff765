"""Rate limits and quotas (producers.rate_limit, producers.quotas) judged on a ledger in memory: what is
refused, with which status, message and headers; PostgreSQL's ledger has its own tests (integration)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from foundation.settings import ApiSettings
from producers.api_keys import Principal
from producers.errors import Rejected
from producers.limits_ledger import Admitted, Bucket, Reserve, Standing
from producers.quotas import Quotas
from producers.rate_limit import RateLimiter
from producers.tenant_limits import Policies, TenantLimits
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import Log, Reader, client, deps
from tests.unit.test_auth import Keys, api, bearer
from voxlog.composition.configs import tenant_policies

pytestmark = pytest.mark.unit

ALICE = Principal("alice", "0123456789ab", frozenset({"submit", "read"}))
NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class Held:
    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    async def standing(self) -> Standing:
        return self._ledger.current()

    async def settle(self, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        self._ledger.settle_now(lease_id, jobs)

    async def admit(
        self,
        jobs: Sequence[Admitted],
        lease_id: uuid.UUID | None = None,
        reserve: Reserve | None = None,
        ttl_s: float = 0,
    ) -> None:
        self._ledger.admitted += jobs
        if lease_id is not None:
            self._ledger.leases[lease_id] = reserve or Reserve()


class Ledger:
    """The ledger in memory: its standing is ``standing``, plus (``counting``) what was admitted and leased."""

    def __init__(self, standing: Standing | None = None, down: bool = False, counting: bool = False) -> None:
        self.standing = standing or Standing(0, 0, 0, 0, 0)
        self.admitted: list[Admitted] = []
        self.leases: dict[uuid.UUID, Reserve] = {}
        self.forgotten: list[uuid.UUID] = []
        self.down = down
        self.counting = counting
        self.days: list[date] = []

    def current(self) -> Standing:
        if not self.counting:
            return self.standing
        chars = sum(j.chars for j in self.admitted) + sum(r.chars for r in self.leases.values())
        audio = sum(j.audio_ms for j in self.admitted) + sum(r.audio_ms for r in self.leases.values())
        live = sum(j.live for j in self.admitted) + sum(r.live for r in self.leases.values())
        s, leased = self.standing, list(self.leases.values())
        return Standing(
            s.chars_today + chars, s.chars_month + chars, s.audio_ms_today + audio, s.audio_ms_month + audio,
            s.live_jobs + live, sum(r.chars for r in leased), sum(r.audio_ms for r in leased),
            sum(r.live for r in leased),
        )  # fmt: skip

    def settle_now(self, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        reserve = self.leases.pop(lease_id)
        assert sum(j.chars for j in jobs) <= reserve.chars or not reserve.chars, "a lease's jobs are what it held"
        self.admitted += jobs

    @asynccontextmanager
    async def hold(self, tenant: str, key_id: str | None, today: date) -> AsyncIterator[Held]:
        if self.down:
            raise ProjectionUnavailable("cannot read the tenant's usage")
        self.days.append(today)
        yield Held(self)

    async def settle(self, tenant: str, key_id: str | None, lease_id: uuid.UUID, jobs: Sequence[Admitted]) -> None:
        if self.down:
            raise ProjectionUnavailable("cannot write the admissions")
        self.settle_now(lease_id, jobs)

    async def forget(self, job_ids: Sequence[uuid.UUID]) -> None:
        self.forgotten += job_ids


def jobs(*chars: int, live: bool = True) -> list[Admitted]:
    return [Admitted(uuid.uuid4(), n, live) for n in chars]


def quotas(ledger: Ledger, **limits: float) -> Quotas:
    return Quotas(ledger, Policies(replace(TenantLimits(), **limits), {}), clock=lambda: NOON)


async def test_jobs_under_every_limit_are_admitted_and_recorded_as_admitted():
    ledger = Ledger(Standing(chars_today=50, chars_month=50, audio_ms_today=0, audio_ms_month=0, live_jobs=1))
    admitted = await quotas(ledger, chars_per_day=100, max_live_jobs=3).admit(ALICE, batch := jobs(20, 30))
    assert admitted == [job.job_id for job in batch]
    assert ledger.admitted == batch
    assert ledger.days == [NOON.date()]


async def test_characters_over_the_days_quota_are_a_429_until_the_next_utc_day_with_ratelimit_headers():
    ledger = Ledger(Standing(chars_today=90, chars_month=90, audio_ms_today=0, audio_ms_month=0, live_jobs=0))
    with pytest.raises(Rejected) as refused:
        await quotas(ledger, chars_per_day=100).admit(ALICE, jobs(5, 6))
    assert refused.value.status == 429
    assert "tenant alice has 90 characters today (UTC) and this submission adds 11" in str(refused.value)
    assert "VOXLOG_LIMIT_CHARS_PER_DAY" in str(refused.value)
    headers = refused.value.headers()
    assert headers is not None
    assert headers["Retry-After"] == str(12 * 3600)  # noon to midnight
    assert headers["RateLimit-Policy"] == '"chars-day";q=100;w=86400;qu="characters"'
    assert headers["RateLimit"] == f'"chars-day";r=10;t={12 * 3600}'
    assert ledger.admitted == [], "a batch is refused whole"


async def test_the_months_quota_waits_for_the_next_month():
    ledger = Ledger(Standing(chars_today=0, chars_month=999, audio_ms_today=0, audio_ms_month=0, live_jobs=0))
    with pytest.raises(Rejected) as refused:
        await quotas(ledger, chars_per_month=1000).admit(ALICE, jobs(2))
    assert refused.value.status == 429
    assert refused.value.retry_after == round((datetime(2027, 1, 1, tzinfo=UTC) - NOON).total_seconds())


async def test_a_submission_alone_over_a_quota_is_a_413_it_can_never_pass():
    with pytest.raises(Rejected) as refused:
        await quotas(Ledger(), chars_per_day=100).admit(ALICE, jobs(60, 60))
    assert refused.value.status == 413
    assert "this submission alone has 120 characters today (UTC)" in str(refused.value)
    assert refused.value.retry_after is None


async def test_a_keys_live_jobs_count_only_what_a_worker_will_synthesize():
    ledger = Ledger(Standing(chars_today=0, chars_month=0, audio_ms_today=0, audio_ms_month=0, live_jobs=2))
    q = quotas(ledger, max_live_jobs=3)
    await q.admit(ALICE, jobs(5, 5, live=False))  # cache hits, completed at once
    with pytest.raises(Rejected) as refused:
        await q.admit(ALICE, jobs(5, 5))
    assert refused.value.status == 429
    assert "API key 0123456789ab has 2 jobs queued or running and this submission adds 2" in str(refused.value)
    assert refused.value.headers()["RateLimit-Policy"].startswith('"live-jobs";q=3;')  # type: ignore[index]


async def test_regression_audio_quotas_count_the_audio_a_submission_is_expected_to_make():
    """Issue 40, item 4: the audio quotas judged only what was given, so a tenant under its quota by a second
    could submit any amount (speed 0.25, long breaks) and pass it by all it had in flight."""
    under = Ledger(Standing(chars_today=0, chars_month=0, audio_ms_today=50_000, audio_ms_month=0, live_jobs=0))
    await quotas(under, audio_s_per_day=60).admit(ALICE, [Admitted(uuid.uuid4(), 10, True, audio_ms=10_000)])
    assert [job.audio_ms for job in under.admitted] == [10_000], "recorded, counted until its job ends"
    with pytest.raises(Rejected) as refused:
        await quotas(under, audio_s_per_day=60).admit(ALICE, [Admitted(uuid.uuid4(), 10, True, audio_ms=10_001)])
    assert refused.value.status == 429
    assert "50 seconds of audio today (UTC) and this submission adds 10.001, over its limit of 60" in str(refused.value)
    alone = Ledger(Standing(0, 0, 0, 0, 0))
    with pytest.raises(Rejected) as never:
        await quotas(alone, audio_s_per_month=60).admit(ALICE, [Admitted(uuid.uuid4(), 10, True, audio_ms=61_000)])
    assert never.value.status == 413, "a submission that alone has more audio than the month's quota never passes"


async def test_without_limits_nothing_is_read_and_while_postgres_is_down_nothing_is_judged():
    assert await quotas(Ledger(down=True), max_live_jobs=0).admit(ALICE, jobs(10**6)) == []
    assert await quotas(Ledger(down=True), chars_per_day=1).admit(ALICE, jobs(10**6)) == []  # unjudged, taken
    anonymous = Principal("default", None, frozenset())
    ledger = Ledger()
    assert await quotas(ledger, max_live_jobs=1).admit(anonymous, jobs(1, 1)) == [], "live jobs are a key's"


async def test_a_tenant_set_apart_has_its_own_limits(monkeypatch):
    monkeypatch.setenv("VOXLOG_LIMIT_CHARS_PER_DAY", "1000")
    monkeypatch.setenv("VOXLOG_TENANT_LIMITS", '{"alice": {"chars_per_day": 10, "rate_burst": 3}}')
    policies = tenant_policies(ApiSettings())
    assert policies.of("alice").chars_per_day == 10
    assert policies.of("alice").rate_burst == 3
    assert isinstance(policies.of("alice").rate_burst, int)
    assert policies.of("bob").chars_per_day == 1000
    ledger = Ledger()
    with pytest.raises(Rejected):
        await Quotas(ledger, policies, clock=lambda: NOON).admit(ALICE, jobs(11))


def test_an_unknown_limit_of_a_tenant_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("VOXLOG_TENANT_LIMITS", '{"alice": {"chars": 10}}')
    with pytest.raises(ValueError, match="unknown limits"):
        ApiSettings()


class Buckets:
    def __init__(self, *answers: Bucket, down: bool = False) -> None:
        self.answers = list(answers)
        self.down = down
        self.asked: list[tuple[str, float, int]] = []
        self.charged: list[tuple[str, float]] = []

    async def take(self, key_id: str, rate_per_s: float, burst: int) -> Bucket:
        if self.down:
            raise ProjectionUnavailable("cannot read the rate limits")
        self.asked.append((key_id, rate_per_s, burst))
        return self.answers.pop(0)

    async def charge(self, key_id: str, tokens: float, rate_per_s: float, burst: int) -> float | None:
        if self.down:
            raise ProjectionUnavailable("cannot read the rate limits")
        self.charged.append((key_id, tokens))
        return -tokens


async def test_a_key_with_a_token_is_answered_with_where_its_rate_stands():
    buckets = Buckets(Bucket(granted=True, tokens=7.0))
    limiter = RateLimiter(buckets, Policies(TenantLimits(rate_per_s=2, rate_burst=10), {}))
    headers = await limiter.take(ALICE)
    assert buckets.asked == [("0123456789ab", 2, 10)]
    assert headers == {"RateLimit-Policy": '"requests";q=10;w=5;qu="requests"', "RateLimit": '"requests";r=7;t=2'}


async def test_a_key_without_a_token_is_a_429_for_as_long_as_the_next_token_takes():
    limiter = RateLimiter(Buckets(Bucket(granted=False, tokens=0.25)), Policies(TenantLimits(rate_per_s=0.5), {}))
    with pytest.raises(Rejected) as refused:
        await limiter.take(ALICE)
    assert refused.value.status == 429
    assert refused.value.retry_after == 2  # 0.75 of a token at half a token a second
    assert "over its rate of 0.5 requests per second" in str(refused.value)
    assert refused.value.headers()["RateLimit"].startswith('"requests";r=0;')  # type: ignore[index]


async def test_no_key_no_rate_and_postgres_down_take_every_request():
    policies = Policies(TenantLimits(rate_per_s=1), {})
    assert await RateLimiter(Buckets(), policies).take(Principal("default", None, frozenset())) == {}
    assert await RateLimiter(Buckets(), Policies(TenantLimits(rate_per_s=0), {})).take(ALICE) == {}
    assert await RateLimiter(Buckets(down=True), policies).take(ALICE) == {}


async def test_a_batch_over_a_quota_is_refused_whole_with_nothing_recorded_and_a_publish_failure_forgets_it():
    ledger = Ledger(Standing(chars_today=95, chars_month=95, audio_ms_today=0, audio_ms_month=0, live_jobs=0))
    log = Log()
    batch = {"requests": [{"text": "One two.", "voice": "af_heart"}] * 3}
    async with client(deps(Reader(), log, quotas=quotas(ledger, chars_per_day=100))) as http:
        refused = await http.post("/v1/batches", json=batch)
    assert refused.status_code == 429, refused.text
    assert refused.headers["RateLimit-Policy"].startswith('"chars-day";q=100;')
    assert log.published == []
    assert ledger.admitted == []

    failing, roomy = Log(takes=1), Ledger()
    async with client(deps(Reader(), failing, quotas=quotas(roomy, chars_per_day=100))) as http:
        unconfirmed = await http.post("/v1/batches", json=batch)
    assert unconfirmed.status_code == 503
    assert sorted(roomy.forgotten) == sorted(job.job_id for job in roomy.admitted), "the log took not all of it"


async def test_regression_a_batch_of_many_jobs_is_charged_a_token_a_job_not_one_for_the_request():
    """Issue 40, item 4: a batch of 10,000 cost one token of its key's rate."""
    keys = Keys()
    key = keys.issue("acme", "submit")
    buckets = Buckets(Bucket(granted=True, tokens=39.0), Bucket(granted=True, tokens=38.0))
    limiter = RateLimiter(buckets, Policies(TenantLimits(rate_per_s=20, rate_burst=40), {}))
    async with api(keys, limiter=limiter) as http:
        batch = [{"text": f"Job {n}.", "voice": "af_heart"} for n in range(7)]
        answer = await http.post("/v1/batches", json={"requests": batch}, headers=bearer(key))
        assert answer.status_code == 202, answer.text
        one = await http.post("/v1/batches", json={"requests": batch[:1]}, headers=bearer(key))
        assert one.status_code == 202, one.text
    assert buckets.charged == [(key.key_id, 6)], "the request's own token paid for the first job"
    down = Buckets(down=True)
    await RateLimiter(down, limiter._policies).charge(Principal("acme", key.key_id, frozenset()), 7)
    assert down.charged == [], "PostgreSQL down: not judged, as a request's token"
