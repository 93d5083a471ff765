"""Whether a process that serves no HTTP of its own (worker, projector, sweeper) is doing its work, for the
``/readyz`` its metrics port serves (a Kubernetes readiness probe; the API has its own, on its port).

Ready: the process said it started (its dependencies answered, its loop runs: :func:`mark_started`) and
no dependency is down now, as its loops see it: every wait on one goes through an
:class:`~foundation.outages.Outage`, the same that logs "waiting for ..." and "... available again", so
the probe and the log never disagree.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from foundation.outages import Outage


@dataclass
class _State:
    started: bool = False


_STATE = _State()


def mark_started() -> None:
    """The process is past its start: its dependencies answered once, its loop runs."""
    _STATE.started = True


def readiness() -> tuple[bool, str]:
    """(ready, the JSON document /readyz answers with: what it waits for when it is not)."""
    waiting = Outage.down_now()
    if not _STATE.started:
        waiting = ["its start", *waiting]
    return not waiting, json.dumps({"ready": not waiting, "waiting_for": waiting})
