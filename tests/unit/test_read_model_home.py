"""One read model (issue 38, item 1): every query over the projection's tables is in ``projections/reads/``.

The services, the CLI and the building blocks read the tables through the
read model, never with SQL of their own: a query that names a table of
``projections.rows.TABLES`` anywhere else fails here. The projection's own
modules (``projections/``) write and rebuild the tables, and the benchmarks
(``bench/``) and the fault campaign (``voxlog/chaos/``) read them directly, as
outside judges of the service: they are not scanned.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from projections.rows import TABLES

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
SCANNED: Final = ("contracts", "foundation", "producers", "consumers", "tts_node", "infra", "voxlog")
OUTSIDE_JUDGES: Final = (ROOT / "voxlog" / "chaos",)
# A keyword that names a table, then the table (across a line break too): SQL over it.
PROJECTION_SQL: Final = re.compile(
    r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(?:" + "|".join(re.escape(table.name) for table in TABLES) + r")\b"
)


def projection_sql(text: str) -> list[int]:
    """The lines of ``text`` (numbered from 1) where SQL names a projection table."""
    return [text.count("\n", 0, found.start()) + 1 for found in PROJECTION_SQL.finditer(text)]


def scanned_files() -> list[Path]:
    return sorted(
        path
        for package in SCANNED
        for path in (ROOT / package).rglob("*.py")
        if not any(path.is_relative_to(judge) for judge in OUTSIDE_JUDGES)
    )


def test_no_query_over_the_projection_tables_outside_the_read_model():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in scanned_files()
        for line in projection_sql(path.read_text(encoding="utf-8"))
    ]
    assert not found, "SQL over the projection's tables outside projections/reads/: move it there\n" + "\n".join(found)


def test_the_scan_covers_the_services_and_the_cli():
    files = {path.relative_to(ROOT).as_posix() for path in scanned_files()}
    assert {"producers/limits_ledger.py", "producers/placement.py", "voxlog/operations.py"} <= files
    assert not any(name.startswith(("voxlog/chaos/", "bench/", "projections/")) for name in files)


@pytest.mark.parametrize("table", [table.name for table in TABLES])
def test_the_scan_finds_sql_naming_any_projection_table(table: str):
    planted = f'"""Docs."""\n\n_SQL = "SELECT count(*) FROM admissions a LEFT JOIN {table} j ON j.job_id = a.job_id"\n'
    assert projection_sql(planted) == [3]


def test_the_scan_finds_a_statement_across_lines_and_each_keyword():
    planted = (
        'X = """\nSELECT 1\nFROM\n    jobs WHERE true\n"""\nY = "UPDATE nodes SET x = 1"\nZ = "INSERT INTO lexicon"\n'
    )
    assert projection_sql(planted) == [3, 6, 7]


def test_the_scan_passes_the_apis_own_tables_and_prose():
    assert projection_sql('"SELECT 1 FROM placements JOIN admissions a ON true" # jobs taken from jobs\n') == []
    assert projection_sql('"DELETE FROM jobs_archive"; "SELECT 1 FROM rate_buckets"\n') == []
