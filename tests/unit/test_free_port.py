"""Regression: a test's service port was picked from the ephemeral range, and an outgoing connection took it
before the service bound it (a worker's metrics server failed with "Address already in use")."""

from __future__ import annotations

import socket

import pytest

from infra.processes import _ephemeral_low, free_port

pytestmark = pytest.mark.unit


def test_free_ports_lie_below_the_range_outgoing_connections_use_and_can_be_bound():
    low = _ephemeral_low()
    ports = {free_port() for _ in range(50)}
    assert all(port < low for port in ports)
    assert len(ports) > 40  # picked at random: concurrent tests do not all reach for the same port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", next(iter(ports))))
