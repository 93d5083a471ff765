"""Import rules (pyproject's [tool.importlinter]) are part of the test suite."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_rules_hold():
    lint_imports = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, not the venv's editable install
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" in result.stdout
    assert " 0 broken" in result.stdout


def test_the_top_level_layout_is_the_fixed_one():
    for name in ("contracts", "producers", "consumers", "projections", "tts_node", "infra", "tests", "voxlog"):
        assert (ROOT / name).is_dir(), name
    assert (ROOT / "pyproject.toml").is_file()
