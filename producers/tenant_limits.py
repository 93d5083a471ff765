"""Each tenant's limits: the settings' defaults, with the tenants ``VOXLOG_TENANT_LIMITS`` sets apart.

A limit of 0 is no limit. The rate and the live jobs are per API key (a
tenant's keys each have their own), the characters and the audio per tenant.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True)
class TenantLimits:
    rate_per_s: float = 20.0
    rate_burst: int = 40
    max_live_jobs: int = 20_000
    chars_per_day: int = 0
    chars_per_month: int = 0
    audio_s_per_day: float = 0.0
    audio_s_per_month: float = 0.0

    @property
    def quotas(self) -> bool:
        """Whether any per-tenant quota applies (else a submission needs no ledger for them)."""
        return any((self.chars_per_day, self.chars_per_month, self.audio_s_per_day, self.audio_s_per_month))


@dataclass(frozen=True)
class Policies:
    default: TenantLimits
    tenants: Mapping[str, TenantLimits]

    def of(self, tenant: str) -> TenantLimits:
        return self.tenants.get(tenant, self.default)

    @classmethod
    def from_settings(cls, default: TenantLimits, overrides: Mapping[str, Mapping[str, float]]) -> Policies:
        counts = {f.name for f in fields(TenantLimits) if f.type == "int"}
        tenants = {}
        for tenant, limits in overrides.items():
            values: dict[str, Any] = {name: int(v) if name in counts else float(v) for name, v in limits.items()}
            tenants[tenant] = replace(default, **values)
        return cls(default, tenants)


NO_LIMITS = Policies(TenantLimits(rate_per_s=0, max_live_jobs=0), {})
"""For tests and tools that judge nothing."""
