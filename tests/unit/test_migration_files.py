from __future__ import annotations

import pytest

from projections.errors import MigrationError
from projections.migrations import load_migrations, quote_schema


def test_shipped_migrations_are_ordered_and_named():
    migrations = load_migrations()
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    sql = "\n".join(m.sql for m in migrations)
    for table in ("jobs", "segments", "job_events", "result_cache", "projection_offsets"):
        assert f"CREATE TABLE {table} " in sql


def test_a_gap_in_versions_is_refused(tmp_path):
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0003_c.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="0003 found where 0002"):
        load_migrations(tmp_path)


def test_a_misnamed_file_is_refused(tmp_path):
    (tmp_path / "1_first.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match=r"NNNN_name\.sql"):
        load_migrations(tmp_path)


@pytest.mark.parametrize("schema", ["Public", "a-b", "x; drop table jobs", "1abc", ""])
def test_unsafe_schema_names_are_refused(schema):
    with pytest.raises(MigrationError):
        quote_schema(schema)
