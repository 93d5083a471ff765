"""A tenant's usage by day as the API and ``voxlog usage`` show it, from ``usage_daily``'s rows."""

from __future__ import annotations

from datetime import date

from producers.views import View
from projections.reads.rows import UsageRow


class UsageDayView(View):
    tenant: str
    day: date
    requests: int
    chars: int
    syntheses: int
    audio_s_synthesized: float
    audio_s_reused: float  # from the cache or a coalesced duplicate's synthesis


class UsageView(View):
    tenant: str
    since: date
    until: date
    days: list[UsageDayView]
    totals: list[UsageDayView]  # one per tenant, its ``day`` the period's first
    limits: dict[str, float] | None  # the tenant's limits (0: none), when one tenant is shown


def day_view(row: UsageRow) -> UsageDayView:
    return UsageDayView(
        tenant=row.tenant,
        day=row.day,
        requests=row.requests,
        chars=row.chars,
        syntheses=row.syntheses,
        audio_s_synthesized=row.audio_ms_synthesized / 1000,
        audio_s_reused=row.audio_ms_reused / 1000,
    )


def totals(rows: list[UsageRow], since: date) -> list[UsageDayView]:
    by_tenant: dict[str, list[int]] = {}
    for row in rows:
        sums = by_tenant.setdefault(row.tenant, [0, 0, 0, 0, 0])
        for i, value in enumerate(
            (row.requests, row.chars, row.syntheses, row.audio_ms_synthesized, row.audio_ms_reused)
        ):
            sums[i] += value
    return [
        day_view(
            UsageRow(tenant=t, day=since, requests=r, chars=c, syntheses=s, audio_ms_synthesized=a, audio_ms_reused=u)
        )
        for t, (r, c, s, a, u) in by_tenant.items()
    ]
