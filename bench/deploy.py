"""Deployments under test: voxlog's processes or the baseline's, on the bench's Kafka and Postgres.

Each deployment is a :class:`voxlog.deployment.Deployment`: its own schema
(and, for voxlog, its own topics and consumer group), its own blob directory
and log files, stopped by the ``async with`` that started it, whatever
happens inside.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

import httpx

from foundation.kafka_access import KafkaAccess
from foundation.metrics import parse_totals
from infra.processes import free_port
from voxlog import deployment
from voxlog.devstack import SOURCE_ROOT

ROOT: Final = SOURCE_ROOT
System = Literal["voxlog", "baseline"]


class Deployment(deployment.Deployment):
    """One system's processes: an API, workers added on demand (and voxlog's projector)."""

    def __init__(
        self,
        system: System,
        kafka: KafkaAccess,
        database_url: str,
        home: Path,
        engine_env: Mapping[str, str],
        *,
        drop_data: bool = False,
    ) -> None:
        super().__init__(kafka, database_url, home, prefix=system[:2], env=engine_env)
        self.system = system
        self.drop_data = drop_data  # drop its schema and topics on exit (a shared server, as in tests)
        self.metrics_ports: dict[str, int] = {}  # worker -> the port its /metrics is on

    def argv(self, process: str) -> list[str]:
        if self.system == "voxlog":
            return super().argv(process)
        return [sys.executable, "-m", "bench.baseline", process]

    async def __aenter__(self) -> Deployment:
        try:
            if self.system == "voxlog":
                await self.create_topics()
                self.start("projector")
            self.start("api", ready=f"{self.api}/readyz")
            await self.wait_ready("api")
        except BaseException:
            self.stop_all()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop_all()
        if self.drop_data:
            await self.drop(topics=self.system == "voxlog")

    async def scale_to(self, count: int, within_s: float = 180.0) -> None:
        """Start workers until ``count`` run, and wait until every one takes work."""
        while len(self.metrics_ports) < count:
            index, port = len(self.metrics_ports), free_port()
            name = f"worker-{index}"
            extra = {"VOXLOG_WORKER_ID": f"{self.tag}-w{index}", "VOXLOG_METRICS_PORT": str(port)}
            self.start(name, extra=extra, ready=f"http://127.0.0.1:{port}/metrics")
            self.metrics_ports[name] = port
        for name in self.metrics_ports:
            await self.wait_ready(name, within_s)
        await self.until_members(count, within_s, nodes_table="nodes" if self.system == "voxlog" else "bl_nodes")

    async def engine_totals(self) -> dict[str, float]:
        """The workers' engine counters, summed: synthesis seconds, audio seconds, segments rendered."""
        totals: dict[str, float] = {}
        async with httpx.AsyncClient(timeout=10) as client:
            for port in self.metrics_ports.values():
                text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                for key, value in parse_totals(text).items():
                    totals[key] = totals.get(key, 0.0) + value
        return {
            "synthesis_s": totals.get("voxlog_synthesis_seconds_total", 0.0),
            "audio_s": totals.get("voxlog_audio_seconds_total", 0.0),
            "segments": totals.get("voxlog_segments_rendered_total", 0.0),
        }
