"""How many of a tenant's documents are read at once: the offload's processes serve every tenant.

``VOXLOG_OFFLOAD_PROCESSES`` (2) processes parse every tenant's documents; a 13 KiB EPUB that unpacks to 8 MiB
of markup costs seconds of CPU, so two such uploads of one tenant held both, and every tenant's documents
waited behind them. A tenant may now have at most ``VOXLOG_PARSE_PER_TENANT`` documents being read at once;
another of its uploads waits at most 10 s (``voxlog.composition.api.PARSE_SLOT_WAIT_S``) for one of them to end,
then is answered 429
with Retry-After. Other tenants' uploads do not wait for that tenant's: with the default of one, a tenant holds
at most one of the processes.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from producers.audit_slots import FairSlots
from producers.errors import Rejected


class TenantParseSlots:
    """At most ``per_tenant`` parses of one tenant at once, a wait for one bounded by ``wait_s``."""

    def __init__(self, per_tenant: int = 1, wait_s: float = 10.0) -> None:
        self.per_tenant = per_tenant
        self.wait_s = wait_s
        self._tenants: dict[str, tuple[FairSlots, int]] = {}  # a tenant's slots, and the requests using them

    def held(self, tenant: str) -> int:
        """How many parses ``tenant`` has running."""
        found = self._tenants.get(tenant)
        return found[0].held(tenant) if found else 0

    def waiting(self, tenant: str) -> int:
        """How many of ``tenant``'s uploads wait for one of its parses to end."""
        found = self._tenants.get(tenant)
        return found[0].waiting(tenant) if found else 0

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """One of ``tenant``'s slots, held while the block runs; :class:`Rejected` (429, Retry-After) when none
        comes free within ``wait_s``."""
        slots, users = self._tenants.get(tenant) or (FairSlots(self.per_tenant), 0)
        self._tenants[tenant] = (slots, users + 1)
        try:
            try:
                await slots.acquire(tenant, self.wait_s)
            except TimeoutError as exc:
                raise Rejected(
                    f"this tenant has {self.per_tenant} document(s) being read already (VOXLOG_PARSE_PER_TENANT),"
                    f" and none ended within {self.wait_s:g} s: retry after Retry-After",
                    429,
                    retry_after=max(1, math.ceil(self.wait_s)),
                ) from exc
            try:
                yield
            finally:
                slots.release(tenant)
        finally:
            self._forget(tenant)

    def _forget(self, tenant: str) -> None:
        # A tenant's slots are kept only while a request uses them, so the map grows with the tenants
        # uploading now, not with every tenant ever seen.
        slots, users = self._tenants[tenant]
        if users > 1:
            self._tenants[tenant] = (slots, users - 1)
        else:
            del self._tenants[tenant]
