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
from producers.tenant_limits import Policies
from producers.usage_views import UsageView, day_view, totals
from projections.reads.jobs import ProjectionReader

ALL_TENANTS = "*"


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
