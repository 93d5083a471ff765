"""infra/compose.yaml offers Docker users the same stack: the pinned broker, and only commands the CLI has."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from tests.support import dockerfile
from voxlog.cli import build_parser

COMPOSE = Path(__file__).resolve().parents[2] / "infra" / "compose.yaml"
SERVICES = yaml.safe_load(COMPOSE.read_text())["services"]


def voxlog_commands(command: list[str]) -> list[list[str]]:
    """The ``voxlog ...`` invocations of a compose command, including those inside ``sh -c``."""
    if command[:2] == ["sh", "-c"]:
        found = []
        for part in command[2].replace("&&", ";").split(";"):
            found += voxlog_commands(shlex.split(part))
        return found
    return [command] if command and command[0] == "voxlog" else []


BROKERS = ["kafka-1", "kafka-2", "kafka-3"]


def test_compose_declares_the_services_and_process_slots():
    assert {*BROKERS, "postgres", "api", "worker", "worker-gpu", "projector", "sweeper"} <= set(SERVICES)
    assert all(SERVICES[broker]["image"].startswith("apache/kafka:4.") for broker in BROKERS)


def test_compose_kafka_matches_the_pinned_broker_version():
    pom = (COMPOSE.parent / "kafka" / "pom.xml").read_text()
    assert {SERVICES[broker]["image"] for broker in BROKERS} == {SERVICES["kafka-1"]["image"]}
    assert f"<kafka.version>{SERVICES['kafka-1']['image'].split(':')[1]}</kafka.version>" in pom


def test_compose_kafka_is_three_kraft_voters_that_keep_two_copies():
    envs = [SERVICES[broker]["environment"] for broker in BROKERS]
    assert sorted(env["KAFKA_NODE_ID"] for env in envs) == ["1", "2", "3"]
    voters = {f"{env['KAFKA_NODE_ID']}@{broker}:9093" for broker, env in zip(BROKERS, envs, strict=True)}
    for broker, env in zip(BROKERS, envs, strict=True):
        assert set(env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")) == voters
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{broker}:9092"
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
        assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    assert len({env["CLUSTER_ID"] for env in envs}) == 1
    voxlog_env = SERVICES["init"]["environment"]
    assert voxlog_env["VOXLOG_KAFKA_BOOTSTRAP_SERVERS"].split(",") == [f"{broker}:9092" for broker in BROKERS]
    assert voxlog_env["VOXLOG_TOPIC_REPLICATION_FACTOR"] == "3"


def test_each_voxlog_service_runs_the_image_of_its_kind():
    """The api image runs the API, projector, sweeper and every one-shot command (migrations among them);
    the workers run a worker image. Each target is one the Dockerfile builds."""
    targets = dockerfile.targets(dockerfile.stages())
    built = {name: service["build"]["target"] for name, service in SERVICES.items() if "build" in service}
    assert set(built.values()) == set(targets)
    assert {name for name, target in built.items() if target != "api"} == {"worker", "worker-gpu"}
    assert built["worker"] == "worker-cpu"
    assert built["worker-gpu"] == "worker-gpu"
    migrating = {name for name, argv in INVOCATIONS if argv[1:2] == ["migrate"]}
    assert migrating == {"init"}
    assert all(built[name] == "api" for name in migrating)


INVOCATIONS = [
    (name, argv) for name, service in SERVICES.items() for argv in voxlog_commands(service.get("command", []))
]


def test_every_voxlog_process_runs_a_voxlog_command():
    assert {name for name, _ in INVOCATIONS} >= {"init", "api", "worker", "projector"}


@pytest.mark.parametrize(("service", "argv"), INVOCATIONS, ids=[f"{n}:{' '.join(a[1:])}" for n, a in INVOCATIONS])
def test_each_compose_command_is_one_the_cli_accepts(service, argv):
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as exc:
        pytest.fail(f"compose service {service} runs `{' '.join(argv)}`, which the CLI refuses (exit {exc.code})")


def test_regression_a_command_the_cli_lacks_is_caught():
    """compose ran `voxlog sweeper` before the CLI had it, and the compose test still passed."""
    lacking = voxlog_commands(["sh", "-c", "voxlog topics && voxlog nonesuch --now"])
    assert lacking == [["voxlog", "topics"], ["voxlog", "nonesuch", "--now"]]
    with pytest.raises(SystemExit):
        build_parser().parse_args(lacking[1][1:])
