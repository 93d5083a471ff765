"""Settings of the baseline's two processes (``python -m bench.baseline api|worker``)."""

from __future__ import annotations

from pydantic import Field

from foundation.settings import ApiSettings, WorkerSettings


class BaselineApiSettings(ApiSettings):
    """The baseline API: voxlog's API settings (limits, port, blob dir); Kafka ones are unused."""


class BaselineWorkerSettings(WorkerSettings):
    """A baseline worker: voxlog's worker settings (engine, blob dir, attempts); Kafka ones are unused."""

    baseline_poll_s: float = Field(1.0, gt=0, description="Fallback poll when no NOTIFY arrives.")
    baseline_stale_s: float = Field(60.0, gt=0, description="A claim whose heartbeat is older is requeued.")
