"""The small types events are built of: an immutable model, a hash, a count, a priority, a tenant."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
NonNegative = Annotated[int, Field(ge=0)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Priority = Literal["interactive", "batch"]
TENANT_PATTERN: Final = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
Tenant = Annotated[str, Field(min_length=1, max_length=64, pattern=TENANT_PATTERN)]
"""Who owns a job, a document or a key: lower-case letters, digits, ``_``, ``.``, ``-``."""
DEFAULT_TENANT: Final = "default"
"""The tenant of everything recorded before tenants existed, and of every request while auth is off."""
