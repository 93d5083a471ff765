"""The jobs not finished yet, as SQL over the ``jobs`` projection: one spelling for the API, the workers and the
limits ledger.

Live means queued, claimed or released for a retry (``contracts.job_state.LIVE_STATES``).
"""

from __future__ import annotations

from typing import Final

from contracts.job_state import LIVE_STATES

LIVE_SQL: Final = ", ".join(f"'{state.value}'" for state in sorted(LIVE_STATES))
"""The live states as an SQL list: ``state IN ({LIVE_SQL})``."""

WANTED_ELSEWHERE: Final = (
    f"SELECT EXISTS (SELECT 1 FROM jobs WHERE fingerprint = $1 AND job_id <> $2 AND state IN ({LIVE_SQL}))"
)
"""Whether a live job of fingerprint ``$1`` other than job ``$2`` waits for the same audio (a duplicate
that would coalesce onto it): then a cancelled job's synthesis is not thrown away."""


def job_partition_sql(jobs_alias: str) -> str:
    """The partition a job's events are in, as an SQL expression over ``jobs`` row ``jobs_alias``: that of any
    of its projected events (they share one partition). NULL before the projection shows one."""
    return (
        f"(SELECT e.kafka_partition FROM job_events e WHERE e.job_id = {jobs_alias}.job_id"
        " ORDER BY e.kafka_offset LIMIT 1)"
    )


def job_ended_sql(alias: str) -> str:
    """Whether the projection shows the job of row ``alias`` (one with a ``job_id`` column) ended (completed,
    failed or cancelled), as an SQL condition: false for a job not projected yet, as for a live one."""
    return f"EXISTS (SELECT 1 FROM jobs ended WHERE ended.job_id = {alias}.job_id AND ended.state NOT IN ({LIVE_SQL}))"
