"""The name a process gives itself on the log and in PostgreSQL: host and process id, unique while it runs."""

from __future__ import annotations

import os
import socket


def instance_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"
