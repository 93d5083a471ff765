"""infra/compose.yaml offers Docker users the same stack: the pinned broker, and only commands the CLI has."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

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


def test_compose_declares_the_services_and_process_slots():
    assert {"kafka", "postgres", "api", "worker", "projector"} <= set(SERVICES)
    assert SERVICES["kafka"]["image"].startswith("apache/kafka:4.")


def test_compose_kafka_matches_the_pinned_broker_version():
    pom = (COMPOSE.parent / "kafka" / "pom.xml").read_text()
    assert f"<kafka.version>{SERVICES['kafka']['image'].split(':')[1]}</kafka.version>" in pom


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
