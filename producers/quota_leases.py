"""What an API instance holds of a tenant's quotas and a key's live jobs, to admit submissions from memory.

Judging a submission against the limits took the tenant's advisory lock and
about six PostgreSQL round trips (the transaction, the lock, the prune, the
standing, the admissions, the commit), for every submission. Now, when the
limits are judged there, the instance also takes a *lease*: a share
(:data:`LEASE_SHARE`) of the room each judged limit has left, recorded in
``admission_leases`` in the same statement as the admissions, so that every
other instance counts it as used. For :data:`LEASE_S` the instance admits the
submissions that fit in what its lease has left without asking PostgreSQL;
then (at the next submission that does not fit or finds it old, by the
sweep, or at shutdown) it *settles* it: the jobs it admitted are written as
admissions and the lease deleted, in one statement. A limit is never passed:
every instance's admissions plus every lease are in the standing each judges
by, and a lease's jobs are at most what it held. Near a limit the shares
shrink to nothing, and every submission is judged under the lock, as before.

Two things are counted twice while a lease lives (so a tenant is refused a
little early, never late): a leased job the projector already shows, by the
projection and by the lease, for at most :data:`LEASE_S`. An instance that dies
holding a lease leaves it counted for :data:`LEASE_TTL_S`; its jobs admitted
and not settled are then counted by the projection alone, once projected.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Final

from producers.limits_ledger import Admitted, Reserve
from producers.tenant_limits import TenantLimits

LEASE_S: Final = 2.0  # how long an instance admits from a lease before it settles it
LEASE_TTL_S: Final = LEASE_S + 10.0  # how long PostgreSQL counts a lease its instance never settled
LEASE_SHARE: Final = 8  # a lease holds 1/8 of the room each limit has left


@dataclass
class QuotaLease:
    lease_id: uuid.UUID
    day: date  # quotas count a job on the UTC day it is submitted: a lease serves only its day
    limits: TenantLimits  # the limits it was taken under (a change of them is judged anew)
    at: float  # when it was taken (monotonic)
    chars: int | None  # what it has left (None: no such limit judged)
    audio_ms: int | None
    live: int | None
    admitted: list[Admitted] = field(default_factory=list)

    @classmethod
    def of(
        cls, lease_id: uuid.UUID, day: date, limits: TenantLimits, at: float, reserve: Reserve, judged: Reserve
    ) -> QuotaLease:
        """A lease of ``reserve``; ``judged`` says which limits apply (1) and which do not (0)."""
        return cls(
            lease_id, day, limits, at,
            reserve.chars if judged.chars else None,
            reserve.audio_ms if judged.audio_ms else None,
            reserve.live if judged.live else None,
        )  # fmt: skip

    def serves(self, jobs: Sequence[Admitted], day: date, limits: TenantLimits, now: float) -> bool:
        """Whether ``jobs`` may be admitted from it now."""
        if now - self.at >= LEASE_S or day != self.day or limits != self.limits:
            return False
        need = _need(jobs)
        return all(left is None or wanted <= left for left, wanted in zip(self._left(), need, strict=True))

    def take(self, jobs: Sequence[Admitted]) -> None:
        chars, audio_ms, live = _need(jobs)
        self.chars = None if self.chars is None else self.chars - chars
        self.audio_ms = None if self.audio_ms is None else self.audio_ms - audio_ms
        self.live = None if self.live is None else self.live - live
        self.admitted.extend(jobs)

    def forget(self, job_ids: set[uuid.UUID]) -> set[uuid.UUID]:
        """Give back the jobs of ``job_ids`` admitted from it (the log did not take them): those it had."""
        gone = [job for job in self.admitted if job.job_id in job_ids]
        if gone:
            self.admitted = [job for job in self.admitted if job.job_id not in job_ids]
            chars, audio_ms, live = _need(gone)
            self.chars = None if self.chars is None else self.chars + chars
            self.audio_ms = None if self.audio_ms is None else self.audio_ms + audio_ms
            self.live = None if self.live is None else self.live + live
        return {job.job_id for job in gone}

    def _left(self) -> tuple[int | None, int | None, int | None]:
        return self.chars, self.audio_ms, self.live


def _need(jobs: Sequence[Admitted]) -> tuple[int, int, int]:
    return sum(j.chars for j in jobs), sum(j.audio_ms for j in jobs), sum(1 for j in jobs if j.live)
