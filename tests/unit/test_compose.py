from __future__ import annotations

from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[2] / "infra" / "compose.yaml"


def test_compose_declares_the_services_and_process_slots():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert {"kafka", "postgres", "api", "worker", "projector", "sweeper"} <= set(services)
    assert services["kafka"]["image"].startswith("apache/kafka:4.")


def test_compose_kafka_matches_the_pinned_broker_version():
    pom = (COMPOSE.parent / "kafka" / "pom.xml").read_text()
    kafka_image = yaml.safe_load(COMPOSE.read_text())["services"]["kafka"]["image"]
    assert f"<kafka.version>{kafka_image.split(':')[1]}</kafka.version>" in pom
