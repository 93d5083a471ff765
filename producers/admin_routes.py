"""The operator's switches over HTTP, under the admin scope: cache-only and degraded mode, and cache purges.

They do what ``voxlog admin cache-only|degraded`` and ``voxlog cache purge`` do (the
same code, through :class:`producers.ports.Operations`): a switch is a
``ServiceModeSet`` event that every API follows once the projector applies it,
a purge is one ``CacheEvicted`` per result. Each says who asked: the reason
recorded names the key, unless the caller gives one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Final

from litestar import Response, get, post
from litestar.params import Body
from pydantic import ConfigDict, Field, model_validator

from producers.api_keys import Principal
from producers.auth import ADMIN
from producers.deps import Injected
from producers.errors import Rejected
from producers.http_errors import responses
from producers.ports import Operations
from producers.views import View

MAX_REASON_CHARS = 500


class CacheOnlySwitch(View):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(description="true: answer only cached or in-flight requests, refuse new syntheses (503)")
    reason: str = Field("", max_length=MAX_REASON_CHARS, description="Shown to refused clients; default: who asked.")


class DegradedSwitch(View):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(
        description="true: take new syntheses at the degraded settings (VOXLOG_DEGRADED_SPEED_FACTOR, "
        "VOXLOG_DEGRADED_SAMPLE_RATE) instead of refusing them"
    )
    reason: str = Field(
        "", max_length=MAX_REASON_CHARS, description="Recorded in each degraded job; default: who asked."
    )


class SwitchView(View):
    enabled: bool
    reason: str
    set_at: datetime


class BacklogView(View):
    syntheses: int
    chars: int = Field(description="The work of those syntheses, in characters said at speed 1 (their expected audio).")
    chars_per_s: float | None
    work_s: float | None = Field(description="Seconds of the fleet's work ahead (null: no worker measured its speed).")


class CacheOnlyView(View):
    cache_only: bool = Field(description="Either switch is on: new syntheses are refused with 503.")
    switches: dict[str, SwitchView] = Field(description="By source: operator (this route, voxlog admin), backlog.")
    backlog: BacklogView


class DegradedView(View):
    degraded: bool = Field(description="Either switch is on: new syntheses are taken at the degraded settings.")
    switches: dict[str, SwitchView] = Field(description="By source: operator (this route, voxlog admin), backlog.")
    backlog: BacklogView


class SwitchAccepted(View):
    enabled: bool
    reason: str
    detail: str


MAX_AGE_S: Final = 100 * 365.25 * 86400  # past this, now minus the age is no timestamp PostgreSQL can hold


class CachePurge(View):
    model_config = ConfigDict(frozen=True, extra="forbid")

    all: bool = Field(False, description="Evict every result.")
    older_than_s: float | None = Field(
        None,
        gt=0,
        le=MAX_AGE_S,
        description="Evict only results completed before then (at most a century: older is every result).",
    )

    @model_validator(mode="after")
    def _one(self) -> CachePurge:
        if self.all == (self.older_than_s is not None):
            raise ValueError('give exactly one of "all": true and "older_than_s"')
        return self


class PurgeView(View):
    evicted: int
    bytes: int
    detail: str


def wired(operations: Operations | None) -> Operations:
    """The operator's actions, or a 404 where this API was started without them (the admin and lexicon routes)."""
    if operations is None:
        raise Rejected("this API was started without the operator's actions", 404)
    return operations


def who_asked(principal: Principal) -> str:
    return f"set over HTTP by key {principal.key_id}" if principal.key_id else "set over HTTP (auth off)"


ACCEPTED = "recorded on the log: every API follows once the projector applies it (GET this route to see)"


@get(
    "/v1/admin/cache-only",
    summary="Cache-only mode: both switches as projected, and the backlog they are judged by",
    guards=ADMIN,
    responses=responses(401, 403, 503),
)
async def get_cache_only(operations: Injected[Operations | None]) -> CacheOnlyView:
    return CacheOnlyView.model_validate(await wired(operations).mode("cache_only"))


@post(
    "/v1/admin/cache-only",
    summary="Switch cache-only mode on or off (a ServiceModeSet event; every API follows once it is projected)",
    guards=ADMIN,
    status_code=202,
    responses=responses(400, 401, 403, 422, 503),
)
async def set_cache_only(
    operations: Injected[Operations | None], principal: Injected[Principal], data: Annotated[CacheOnlySwitch, Body()]
) -> Response[SwitchAccepted]:
    reason = data.reason.strip() or who_asked(principal)
    await wired(operations).set_mode("cache_only", data.enabled, reason)
    return Response(SwitchAccepted(enabled=data.enabled, reason=reason, detail=ACCEPTED), status_code=202)


@get(
    "/v1/admin/degraded",
    summary="Degraded mode: both switches as projected, and the backlog they are judged by",
    guards=ADMIN,
    responses=responses(401, 403, 503),
)
async def get_degraded(operations: Injected[Operations | None]) -> DegradedView:
    return DegradedView.model_validate(await wired(operations).mode("degraded"))


@post(
    "/v1/admin/degraded",
    summary="Switch degraded mode on or off (a ServiceModeSet event; every API follows once it is projected)",
    guards=ADMIN,
    status_code=202,
    responses=responses(400, 401, 403, 422, 503),
)
async def set_degraded(
    operations: Injected[Operations | None], principal: Injected[Principal], data: Annotated[DegradedSwitch, Body()]
) -> Response[SwitchAccepted]:
    reason = data.reason.strip() or who_asked(principal)
    await wired(operations).set_mode("degraded", data.enabled, reason)
    return Response(SwitchAccepted(enabled=data.enabled, reason=reason, detail=ACCEPTED), status_code=202)


@post(
    "/v1/admin/cache/purge",
    summary="Evict results from the cache (CacheEvicted events); their audio goes once no job keeps it",
    guards=ADMIN,
    status_code=200,
    responses=responses(400, 401, 403, 422, 503),
)
async def purge_cache(operations: Injected[Operations | None], data: Annotated[CachePurge, Body()]) -> PurgeView:
    evicted, freed = await wired(operations).purge_cache(None if data.all else data.older_than_s)
    detail = "evicted with CacheEvicted events; their blobs go at the sweeper's rounds once no job keeps them"
    return PurgeView(evicted=evicted, bytes=freed, detail=detail)


ROUTES = [get_cache_only, set_cache_only, get_degraded, set_degraded, purge_cache]
