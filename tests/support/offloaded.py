"""Work for the offload's tests, in a module its processes import (their fork server preloads it)."""

from __future__ import annotations

import os
import socket


def echo(value: object) -> object:
    return value


def pid() -> int:
    return os.getpid()


def spin() -> None:
    """Takes CPU until stopped."""
    while True:
        pass


def hog() -> None:
    """Takes memory until stopped."""
    held = []
    while True:
        held.append(bytearray(64 * 2**20))


def refuse(message: str) -> None:
    raise ValueError(message)


def unpicklable() -> object:
    return lambda: None


def held(gate: str) -> str:
    """Waits at the Unix socket ``gate`` until it is sent a byte."""
    with socket.socket(socket.AF_UNIX) as connection:
        connection.connect(gate)
        connection.recv(1)
    return "released"
