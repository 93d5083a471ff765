"""The worker's outlook reads grouped: claims taken together ask the projection about their jobs in one query.

Before each claim the worker reads the job's :class:`Outlook` (cancelled? a
live result of its fingerprint to reuse?). Under a backlog many claims are
taken at once: one outlook query is in flight at a time, and the jobs asked
while it runs go together in the next one (:mod:`consumers.grouped_reads`),
not one query per job. The projection unreadable reaches every asker of the
query, which then does without it (``Outlook()``) as it would alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Protocol, TypeAlias

from consumers.grouped_reads import GroupedReads
from projections.reads.worker import Outlook

_Asked: TypeAlias = tuple[uuid.UUID, str, datetime]  # a job, its fingerprint, and when its asker asked


class OutlookLookup(Protocol):
    async def outlooks(self, asked: Collection[tuple[uuid.UUID, str]], now: datetime) -> dict[uuid.UUID, Outlook]:
        """The outlook of each (job, fingerprint) asked, results live at ``now``, in one query; raises
        ``ProjectionUnavailable``."""
        ...


class OutlookSource(Protocol):
    async def outlook(self, job_id: uuid.UUID, fingerprint: str, now: datetime) -> Outlook: ...


class GroupedOutlooks:
    def __init__(self, lookup: OutlookLookup) -> None:
        self._lookup = lookup
        self._reads: GroupedReads[_Asked, Outlook] = GroupedReads(self._read)

    async def outlook(self, job_id: uuid.UUID, fingerprint: str, now: datetime) -> Outlook:
        """``job_id``'s outlook, read with those of the jobs asked about meanwhile; raises ``ProjectionUnavailable``."""
        asked = (job_id, fingerprint, now)
        # Unanswered: the query's leader was cancelled first (its attempt ended). A claim is not made blind when a
        # later query can tell it: asked again (it leads or joins the next group, so this ends).
        while (answer := await self._reads.ask(asked)) is None:
            pass
        return answer.get(asked, Outlook())

    async def _read(self, asked: Sequence[_Asked]) -> dict[_Asked, Outlook]:
        # One time for the group, its latest: a result live then is live at every asker's time.
        now = max(when for _, _, when in asked)
        found = await self._lookup.outlooks([(job_id, fingerprint) for job_id, fingerprint, _ in asked], now)
        return {key: found[key[0]] for key in asked if key[0] in found}
