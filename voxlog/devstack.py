"""`voxlog dev up|down|status`: the local infrastructure plus voxlog's own processes."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from contracts import DEFAULT_TENANT
from foundation.kafka_access import KafkaAccess
from foundation.settings import DevSettings, KafkaSettings, ModeSettings, TopicSettings, default_cache_root
from infra.apps import AppProcesses, AppSpec
from infra.kafka_broker import JitMode
from infra.kafka_cluster import recorded_size
from infra.postgres_cluster import redact
from infra.processes import free_port
from infra.stack import DevStack, StackConfig, StackSecurity
from infra.status import ServiceStatus
from producers.api_keys import ALL_SCOPES
from projections.migrations import migrate_database
from voxlog.client_key import client_key_file, save_client_key, saved_key_id
from voxlog.errors import VoxlogError
from voxlog.topic_migration import LEGACY_CONTROL_TOPIC, copy_legacy_topic
from voxlog.topics import ensure_topics, topic_specs

SOURCE_ROOT: Final = Path(__file__).resolve().parents[1]


READY_TIMEOUT_S: Final = 120.0  # how long `voxlog dev` waits for each service (and for its key to be
# projected): a first start on a laptop formats Kafka's storage and initializes PostgreSQL
KAFKA_JIT: Final[JitMode] = "quick"  # a dev broker lives hours on a laptop, mostly idle: C1 alone starts it on
# half the CPU (a scratch stack, which benchmarks load for minutes, runs "full": scratch_stack)


def dev_brokers(settings: DevSettings, asked: int | None = None) -> int:
    """The dev stack's brokers: those asked for (``dev up --brokers``), else as many as its data is for,
    else one."""
    return asked or recorded_size(settings.dev_home / "kafka") or 1


def dev_kafka_ports(settings: DevSettings, brokers: int) -> list[tuple[int, int]]:
    """Node n's client and controller ports: VOXLOG_DEV_KAFKA_PORT and _CONTROLLER_PORT, plus 2(n - 1)."""
    return [(settings.dev_kafka_port + 2 * i, settings.dev_kafka_controller_port + 2 * i) for i in range(brokers)]


def dev_stack(settings: DevSettings, brokers: int | None = None) -> DevStack:
    return DevStack(
        StackConfig(
            home=settings.dev_home,
            kafka_ports=dev_kafka_ports(settings, dev_brokers(settings, brokers)),
            kafka_heap=settings.dev_kafka_heap,
            kafka_jit=KAFKA_JIT,
            postgres_port=settings.dev_postgres_port,
            jar_cache=default_cache_root() / "kafka",  # the broker jars, copied from ~/.m2
            external_database_url=settings.database_url.get_secret_value() if settings.database_url else None,
            ready_timeout=READY_TIMEOUT_S,
        )
    )


def free_stack_ports(brokers: int = 1) -> dict[str, int]:
    """Free loopback ports for a stack: ``postgres``, and ``kafka`` and ``controller`` for the first Kafka node,
    ``kafka-<n>`` and ``controller-<n>`` for node n of a cluster."""
    ports = {"postgres": free_port()}
    for n in range(1, brokers + 1):
        ports |= {_node_key("kafka", n): free_port(), _node_key("controller", n): free_port()}
    return ports


def brokers_in(ports: Mapping[str, int]) -> int:
    """How many Kafka nodes a stack's ``ports`` are for."""
    return sum(1 for key in ports if key == "kafka" or key.startswith("kafka-"))


def _node_key(name: str, n: int) -> str:
    return name if n == 1 else f"{name}-{n}"


def scratch_stack(
    home: Path,
    *,
    brokers: int = 1,
    kafka_heap: str = "512m",
    kafka_jit: JitMode = "full",
    ports: Mapping[str, int] | None = None,
    security: StackSecurity | None = None,
) -> DevStack:
    """A Kafka cluster (``brokers`` nodes, or those ``ports`` are for) and a PostgreSQL cluster of their own
    under ``home``, for a benchmark run, a fault campaign or a test session: on ``ports`` (see
    :func:`free_stack_ports`), else on free loopback ports; the broker's jars from the shared cache; with
    ``security``, SASL_SSL and TLS only; ``kafka_jit`` as :data:`infra.kafka_broker.JitMode` says (a benchmark,
    which measures the broker's CPU, keeps ``full``)."""
    chosen = ports or free_stack_ports(brokers)
    nodes = range(1, brokers_in(chosen) + 1)
    return DevStack(
        StackConfig(
            home=home,
            kafka_ports=[(chosen[_node_key("kafka", n)], chosen[_node_key("controller", n)]) for n in nodes],
            kafka_heap=kafka_heap,
            kafka_jit=kafka_jit,
            postgres_port=chosen["postgres"],
            jar_cache=default_cache_root() / "kafka",
            security=security,
        )
    )


def isolated_env(
    kafka: KafkaAccess, database_url: str, schema: str, topics: TopicSettings, home: Path, api_port: int
) -> dict[str, str]:
    """The environment of voxlog processes that share a broker and a server but nothing else:
    their own schema, topics, consumer group, projector offsets, blob directory and API port.

    No ``VOXLOG_*`` variable of the caller's leaks in (a stray ``VOXLOG_ENGINE`` would silently
    swap the model a test means): what is not set here, or by the caller on top, is a default.
    """
    inherited = {key: value for key, value in os.environ.items() if not key.startswith("VOXLOG_")}
    return {
        **inherited,
        # The processes run this checkout's code, whatever checkout the venv was installed from.
        "PYTHONPATH": str(SOURCE_ROOT),
        **KafkaSettings.environment_of(kafka),
        "VOXLOG_DATABASE_URL": database_url,
        "VOXLOG_DATABASE_SCHEMA": schema,
        "VOXLOG_JOBS_TOPIC": topics.jobs_topic,
        "VOXLOG_CONTROL_TOPIC": topics.control_topic,
        "VOXLOG_DLQ_TOPIC": topics.dlq_topic,
        "VOXLOG_SYNTH_GROUP": f"synth-{schema}",
        "VOXLOG_PROJECTOR_NAME": f"projector-{schema}",
        "VOXLOG_BLOB_DIR": str(home / "blobs"),
        "VOXLOG_API_PORT": str(api_port),
        # A deployment of tests, benchmarks or faults speaks for one tenant: keys are what the tests of
        # authentication turn on (VOXLOG_AUTH=on), and the others measure and break the orchestration.
        "VOXLOG_AUTH": "off",
    }


def app_specs(settings: DevSettings, stack: DevStack) -> list[AppSpec]:
    """The processes in start order: the projector first, so the workers' announcements are seen."""
    env = {
        **os.environ,
        "VOXLOG_KAFKA_BOOTSTRAP_SERVERS": stack.bootstrap_servers,
        "VOXLOG_DATABASE_URL": stack.database_url,
        "VOXLOG_DATABASE_SCHEMA": settings.database_schema,
        "VOXLOG_BLOB_DIR": str(settings.dev_home / "blobs"),
        "VOXLOG_API_PORT": str(settings.api_port),
    }
    cli = [sys.executable, "-m", "voxlog.cli"]
    specs = [AppSpec("projector", [*cli, "projector"], env), AppSpec("sweeper", [*cli, "sweeper"], env)]
    specs += [
        AppSpec(f"worker-{i}", [*cli, "worker", "--device", "cpu"], {**env, "VOXLOG_WORKER_ID": f"dev-cpu-{i}"})
        for i in range(settings.dev_workers)
    ]
    ready = f"http://127.0.0.1:{settings.api_port}/readyz"
    specs.append(AppSpec("api", [*cli, "api"], env, ready_url=ready))
    return specs


def api_url(settings: DevSettings) -> str:
    return f"http://127.0.0.1:{settings.api_port}"


async def up(settings: DevSettings, brokers: int | None = None) -> list[str]:
    stack = dev_stack(settings, brokers)
    await stack.up()
    kafka = KafkaAccess(stack.bootstrap_servers)
    created = await ensure_topics(kafka, topic_specs(settings))
    copied = await copy_legacy_topic(kafka, LEGACY_CONTROL_TOPIC, settings.control_topic)
    applied = await migrate_database(stack.database_url, settings.database_schema)
    apps = AppProcesses(settings.dev_home)
    apps.forget_stopped()  # what still runs stays recorded, whatever VOXLOG_DEV_WORKERS says now
    specs = app_specs(settings, stack)
    for spec in specs:
        apps.start(spec)
    for spec in specs:
        await apps.wait_ready(spec, READY_TIMEOUT_S)
    key_line = await dev_key(settings, stack)
    return [
        "topics:     " + ", ".join(f"{name} ({state})" for name, state in created.items()),
        *([f"migrated:   {copied.describe()}"] if copied is not None else []),
        f"migrations: {len(applied)} applied",
        f"api:        {api_url(settings)} (OpenAPI at {api_url(settings)}/schema)",
        f"export VOXLOG_KAFKA_BOOTSTRAP_SERVERS={stack.bootstrap_servers}",
        # An external server's password stays out of the output (the caller set it, and has it).
        f"export VOXLOG_DATABASE_URL={redact(stack.database_url)}",
        key_line,
    ]


async def dev_key(settings: DevSettings, stack: DevStack) -> str:
    """The stack's API key, for ``voxlog demo`` and ``voxlog speak``: the saved one while the projection
    knows it and it is live, else a new one (tenant ``default``, every scope), saved once projected."""
    from voxlog import keys_cli  # the Kafka and PostgreSQL clients load for `dev up` only

    mode = ModeSettings(
        kafka_bootstrap_servers=stack.bootstrap_servers,
        database_url=stack.database_url,
        database_schema=settings.database_schema,
        control_topic=settings.control_topic,
    )
    saved = saved_key_id()
    rows = {row["key_id"]: row for row in await keys_cli.keys(mode)}
    if saved in rows and rows[saved]["revoked_at"] is None and rows[saved]["expires_at"] is None:
        return f"api key:    {saved} (in {client_key_file()}; `voxlog demo` and `voxlog speak` send it)"
    key = await keys_cli.issue(mode, DEFAULT_TENANT, tuple(sorted(ALL_SCOPES)), name="voxlog dev up")
    if not await keys_cli.wait_projected(mode, key.key_id, within_s=READY_TIMEOUT_S):
        raise VoxlogError(f"the projector did not apply key {key.key_id} within {READY_TIMEOUT_S:g} s")
    path = save_client_key(key.token)  # printed never: the output of `dev up` ends up in terminals' and CI's logs
    return f"api key:    {key.key_id} (new, in {path}; `voxlog demo` and `voxlog speak` send it)"


def started_specs(settings: DevSettings) -> list[AppSpec]:
    """The processes the dev stack started, as recorded under its home; before any, those `up` would start."""
    return AppProcesses(settings.dev_home).recorded() or app_specs(settings, dev_stack(settings))


def stop_apps(settings: DevSettings) -> None:
    """Stop every process the dev stack started, the last started first (the API before the workers)."""
    apps = AppProcesses(settings.dev_home)
    for spec in reversed(apps.recorded()):
        apps.stop(spec.name)


def down(settings: DevSettings, *, purge: bool) -> None:
    stop_apps(settings)
    dev_stack(settings).down(purge=purge)


async def app_statuses(settings: DevSettings) -> list[ServiceStatus]:
    apps = AppProcesses(settings.dev_home)
    return [await apps.status(spec) for spec in started_specs(settings)]


async def status(settings: DevSettings) -> list[ServiceStatus]:
    return [*(await dev_stack(settings).status()), *(await app_statuses(settings))]
