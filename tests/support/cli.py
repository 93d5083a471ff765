"""The CLI run as its own process, the way operators run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def voxlog(env: dict[str, str], *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """The CLI of this checkout (not of whichever checkout the venv was installed from)."""
    return subprocess.run(
        [sys.executable, "-m", "voxlog.cli", *args],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def lag_once(env: dict[str, str]) -> tuple[int, dict[str, dict[str, Any]]]:
    """`voxlog lag --once --json`: its exit code and each group's figures, by group."""
    done = voxlog(env, "lag", "--once", "--json", "--interval", "0.5", timeout_s=120)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, {g["group"]: g for g in json.loads(done.stdout)["groups"]}
