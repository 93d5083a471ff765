"""A local Kafka cluster: one node, or several combined controller+broker nodes with one KRaft quorum.

Each node is a :class:`~infra.kafka_broker.KafkaBroker` with its own data directory and ports. One node
lives in ``<home>`` itself (the layout of a single broker, so an existing stack keeps its data); the
nodes of a cluster in ``<home>/node-<id>``, formatted together on first start (one cluster id, every
node a voter of the initial quorum). ``<home>/cluster.json`` records how many nodes the data is for: a
cluster is never silently restarted with another size.

Three combined nodes are the smallest real replicated cluster: a quorum that survives the loss of one
node, three replicas for every partition (see :mod:`infra.kafka_replication`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aiokafka.errors import KafkaError

from infra.errors import InfraError
from infra.kafka_broker import JitMode, KafkaBroker, KafkaBrokerConfig, SaslSslListener, new_cluster_id
from infra.kafka_health import ClusterHealth, cluster_health
from infra.processes import pid_alive, tail, wait_gone
from infra.status import ServiceStatus

LAYOUT_FILE: Final = "cluster.json"


@dataclass(frozen=True)
class KafkaClusterConfig:
    home: Path
    ports: Sequence[tuple[int, int]]  # (client port, controller port) of node 1, 2, ...
    heap: str  # each node's
    jar_cache: Path
    host: str = "127.0.0.1"
    listener: SaslSslListener | None = None
    probe_options: Mapping[str, Any] = field(default_factory=dict)
    jit: JitMode = "full"


def recorded_size(home: Path) -> int | None:
    """How many nodes the data under ``home`` is for (None: no data yet)."""
    layout = home / LAYOUT_FILE
    if layout.exists():
        size: int = json.loads(layout.read_text())["nodes"]
        return size
    return 1 if (home / "data" / "meta.properties").exists() else None  # a single broker's, from before


class KafkaCluster:
    """Lifecycle of the local nodes: format, start, wait until every broker is registered, stop, break."""

    def __init__(self, config: KafkaClusterConfig) -> None:
        if not config.ports:
            raise InfraError("a Kafka cluster needs at least one node")
        used = [port for pair in config.ports for port in pair]
        if len(set(used)) != len(used):
            raise InfraError(f"the Kafka nodes' ports {list(config.ports)} overlap: every port must differ")
        self.config = config
        voters = tuple((i, controller) for i, (_, controller) in enumerate(config.ports, 1))
        single = len(config.ports) == 1
        self.nodes = [
            KafkaBroker(
                KafkaBrokerConfig(
                    home=config.home if single else config.home / f"node-{i}",
                    port=port,
                    controller_port=controller,
                    heap=config.heap,
                    jar_cache=config.jar_cache,
                    host=config.host,
                    listener=config.listener,
                    probe_options=config.probe_options,
                    node_id=i,
                    voters=() if single else voters,
                    jit=config.jit,
                )
            )
            for i, (port, controller) in enumerate(config.ports, 1)
        ]

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def bootstrap_servers(self) -> str:
        """Every node's client endpoint, comma-separated: a client reaches the cluster while any one is up."""
        return ",".join(node.config.bootstrap_servers for node in self.nodes)

    def node(self, node_id: int) -> KafkaBroker:
        if not 1 <= node_id <= self.size:
            raise InfraError(f"there is no Kafka node {node_id}: the nodes are 1 to {self.size}")
        return self.nodes[node_id - 1]

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> list[int]:
        """Start every node that is not running (formatting the storage on first start); their pids."""
        recorded = recorded_size(self.config.home)
        if recorded is not None and recorded != self.size:
            raise InfraError(
                f"the Kafka data in {self.config.home} is for {recorded} broker(s), not {self.size}; start it with"
                f" {recorded}, or remove the data (voxlog dev down --purge) to start afresh"
            )
        for node in self.nodes:
            node.write_properties()
        if self.size > 1:
            self._format()
        self.config.home.mkdir(parents=True, exist_ok=True)
        (self.config.home / LAYOUT_FILE).write_text(json.dumps({"nodes": self.size}))
        return [node.start() for node in self.nodes]

    def _format(self) -> None:
        formatted = [node.config.node_id for node in self.nodes if node.formatted()]
        if len(formatted) == self.size:
            for node in self.nodes:
                node.format_storage()  # checks the ports it was formatted for
            return
        if formatted:
            raise InfraError(
                f"only nodes {formatted} of the Kafka cluster in {self.config.home} hold data: remove it"
                " (voxlog dev down --purge) to start afresh"
            )
        cluster_id = new_cluster_id()
        controllers = ",".join(
            f"{node.config.node_id}@{node.config.host}:{node.config.controller_port}:{new_cluster_id()}"
            for node in self.nodes
        )
        with ThreadPoolExecutor(self.size) as pool:  # a JVM each: side by side
            list(pool.map(lambda node: node.format_storage(cluster_id, controllers), self.nodes))

    async def wait_ready(self, within_s: float, *, nodes: Sequence[int] | None = None) -> None:
        """Until every node (or ``nodes``) is registered as a broker and every partition has a leader."""
        wanted = set(nodes or range(1, self.size + 1))
        if self.size == 1:
            await self.nodes[0].wait_ready(within_s)
            return
        deadline = time.monotonic() + within_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            for node_id in wanted:
                if self.node(node_id).pid() is None:
                    log = tail(self.node(node_id).log_file)
                    raise InfraError(f"Kafka node {node_id} exited during start; its log ends with:\n{log}")
            try:
                health = await self.health()
            except (KafkaError, OSError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                missing = sorted(wanted - set(health.brokers))
                if not missing and not health.leaderless:
                    return
                last = f"nodes {missing} not registered" if missing else f"{len(health.leaderless)} without a leader"
            await asyncio.sleep(0.5)
        raise InfraError(f"the Kafka cluster at {self.bootstrap_servers} was not ready within {within_s:.0f}s ({last})")

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop every node at once (one by one, the last would wait for a quorum that is gone)."""
        with ThreadPoolExecutor(self.size) as pool:
            return all(pool.map(lambda node: node.stop(timeout), self.nodes))

    # -- faults: what a crash does to a node (chaos runs and fault tests) ------------------------------
    def kill(self, node_id: int = 1) -> None:
        """SIGKILL node ``node_id``, as a crash or the OOM killer would."""
        pid = self.node(node_id).pid()
        if pid is None:
            raise InfraError(f"Kafka node {node_id} is not running")
        os.kill(pid, signal.SIGKILL)
        if not wait_gone(pid, 30):
            raise InfraError(f"Kafka node {node_id} (pid {pid}) survived SIGKILL")

    def signal(self, node_id: int, sig: signal.Signals) -> None:
        """Send ``sig`` to node ``node_id`` (SIGSTOP: a node that hangs, in a GC pause or a stalled disk)."""
        pid = self.node(node_id).pid()
        if pid is None:
            raise InfraError(f"Kafka node {node_id} is not running")
        os.kill(pid, sig)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> bool:
        """Stop node ``node_id`` cleanly, as an upgrade does: SIGTERM, so that it hands its leaderships over
        (a controlled shutdown) before it exits."""
        return self.node(node_id).stop(timeout)

    async def wait_in_sync(self, within_s: float) -> None:
        """Until every node is registered and no partition lacks a leader or an in-sync replica: after a
        node came back, until it caught up (another node may be lost only then without losing writes)."""
        deadline = time.monotonic() + within_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            try:
                health = await self.health()
            except (KafkaError, OSError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                missing = sorted(set(range(1, self.size + 1)) - set(health.brokers))
                if not missing and not health.leaderless and not health.under_replicated:
                    return
                last = (
                    f"nodes {missing} not registered, {len(health.leaderless)} partition(s) without a leader, "
                    f"{len(health.under_replicated)} under-replicated"
                )
            await asyncio.sleep(0.5)
        raise InfraError(f"the Kafka cluster was not in sync within {within_s:.0f}s ({last})")

    async def restart(self, node_id: int, within_s: float) -> None:
        """Start node ``node_id`` again and wait until it is a registered broker."""
        self.node(node_id).start()
        await self.wait_ready(within_s, nodes=[node_id])

    # -- what it says of itself -----------------------------------------------------------------------
    async def health(self) -> ClusterHealth:
        return await cluster_health(self.bootstrap_servers, self.config.probe_options)

    async def statuses(self) -> list[ServiceStatus]:
        """A line per node (``kafka`` alone; ``kafka-<id>`` in a cluster, the active controller named), and in
        a cluster one for the partitions short of a replica or a leader (up when there are none)."""
        if self.size == 1:
            return [await self.nodes[0].status()]
        try:
            health: ClusterHealth | None = await self.health()
        except (KafkaError, OSError, TimeoutError):
            health = None
        lines = [self._node_status(node, health) for node in self.nodes]
        return [*lines, replicas_status(health)]

    def _node_status(self, node: KafkaBroker, health: ClusterHealth | None) -> ServiceStatus:
        node_id, pid = node.config.node_id, node.pid()
        registered = health is not None and node_id in health.brokers
        role = "controller (active)" if health is not None and health.controller == node_id else "controller"
        detail = f"node {node_id}, broker + {role}" if registered else "not registered as a broker"
        if pid is None:
            detail = "not running"
        up = pid is not None and pid_alive(pid) and registered
        return ServiceStatus(f"kafka-{node_id}", up, node.config.bootstrap_servers, pid=pid, detail=detail)


def replicas_status(health: ClusterHealth | None) -> ServiceStatus:
    """The cluster's partitions: how many lack an in-sync replica, and which (the first few)."""
    if health is None:
        return ServiceStatus("replicas", False, "-", detail="no broker answered")
    shown = ", ".join(health.under_replicated[:8]) + (", ..." if len(health.under_replicated) > 8 else "")
    detail = f"{len(health.under_replicated)} under-replicated partition(s)" + (f": {shown}" if shown else "")
    if health.leaderless:
        detail += f"; {len(health.leaderless)} without a leader: {', '.join(health.leaderless[:8])}"
    return ServiceStatus("replicas", not health.under_replicated and not health.leaderless, "-", detail=detail)
