"""The test stack: a real Kafka broker and PostgreSQL cluster on free loopback ports.

Started once per test session, or reused when one is already up (so a
developer can keep it running between runs with the same home). A stack the
session started is stopped by it, pass or fail. It has one broker, or the
three of a replicated cluster with ``VOXLOG_TEST_STACK_BROKERS=3`` (or
``python -m tests.support.stack_cli up --brokers 3``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from pathlib import Path

from foundation.kafka_access import KafkaAccess
from foundation.settings import default_state_root
from infra.errors import InfraError
from infra.processes import free_port as free_port  # the tests' one import of it
from infra.stack import DevStack
from tests.support.credentials import make_credentials
from voxlog.devstack import brokers_in, free_stack_ports, scratch_stack


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def stack_home_for_tests() -> Path:
    return Path(os.environ.get("VOXLOG_TEST_STACK_HOME", default_state_root() / "test"))


def test_stack_brokers() -> int | None:
    """The brokers asked of the shared test stack by VOXLOG_TEST_STACK_BROKERS (1 or 3); None: not asked, so
    the one that runs, or whose data there is, keeps its count (a new one has 1)."""
    asked = os.environ.get("VOXLOG_TEST_STACK_BROKERS")
    return int(asked) if asked else None


def build_test_stack(home: Path, *, probe_running: bool, brokers: int | None = None) -> DevStack:
    """The stack at ``home`` with its recorded ports, or fresh free ports (and data) when they are taken or
    are for another number of ``brokers`` (given: a stack of that many; None: the recorded one)."""
    ports_file = home / "test-ports.json"
    ports: dict[str, int] | None = json.loads(ports_file.read_text()) if ports_file.exists() else None
    size = brokers or (brokers_in(ports) if ports is not None else 1)
    resized = ports is not None and brokers_in(ports) != size
    if ports is not None and not probe_running and (resized or not all(port_free(p) for p in ports.values())):
        shutil.rmtree(home)
        ports = None
    if ports is None:
        ports = free_stack_ports(size)
        home.mkdir(parents=True, exist_ok=True)
        ports_file.write_text(json.dumps(ports))
    return scratch_stack(home, ports=ports)  # the whole suite's broker, under load for half an hour: both compilers


class PrivateStack:
    """A Kafka broker and a PostgreSQL cluster of one test's own, on free ports, to kill and restart.

    Its data lives under the state root (the ``postgres`` user must be able to reach it when the
    tests run as root; pytest's temporary directories are private to their owner), and ``down``
    deletes it. ``secure``: credentials made for it (tests.support.credentials), a SASL_SSL broker
    and PostgreSQL over TLS with a password; ``kafka`` and ``database_url`` then log in.
    """

    def __init__(self, *, secure: bool = False, brokers: int = 1) -> None:
        home = stack_home_for_tests().parent / "test-private" / uuid.uuid4().hex[:12]
        self.credentials = make_credentials(home / "credentials") if secure else None
        security = self.credentials.stack_security() if self.credentials else None
        self.stack = scratch_stack(home, brokers=brokers, kafka_heap="384m", kafka_jit="quick", security=security)

    @property
    def bootstrap_servers(self) -> str:
        return self.stack.bootstrap_servers

    @property
    def kafka(self) -> KafkaAccess:
        if self.credentials is None:
            return KafkaAccess(self.stack.bootstrap_servers)
        return self.credentials.kafka(self.stack.bootstrap_servers)

    @property
    def database_url(self) -> str:
        return self.stack.database_url

    async def up(self) -> None:
        await self.stack.up()

    def down(self) -> None:
        self.stack.down(purge=True)

    def kill_broker(self, node_id: int = 1) -> None:
        self.stack.kill_broker(node_id)

    async def start_broker(self, node_id: int = 1) -> None:
        await self.stack.start_broker(node_id)

    def stop_postgres(self) -> None:
        self.stack.stop_postgres()

    async def start_postgres(self) -> None:
        await self.stack.start_postgres()


async def running_test_stack(brokers: int | None = None) -> tuple[DevStack, bool]:
    """The shared test stack of ``brokers`` (default: :func:`test_stack_brokers`), started unless it runs
    already; and whether this call started it (then the caller stops it when done)."""
    home = stack_home_for_tests()
    wanted = brokers or test_stack_brokers()
    probe = build_test_stack(home, probe_running=True)
    # Its services, not the replicas line: partitions short of a replica a while do not make it a stack to replace.
    if all(status.up for status in await probe.status() if status.name != "replicas"):
        if wanted is not None and probe.cluster.size != wanted:
            raise InfraError(
                f"the test stack in {home} runs {probe.cluster.size} broker(s), not {wanted}: stop it first"
                " (python -m tests.support.stack_cli down)"
            )
        return probe, False
    started = build_test_stack(home, probe_running=False, brokers=wanted)
    await started.up()
    return started, True
