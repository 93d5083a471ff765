"""What the API needs from the outside, as protocols; the composition root hands it the adapters."""

from __future__ import annotations

from typing import Protocol

from contracts import JobQueued


class JobLog(Protocol):
    """The jobs topic, as the API writes it.

    ``publish`` returns once the event is acknowledged (acks=all) and raises
    ``foundation.errors.BrokerUnavailable`` when it cannot be, so that nothing
    half-recorded is ever answered with 202. ``check`` raises the same when
    the log is unreachable (readiness).
    """

    async def publish(self, event: JobQueued) -> object: ...

    async def check(self) -> None: ...
