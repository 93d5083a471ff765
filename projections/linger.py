"""When the projector waits between batches: only while jobs queue up, so that batches grow.

A batch costs the projector about the same whatever its size: a fetch from
Kafka, a read and a write in PostgreSQL, and a NOTIFY the API handles
(projections.batch_apply). Applied as soon as records arrive, a backlog of
zero-time jobs made batches of two to four records and spent about 5 ms of
CPU per job across the projector, PostgreSQL and the broker; waiting 10 ms
before each fetch cut that to about 2 ms (docs/benchmarks.md, scenario (a)).

Waiting costs latency, which matters when nothing else does: a lone job
would become visible up to the wait later. So the projector lingers only
while at least ``backlog`` jobs are live (queued, claimed or released for a
retry), as the log it applied says: then each of them waits behind the
others anyway, and the wait is small beside that. The count is the
projector's own, folded from the outcomes of the batches it applied since it
started: a restart forgets the jobs live before it, which only makes it
linger less (never below zero) until they end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from contracts import JobEvent, JobQueued
from contracts.job_state import RULES, TERMINAL_STATES, rule_name
from projections.reducer import Outcome


@dataclass(frozen=True)
class Linger:
    seconds: float = 0.0  # 0: never linger
    backlog: int = 8  # live jobs from which to linger


NEVER: Final = Linger()


class LiveJobs:
    """Jobs queued and not yet ended, as the applied events tell (each job has one applied end)."""

    def __init__(self) -> None:
        self.count = 0

    def observe(self, seen: Iterable[tuple[JobEvent, Outcome]]) -> None:
        for event, outcome in seen:
            if outcome is not Outcome.APPLIED:
                continue
            if isinstance(event, JobQueued):
                self.count += 1
            elif ends_a_job(event):
                self.count = max(self.count - 1, 0)

    def linger_s(self, linger: Linger) -> float:
        """How long to wait before the next fetch."""
        return linger.seconds if linger.seconds > 0 and self.count >= linger.backlog else 0.0


def ends_a_job(event: JobEvent) -> bool:
    """Whether ``event``, applied, leaves its job in a terminal state (the state machine says which do)."""
    rule = RULES.get(rule_name(event))
    return rule is not None and rule.to_state in TERMINAL_STATES
