"""What a worker's scheduler records: which jobs took the engine while a job waited, and by which rule.

A worker holds several claims and gives the engine, one segment at a time,
to the job its policy puts first (:mod:`consumers.scheduling`). Every job
that waited on the worker carries in its claim what it waited behind before
it was claimed, and in its completion what it waited behind while claimed
(another job's segments between its own): an audit reads from the log alone
why a job took as long as it did. The rule is the first criterion by which
the other job came first: its class (``interactive_first``, or
``batch_turn``: batch work's guaranteed turn), its tenant's use of the worker
against its weight (``fair_share``), its remaining work (``shorter_first``),
or its arrival (``log_order``: it was there first).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Final, Literal

from pydantic import AwareDatetime, Field

from contracts.vocabulary import Frozen, NonNegative, Priority, Tenant

SchedulingRule = Literal["interactive_first", "batch_turn", "fair_share", "shorter_first", "log_order"]
MAX_NAMED: Final = 32
"""How many of the jobs a job waited behind a record may name one by one (what every reader takes)."""
NAMED: Final = 8
"""How many a worker names (the rest are counted): the ones that took the most segments. Records of up to
:data:`MAX_NAMED` stay readable; 8 keep the audit's answer (who held the engine most) at a quarter of the
bytes (a claim and a completion each carried up to 3.9 KB of names, decoded by every reader of the log)."""


class EngineTurns(Frozen):
    """One other job's segments on the engine while this one waited, and why it came first."""

    job_id: uuid.UUID
    tenant: Tenant
    priority: Priority
    segments: Annotated[int, Field(ge=1)]
    rule: SchedulingRule


class WaitedBehind(Frozen):
    """What a job waited behind on its worker over one stretch (before its claim, or during it)."""

    policy: Annotated[str, Field(min_length=1, max_length=64)]
    """The worker's scheduling policy, e.g. ``fair-srpt``: which rules it applies, in order."""
    jobs: Annotated[tuple[EngineTurns, ...], Field(max_length=MAX_NAMED)] = ()
    """The jobs that took the most segments, up to :data:`MAX_NAMED`, most first."""
    job_count: NonNegative = 0
    segment_count: NonNegative = 0
    waited_ms: NonNegative = 0
    """From when the worker read the job (or claimed it) to the end of the stretch."""
    complete: bool = True
    """``False``: the worker's memory of turns did not reach back to the stretch's start (the counts are
    of what it remembers)."""


MAX_QUEUE_SHOWN: Final = 200
"""How many of its waiting jobs a worker names in a heartbeat, in the order it would take them."""


class HeldClaim(Frozen):
    """A claim a worker holds (``NodeHeartbeat`` version 2): its job and attempt, and its progress.
    ``running``: its segment is the one on the engine now; the others wait for their turn, and advance
    when the engine does (``progress_at`` is then the worker's last progress on any of its claims)."""

    job_id: uuid.UUID
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    attempt: NonNegative
    segments_done: NonNegative = 0
    segments_total: NonNegative | None = None
    text_chars: NonNegative = 0
    progress_at: AwareDatetime | None = None
    running: bool = False


class QueuedJob(Frozen):
    """A job waiting on a worker (read, not yet claimed), as the worker would take it."""

    job_id: uuid.UUID
    tenant: Tenant
    priority: Priority
    text_chars: NonNegative


class QueueCount(Frozen):
    """How many jobs of one tenant and priority wait on a worker, and their text."""

    tenant: Tenant
    priority: Priority
    jobs: NonNegative
    text_chars: NonNegative
