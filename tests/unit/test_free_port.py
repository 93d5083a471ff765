"""Regressions of the ports tests hand their services.

- A port was picked from the ephemeral range, and an outgoing connection took it before the service bound it
  (a worker's metrics server failed with "Address already in use").
- A port nothing listened on was handed out twice before its first service bound it: two processes of one
  deployment got the same metrics port and the second exited with "Address already in use".
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from infra.processes import PortLeases, _ephemeral_low, free_port

pytestmark = pytest.mark.unit


def test_free_ports_lie_below_the_range_outgoing_connections_use_and_can_be_bound(tmp_path: Path):
    low = _ephemeral_low()
    ports = {free_port(PortLeases(tmp_path, 60.0)) for _ in range(50)}
    assert all(port < low for port in ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", next(iter(ports))))


def test_regression_a_port_handed_out_is_not_handed_out_again_before_its_service_binds_it(tmp_path: Path):
    # 400 random picks from about 22,000 ports repeat one with a probability of about 97% unless the picks
    # remember each other; nothing binds any of them here, so the bind probe alone cannot tell them apart.
    leases = PortLeases(tmp_path, 60.0)
    ports = [free_port(leases) for _ in range(400)]
    assert len(set(ports)) == len(ports)


def test_a_lease_is_held_against_every_other_caller_until_it_expires(tmp_path: Path):
    mine, another_process = PortLeases(tmp_path, 60.0), PortLeases(tmp_path, 60.0)
    assert mine.take(20_000)
    assert not another_process.take(20_000)
    assert not mine.take(20_000)
    assert another_process.take(20_001)
    expired = time.time() - 61.0
    os.utime(tmp_path / "20000", (expired, expired))
    assert another_process.take(20_000)
    assert not mine.take(20_000)


def test_without_a_writable_directory_ports_are_still_handed_out(tmp_path: Path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    leases = PortLeases(blocked / "leases", 60.0)  # its parent is a file: mkdir fails
    assert leases.take(20_000)
    assert free_port(leases) < _ephemeral_low()
