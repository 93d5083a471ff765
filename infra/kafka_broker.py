"""One Apache Kafka node in KRaft mode (controller and broker in one process), run from Maven Central jars.

The jars are resolved by Maven from ``infra/kafka/pom.xml`` (cached in
``~/.m2`` and copied once into a versioned cache directory), the storage is
formatted on first start, and the broker runs in the background with
``java -cp``. Data stays in ``<home>/data`` across restarts and crashes.

A node alone is its own quorum (``--standalone``); the nodes of a cluster
(:mod:`infra.kafka_cluster`) name every voter (``voters``) and are formatted
with the same initial controllers. :func:`infra.kafka_replication.replication_properties` sizes the
internal topics and the durability defaults by the number of nodes.

The client listener is PLAINTEXT, or (a test stack's :class:`SaslSslListener`)
SASL_SSL: SCRAM logins over TLS, the credentials added to the storage when it is
formatted. The KRaft controller listener stays PLAINTEXT on loopback, and no
authorizer runs (every login may do everything).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from infra.class_archive import ClassArchive
from infra.errors import InfraError
from infra.kafka_health import probe_metadata
from infra.kafka_replication import replication_properties
from infra.processes import pid_alive, read_pid, start_background, stop_pid, tail
from infra.status import ServiceStatus
from infra.tls import ServerTls

POM: Final = Path(__file__).parent / "kafka" / "pom.xml"
LOG4J_CONFIG: Final = Path(__file__).parent / "kafka" / "log4j2.properties"
SCRAM_MECHANISMS: Final = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_SCRAM_LOGIN: Final = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER_SESSION_TIMEOUT_S: Final = 9.0
"""How long the KRaft controller waits for a broker's heartbeat before it fences the broker and moves its
leaderships (Kafka's default for ``broker.session.timeout.ms``)."""


@dataclass(frozen=True)
class SaslSslListener:
    """The client listener as SASL_SSL: SCRAM logins (both mechanisms) over TLS.

    ``logins`` (name -> password) are added to the storage when it is formatted, so they are
    the ones of the first start; the broker itself logs in as ``broker_login`` (the listener is
    also the inter-broker one). ``client_auth`` is whether it asks clients for a certificate.
    """

    tls: ServerTls
    logins: Mapping[str, str]
    broker_login: str
    client_auth: Literal["none", "requested", "required"] = "none"


JitMode = Literal["full", "quick"]
"""The broker JVM's compilers: ``full`` (C1 then C2, for a broker that runs long under load, or whose CPU is
measured), ``quick`` (C1 alone, for one that lives minutes: a test's, a fault campaign's, a laptop's). Measured
here: ``quick`` took half the CPU to start (4.2 s against 8.2) and 1.2 s against 2.0 over its first 20 s idle."""


@dataclass(frozen=True)
class KafkaBrokerConfig:
    home: Path
    port: int
    controller_port: int
    heap: str
    jar_cache: Path
    host: str = "127.0.0.1"
    listener: SaslSslListener | None = None  # None: the client listener is PLAINTEXT
    # aiokafka's security options (protocol, TLS context, login) for the broker's own readiness probe.
    probe_options: Mapping[str, Any] = field(default_factory=dict)
    node_id: int = 1
    # (node id, controller port) of every voter of the cluster, this node's included; empty: a node alone.
    voters: tuple[tuple[int, int], ...] = ()
    jit: JitMode = "full"

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def cluster_size(self) -> int:
        return len(self.voters) or 1

    def quorum_servers(self) -> str:
        """``controller.quorum.bootstrap.servers``: every voter's controller endpoint."""
        ports = [port for _, port in self.voters] or [self.controller_port]
        return ",".join(f"{self.host}:{port}" for port in ports)


class KafkaBroker:
    """Lifecycle of one local broker: resolve jars, format, start, probe, stop."""

    def __init__(self, config: KafkaBrokerConfig) -> None:
        self.config = config
        self.data_dir = config.home / "data"
        self.properties = config.home / "server.properties"
        self.pid_file = config.home / "broker.pid"
        self.log_file = config.home / "broker.log"
        self.ports_file = config.home / "ports.json"

    # -- jars -------------------------------------------------------------
    def jars_dir(self) -> Path:
        """The directory of broker jars, resolved by Maven on first use."""
        digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
        target = self.config.jar_cache / digest
        stamp = target / ".complete"
        if stamp.exists():
            return target
        mvn = shutil.which("mvn")
        if mvn is None:
            raise InfraError("Maven (mvn) is not on PATH; install it (apt-get install maven) to fetch the broker")
        target.mkdir(parents=True, exist_ok=True)
        cmd = [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={target}"]
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise InfraError(f"Maven could not resolve the Kafka jars:\n{result.stdout[-3000:]}{result.stderr[-2000:]}")
        stamp.touch()
        return target

    def java_argv(self, main_class: str, *args: str, tool: bool = False) -> list[str]:
        """The JVM's command line: the broker's, or (``tool``) a short-lived tool's, which needs neither the
        heap nor the optimizing compiler (the storage tool: 3.2 s instead of 4.3 here, 30% less CPU)."""
        return self._java_argv(main_class, *args, tool=tool, write_archive=False)[0]

    def _java_argv(self, main_class: str, *args: str, tool: bool, write_archive: bool) -> tuple[list[str], Path | None]:
        """:meth:`java_argv`; with ``write_archive``, a JVM that writes the class archive at its exit when there
        is none yet (:mod:`infra.class_archive`), and the pending file it writes."""
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
        if java is None:
            raise InfraError("java is not on PATH; install a JDK 17+ (apt-get install openjdk-17-jre-headless)")
        memory = (
            ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
            if tool
            else [f"-Xms{self.config.heap}", f"-Xmx{self.config.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]
            + (["-XX:TieredStopAtLevel=1"] if self.config.jit == "quick" else [])
        )
        archive, pending = ClassArchive(self.jars_dir(), java).flags(write=write_archive)
        return [
            java,
            *memory,
            *archive,
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
            "-cp",
            f"{self.jars_dir()}/*",
            main_class,
            *args,
        ], pending

    # -- configuration ------------------------------------------------------
    def write_properties(self) -> None:
        c = self.config
        c.home.mkdir(parents=True, exist_ok=True)
        lines = {
            "process.roles": "broker,controller",
            "node.id": str(c.node_id),
            "controller.quorum.bootstrap.servers": c.quorum_servers(),
            **self._listener_properties(),
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.num.partitions": "12",
            **replication_properties(c.cluster_size),
            "group.initial.rebalance.delay.ms": "0",
            # Kafka's default, written out: the chaos campaign stops a node for longer than this.
            "broker.session.timeout.ms": str(int(BROKER_SESSION_TIMEOUT_S * 1000)),
            "delete.topic.enable": "true",
            # Sized for the node it runs on (the defaults, 3 and 8, suit a many-core server): on 2 cores the
            # hand-offs between more threads cost CPU (bench, 1,500 jobs: 3.1-3.4 ms of broker CPU per job
            # against 3.5-4.1 with the defaults).
            "num.network.threads": "1",
            "num.io.threads": "2",
        }
        body = "".join(f"{key}={value}\n" for key, value in lines.items())
        self.properties.write_text("# Written by voxlog dev up; edits are overwritten.\n" + body)
        if c.listener is not None:
            self.properties.chmod(0o600)  # it holds the broker's own password

    def _listener_properties(self) -> dict[str, str]:
        c, listener = self.config, self.config.listener
        name = "PLAINTEXT" if listener is None else "SASL_SSL"
        lines = {
            "listeners": f"{name}://{c.host}:{c.port},CONTROLLER://{c.host}:{c.controller_port}",
            "advertised.listeners": f"{name}://{c.host}:{c.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": name,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{name}:{name}",
        }
        if listener is None:
            return lines
        password = listener.logins[listener.broker_login]
        jaas = f'{_SCRAM_LOGIN} required username="{listener.broker_login}" password="{password}";'
        lines |= {
            "sasl.enabled.mechanisms": ",".join(SCRAM_MECHANISMS),
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISMS[0],
            **{f"listener.name.sasl_ssl.{m.lower()}.sasl.jaas.config": jaas for m in SCRAM_MECHANISMS},
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self._keystore(listener.tls)),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(listener.tls.ca_file),
            # Only the listener's own setting asks SASL_SSL clients for a certificate (the global one is SSL's).
            "listener.name.sasl_ssl.ssl.client.auth": listener.client_auth,
            "super.users": f"User:{listener.broker_login}",
        }
        return lines

    def _keystore(self, tls: ServerTls) -> Path:
        """The broker's PEM key store: its private key, then its certificate chain, in one file."""
        keystore = self.config.home / "keystore.pem"
        keystore.write_text(tls.key_file.read_text() + tls.cert_file.read_text())
        keystore.chmod(0o600)
        return keystore

    def _scram_arguments(self) -> list[str]:
        """``--add-scram`` for every login and mechanism: the credentials go into the formatted metadata."""
        listener = self.config.listener
        if listener is None:
            return []
        return [
            f"--add-scram={mechanism}=[name={name},password={password}]"
            for name, password in listener.logins.items()
            for mechanism in SCRAM_MECHANISMS
        ]

    def _check_ports(self) -> None:
        """The controller endpoint is baked into the formatted storage: refuse a change."""
        wanted = {"port": self.config.port, "controller_port": self.config.controller_port}
        if not self.ports_file.exists():
            return
        recorded = json.loads(self.ports_file.read_text())
        if recorded != wanted:
            raise InfraError(
                f"the Kafka data in {self.data_dir} was formatted for ports {recorded}, not {wanted}; "
                "use those ports, or remove the data directory (voxlog dev down --purge) to start afresh"
            )

    def formatted(self) -> bool:
        return (self.data_dir / "meta.properties").exists()

    def format_storage(self, cluster_id: str | None = None, initial_controllers: str | None = None) -> bool:
        """Format the KRaft storage unless it already holds a cluster. Returns whether it did.

        ``initial_controllers`` (``id@host:port:directory-id,...``, the same for every node of a cluster):
        the voters the quorum starts with; None: this node alone (``--standalone``)."""
        if self.formatted():
            self._check_ports()
            return False
        if self.config.voters and not initial_controllers:
            raise InfraError(f"node {self.config.node_id} of a cluster is formatted with the cluster's voters")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        quorum = f"--initial-controllers={initial_controllers}" if initial_controllers else "--standalone"
        # "--cluster-id=ID", not "-t ID": a random id may begin with "-" and read as an option.
        argv = self.java_argv(
            "kafka.tools.StorageTool",
            "format",
            quorum,
            f"--cluster-id={cluster_id or new_cluster_id()}",
            f"--config={self.properties}",
            *self._scram_arguments(),
            tool=True,
        )
        result = subprocess.run(argv, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise InfraError(f"formatting Kafka storage failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        self.ports_file.write_text(
            json.dumps({"port": self.config.port, "controller_port": self.config.controller_port})
        )
        return True

    # -- lifecycle ----------------------------------------------------------
    def pid(self) -> int | None:
        return read_pid(self.pid_file)

    def start(self) -> int:
        """Start the broker unless it is running; returns its pid."""
        running = self.pid()
        if running is not None:
            return running
        self.write_properties()
        self.format_storage()
        argv, pending = self._java_argv("kafka.Kafka", str(self.properties), tool=False, write_archive=True)
        pid = start_background(argv, log_file=self.log_file, pid_file=self.pid_file)
        if pending is not None:
            ClassArchive.written_by(pending, pid)
        return pid

    async def wait_ready(self, within_s: float) -> None:
        """Wait until the broker answers a metadata request with every partition led."""
        deadline = time.monotonic() + within_s
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid is None:
                raise InfraError(f"the Kafka broker exited during start; its log ends with:\n{tail(self.log_file)}")
            ready, last_error = await probe_metadata(self.config.bootstrap_servers, self.config.probe_options)
            if ready:
                return
            await asyncio.sleep(0.5)
        raise InfraError(
            f"Kafka did not answer on {self.config.bootstrap_servers} within {within_s:.0f}s ({last_error}); "
            f"log tail:\n{tail(self.log_file)}"
        )

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after ``timeout``)."""
        pid = self.pid()
        if pid is None:
            return True
        clean = stop_pid(pid, timeout=timeout, name="kafka broker")
        self.pid_file.unlink(missing_ok=True)
        return clean

    async def status(self) -> ServiceStatus:
        pid = self.pid()
        if pid is None:
            return ServiceStatus("kafka", up=False, endpoint=self.config.bootstrap_servers, detail="not running")
        ready, detail = await probe_metadata(self.config.bootstrap_servers, self.config.probe_options)
        return ServiceStatus(
            "kafka", up=ready and pid_alive(pid), endpoint=self.config.bootstrap_servers, pid=pid, detail=detail
        )


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes them: url-safe base64 of 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
