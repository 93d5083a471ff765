"""``GET /v1/usage``: a tenant's usage by day, as the projection counts it from the log.

A key sees its own tenant's; a key with the admin scope may name another
tenant, or ``*`` for every one. The figures are ``usage_daily``'s, which a
replay of the log rebuilds exactly (``voxlog replay --verify``): what a tenant
is billed for can be audited from the log.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Annotated

from litestar import get
from litestar.exceptions import PermissionDeniedException
from litestar.params import QueryParameter

from contracts import utc_now
from contracts.vocabulary import TENANT_PATTERN
from producers.api_keys import Principal
from producers.auth import READ
from producers.deps import Injected
from producers.errors import Rejected
from producers.http_errors import responses
from producers.queries import ProjectionReader
from producers.rows import UsageRow
from producers.tenant_limits import Policies
from producers.views import View

ALL_TENANTS = "*"


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


@get(
    "/v1/usage",
    summary="Your tenant's usage by day (UTC): requests, characters, syntheses, audio synthesized and reused",
    guards=READ,
    responses=responses(401, 403, 422, 503),
)
async def get_usage(
    reader: Injected[ProjectionReader],
    policies: Injected[Policies],
    principal: Injected[Principal],
    since: Annotated[date | None, QueryParameter(description="First day (UTC); default 30 days ago")] = None,
    until: Annotated[date | None, QueryParameter(description="Last day (UTC); default today")] = None,
    tenant: Annotated[
        str | None, QueryParameter(description="Another tenant, or * for every one: needs the admin scope")
    ] = None,
) -> UsageView:
    today = utc_now().date()
    first, last = since or today - timedelta(days=30), until or today
    if first > last:
        raise Rejected(f"since ({first}) is after until ({last}): give since <= until")
    shown = tenant or principal.tenant
    if shown != ALL_TENANTS and not re.fullmatch(TENANT_PATTERN, shown):
        raise Rejected(
            f"tenant {shown!r} is not a tenant's name: lower-case letters, digits, '_', '.', '-' (at most 64), or *"
        )
    if shown != principal.tenant and "admin" not in principal.scopes:
        raise PermissionDeniedException(
            detail=f"API key {principal.key_id} may read only its own tenant's usage; another's needs the admin scope"
        )
    rows = await reader.usage(None if shown == ALL_TENANTS else shown, first, last)
    limits = None if shown == ALL_TENANTS else {k: float(v) for k, v in vars(policies.of(shown)).items()}
    return UsageView(
        tenant=shown,
        since=first,
        until=last,
        days=[day_view(row) for row in rows],
        totals=totals(rows, first),
        limits=limits,
    )
