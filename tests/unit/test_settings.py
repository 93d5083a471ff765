from __future__ import annotations

from pathlib import Path

import pytest

from foundation.settings import ALL_SETTINGS, AdminSettings, DevSettings
from voxlog.config_docs import settings_rows, settings_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_documented_once_with_its_readers_and_a_default():
    rows = settings_rows()
    assert rows
    variables = [row.variable for row in rows]
    assert len(variables) == len(set(variables)), "each variable is one row"
    for row in rows:
        assert row.variable.startswith("VOXLOG_"), row
        assert row.meaning, f"{row.variable} has no description"
        assert row.default, row.variable
        assert row.processes, row.variable
    declared = {f"VOXLOG_{name.upper()}" for cls in ALL_SETTINGS for name in cls.model_fields}
    assert set(variables) == declared


def test_a_variable_whose_default_differs_between_processes_says_so():
    [url] = [row for row in settings_rows() if row.variable == "VOXLOG_DATABASE_URL"]
    assert "(dev: `unset`)" in url.default
    assert "dev: An existing PostgreSQL server" in url.meaning


def test_the_readme_shows_the_configuration_table_as_voxlog_config_prints_it():
    assert settings_table() in README.read_text(), "paste `voxlog config` into README.md's Configuration section"


def test_settings_read_the_voxlog_prefix(monkeypatch):
    monkeypatch.setenv("VOXLOG_JOBS_PARTITIONS", "7")
    monkeypatch.setenv("VOXLOG_DEV_KAFKA_PORT", "19092")
    assert AdminSettings().jobs_partitions == 7
    assert DevSettings().dev_kafka_port == 19092


def test_a_bad_schema_name_is_refused(monkeypatch):
    monkeypatch.setenv("VOXLOG_DATABASE_SCHEMA", "Robert'); DROP")
    with pytest.raises(ValueError, match="database_schema"):
        AdminSettings()


def test_each_process_has_one_class():
    names = [cls.__name__ for cls in ALL_SETTINGS]
    assert len(names) == len(set(names))
    processes = [cls.process for cls in ALL_SETTINGS]
    assert all(processes)
    assert len(processes) == len(set(processes))
