"""The metrics port's /readyz and /healthz (foundation.readiness, foundation.metrics.serve_metrics): what the
chart's readiness probes of the workers, projector and sweeper ask.

prometheus_client's own server answered every path with the metrics, so a probe of /readyz there always
passed: regression test for a probe that could not fail.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from foundation import readiness
from foundation.metrics import serve_metrics
from foundation.outages import Outage
from infra.processes import free_port


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def port(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(readiness, "_STATE", readiness._State())  # a process that has not started
    port = free_port()
    serve_metrics("127.0.0.1", port)
    return port


def test_readyz_is_503_until_the_process_started(port: int) -> None:
    status, body = _get(port, "/readyz")
    assert status == 503
    assert json.loads(body) == {"ready": False, "waiting_for": ["its start"]}
    readiness.mark_started()
    status, body = _get(port, "/readyz")
    assert (status, json.loads(body)) == (200, {"ready": True, "waiting_for": []})


def test_readyz_names_what_is_down_until_it_is_back(port: int) -> None:
    readiness.mark_started()
    outage = Outage("PostgreSQL (the test's)")
    outage.failed(ConnectionError("refused"))
    status, body = _get(port, "/readyz")
    assert (status, json.loads(body)["waiting_for"]) == (503, ["PostgreSQL (the test's)"])
    outage.recovered()
    assert _get(port, "/readyz")[0] == 200


def test_an_outage_dropped_while_down_is_no_longer_waited_for(port: int) -> None:
    """until_available's own Outage, when the process stops waiting (Stopped), is dropped, not recovered."""
    readiness.mark_started()
    Outage("Kafka (dropped)").failed("gone")
    assert "Kafka (dropped)" not in Outage.down_now()


def test_healthz_answers_and_metrics_are_still_served(port: int) -> None:
    assert _get(port, "/healthz") == (200, '{"status": "ok"}')
    status, body = _get(port, "/metrics")
    assert status == 200
    assert "voxlog_sweeper_leader" in body
