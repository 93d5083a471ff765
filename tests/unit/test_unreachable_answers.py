"""What the API answers while PostgreSQL or Kafka is down (producers.unreachable): the dependency's name, never
the driver's error, which names the deployment's hosts; the error goes to the log."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from litestar import Litestar, get

from foundation.errors import BrokerUnavailable
from producers.errors import LogUnreadable
from producers.http_errors import EXCEPTION_HANDLERS
from producers.unreachable import UnreachableLog
from projections.errors import ProjectionUnavailable
from tests.support.api_fakes import Log, Reader, client, deps

pytestmark = pytest.mark.unit

INTERNAL = "internal.example"
PG_DOWN = ProjectionUnavailable(
    f"cannot read a job from PostgreSQL: OSError: Multiple exceptions: [Errno 111] Connect call failed"
    f" ('pg-primary.{INTERNAL}', 5432)"
)
KAFKA_DOWN = BrokerUnavailable(f"Kafka at kafka-2.{INTERNAL}:9093 did not answer: KafkaConnectionError")
TEXT = {"text": "Hello there.", "voice": "af_heart"}
SPEECH = {"model": "tts-1", "input": "Hello there.", "voice": "alloy"}


class DownLog(Log):
    async def publish_all(self, events: Sequence[Any], partitions: Sequence[int | None] | None = None) -> None:
        raise KAFKA_DOWN

    async def publish(self, event: Any, partition: int | None = None) -> None:
        raise KAFKA_DOWN

    async def check(self) -> None:
        raise KAFKA_DOWN


async def test_readyz_and_503_bodies_never_echo_a_driver_error_naming_an_internal_host():
    """Issue 40, item 8: /readyz (no key needed) and the 503s answered the driver's error, internal host names
    and all. Now they name the dependency; the error is logged."""
    async with client(deps(Reader(down=PG_DOWN), DownLog())) as http:
        ready = await http.get("/readyz")
        status = await http.get(f"/v1/jobs/{uuid.uuid4()}")
        submitted = await http.post("/v1/jobs", json=TEXT)
        speech = await http.post("/v1/audio/speech", json=SPEECH)
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"postgres": "error: database unreachable", "kafka": "error: kafka unreachable"}
    assert status.json()["detail"].startswith("database unreachable: ")
    assert submitted.json()["detail"].startswith("the job log is unreachable (kafka unreachable)")
    assert "kafka unreachable" in speech.json()["error"]["message"]
    for answer in (ready, status, submitted, speech):
        assert answer.status_code == 503, answer.text
        assert INTERNAL not in answer.text, answer.text


async def test_a_log_that_cannot_be_read_is_a_503_naming_kafka_not_its_error():
    @get("/audit")
    async def audit() -> None:
        raise LogUnreadable(str(KAFKA_DOWN))

    app = Litestar(route_handlers=[audit], exception_handlers=dict(EXCEPTION_HANDLERS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        answer = await http.get("/audit")
    assert answer.status_code == 503
    assert answer.json()["detail"] == "the log cannot be read (kafka unreachable): retry after Retry-After"
    assert answer.headers["Retry-After"]


def test_the_driver_error_is_logged_with_its_details_a_line_per_dependency_per_interval():
    lines: list[dict[str, Any]] = []
    now = [0.0]
    said = UnreachableLog(interval_s=10, clock=lambda: now[0], say=lambda event, **fields: lines.append(fields))
    for _ in range(5):
        assert said.unreachable("postgres", PG_DOWN, path="/v1/jobs/x") == "database unreachable"
        now[0] += 1
    said.unreachable("kafka", KAFKA_DOWN)
    now[0] += 10
    said.unreachable("postgres", PG_DOWN)
    assert [(line["dependency"], line["answers"]) for line in lines] == [("postgres", 1), ("kafka", 1), ("postgres", 5)]
    assert f"pg-primary.{INTERNAL}" in lines[0]["error"]
    assert lines[0]["error"].startswith("ProjectionUnavailable: ")
    assert lines[0]["path"] == "/v1/jobs/x"
