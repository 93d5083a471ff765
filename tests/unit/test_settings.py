from __future__ import annotations

from pathlib import Path

import pytest

from foundation.settings import ALL_SETTINGS, AdminSettings, DevSettings
from voxlog.config_docs import settings_rows

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_documented_with_a_default():
    rows = settings_rows()
    assert rows
    for cls, variable, default, description in rows:
        assert variable.startswith("VOXLOG_"), variable
        assert description, f"{cls}.{variable} has no description"
        assert default, variable


def test_the_readme_lists_every_variable():
    text = README.read_text()
    missing = sorted({variable for _, variable, _, _ in settings_rows() if variable not in text})
    assert missing == [], f"README.md does not mention {missing}; paste `voxlog config` into it"


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
