"""What a run ran on: machine, versions, date; recorded beside every figure."""

from __future__ import annotations

import os
import platform
import re
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import asyncpg

from infra.kafka_broker import POM

PACKAGES = ("aiokafka", "asyncpg", "faststream", "litestar", "uvicorn", "onnxruntime", "numpy", "kokoro", "torch")


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


async def describe(root: Path, database_url: str) -> dict[str, Any]:
    conn = await asyncpg.connect(database_url)
    try:
        postgres = str(await conn.fetchval("SHOW server_version"))
    finally:
        await conn.close()
    kafka = re.search(r"<kafka.version>([^<]+)<", POM.read_text())
    versions = {"python": platform.python_version(), "kafka": kafka[1] if kafka else "unknown", "postgres": postgres}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": _commit(root),
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "memory_gib": round(_memory_gib(), 1),
            "os": platform.platform(),
        },
        "versions": versions,
    }
