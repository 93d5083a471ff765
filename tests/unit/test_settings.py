from __future__ import annotations

import re
from pathlib import Path

import pytest

from foundation.offload import Budget
from foundation.settings import (
    ALL_SETTINGS,
    GROUPS,
    AdminSettings,
    ApiSettings,
    DevSettings,
    SettingRenamed,
    group_of,
)
from producers.document_parsing import DocumentBudget
from voxlog.composition import configs
from voxlog.composition.configs import document_budget, offload_budget
from voxlog.config_docs import rows_by_group, settings_rows, settings_table

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"
MOST_SETTINGS = 93  # issue 38, item 3: knobs a user sets, and no others (about 90; 140 before): a new one is a choice
# (92: VOXLOG_BATCH_IDS, a GPU's forward bounded in padded ids, issue 37 item 3)


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


def test_the_configuration_page_shows_the_table_as_voxlog_config_prints_it():
    assert settings_table() in PAGE.read_text(), "run `voxlog docs`: it writes the table into docs/configuration.md"


def test_every_setting_is_in_one_group_by_the_class_that_declares_it():
    """One rule (foundation.settings.group_of): a field's group is its declaring class's; every class that declares
    a field names one, and a variable several classes declare is in the group of the first process's."""
    for cls in ALL_SETTINGS:
        for name in cls.model_fields:
            assert group_of(cls, name) in GROUPS, f"{cls.__name__}.{name}"
    grouped = rows_by_group()
    assert list(grouped) == [group for group in GROUPS if group in grouped], "listed in GROUPS' order"
    assert sorted(row.variable for rows in grouped.values() for row in rows) == sorted(
        r.variable for r in settings_rows()
    )
    assert all(group.why for group in grouped), "each kept group says why its settings are settings"


def test_the_count_is_said_where_it_cannot_rot_and_stays_small():
    """docs/configuration.md's count is generated (the test above holds it to the code); README.md says it too."""
    rows = settings_rows()
    assert len(rows) <= MOST_SETTINGS, f"{len(rows)} settings: is each a knob a user sets? (issue 38, item 3)"
    table = settings_table()
    assert f"voxlog has **{len(rows)} settings** in {len(rows_by_group())} groups" in table
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"\[Configuration\]\(docs/configuration\.md\): the (\d+) `VOXLOG_` settings", readme)
    assert said is not None, "README.md says how many settings there are"
    assert int(said[1]) == len(rows), "README.md's count of the settings"
    for group, held in rows_by_group().items():
        assert f"\n## {group.title}\n" in table
        assert f"| {group.title} | {len(held)} | {group.why} |" in table


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


def test_the_documents_limits_and_the_offload_budget_come_from_the_api_settings(monkeypatch):
    for name, value in {
        "MAX_DOCUMENT_BYTES": "1000", "MAX_DOCUMENT_CHARS": "300", "MAX_TEXT_CHARS": "150", "OFFLOAD_CPU_S": "4",
        "OFFLOAD_MEMORY_MB": "128", "DOCUMENT_GATE": "/tmp/g", "MAX_DOCUMENT_PARTS": "7",
    }.items():  # fmt: skip
        monkeypatch.setenv(f"VOXLOG_{name}", value)
    settings = ApiSettings()
    # VOXLOG_DOCUMENT_GATE is no setting (issue 38, item 3): only the test entry point reads it; nor are the parts,
    # the chapters, the EPUB's unpacked bytes and the parse's CPU budget (voxlog.composition.configs' constants).
    assert document_budget(settings) == DocumentBudget(
        max_bytes=1000, max_chars=300, part_chars=150, max_parts=20_000, max_chapters=500,
        max_unpacked_bytes=64 * 2**20, cpu_s_base=1, cpu_s_per_mib=5.0, gate="",
    )  # fmt: skip
    monkeypatch.setattr(configs, "DOCUMENT_PART_CHARS", 100)
    assert document_budget(settings).part_chars == 100, "a part is at most the shorter of the two"
    assert document_budget(settings, "/tmp/g").gate == "/tmp/g"  # a test's hook (tests.support.gated_api)
    assert offload_budget(settings) == Budget(cpu_s=4, memory_bytes=128 * 2**20)
    monkeypatch.setenv("VOXLOG_MAX_DOCUMENT_BYTES", str(65 * 2**20))
    with pytest.raises(ValueError, match="max_document_bytes"):
        ApiSettings()  # the route reads 64 MiB at most


def test_the_control_topic_under_its_old_name_is_refused_with_what_to_do(monkeypatch):
    """VOXLOG_NODES_TOPIC named the control topic before it was renamed: read on, a deployment that named its
    own topic would start on the default, empty one. With VOXLOG_CONTROL_TOPIC set too, the new name decides."""
    monkeypatch.setenv("VOXLOG_NODES_TOPIC", "acme.nodes")
    monkeypatch.delenv("VOXLOG_CONTROL_TOPIC", raising=False)
    for settings in (AdminSettings, ApiSettings, DevSettings):
        with pytest.raises(SettingRenamed, match="VOXLOG_CONTROL_TOPIC") as refused:
            settings()
        assert "voxlog topics --migrate-from acme.nodes" in str(refused.value)
    assert AdminSettings(control_topic="acme.control").control_topic == "acme.control"
    monkeypatch.setenv("VOXLOG_CONTROL_TOPIC", "acme.control")
    assert AdminSettings().control_topic == "acme.control"
    monkeypatch.delenv("VOXLOG_NODES_TOPIC")
    monkeypatch.delenv("VOXLOG_CONTROL_TOPIC")
    assert AdminSettings().control_topic == "voxlog.control.v1"
