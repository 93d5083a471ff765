from __future__ import annotations

import json

import pytest

from contracts import EVENT_CLASSES
from voxlog import docs


def test_committed_schema_and_asyncapi_match_the_code():
    stale = docs.stale()
    assert stale == [], f"regenerate with `voxlog docs`: {stale}"


def test_schema_describes_every_event_type():
    schema = json.loads((docs.DOCS_DIR / docs.SCHEMA_FILE).read_text())
    mapping = schema["discriminator"]["mapping"]
    assert set(mapping) == {cls.model_fields["type"].default for cls in EVENT_CLASSES}


def test_asyncapi_names_the_jobs_and_dlq_topics():
    document = json.loads((docs.DOCS_DIR / docs.ASYNCAPI_FILE).read_text())
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == {"voxlog.jobs.v1", "voxlog.jobs.dlq", "voxlog.control.v1"}


def test_drift_is_detected(tmp_path):
    docs.write(tmp_path)
    assert docs.stale(tmp_path) == []
    (tmp_path / docs.SCHEMA_FILE).write_text("{}\n")
    assert docs.stale(tmp_path) == [docs.SCHEMA_FILE]


def test_each_pages_table_sits_between_its_markers_as_its_source_makes_it():
    for table in docs.TABLES:
        text = (docs.DOCS_DIR / table.page).read_text()
        assert f"{table.begin}\n\n{table.text()}\n\n{table.end}" in text, f"run `voxlog docs`: {table.name}"


def test_a_table_edited_by_hand_is_stale_and_written_again(tmp_path):
    docs.write(tmp_path)
    page = tmp_path / "configuration.md"
    page.write_text(page.read_text().replace("| `VOXLOG_MIGRATE` |", "| `VOXLOG_MIGRATED` |"))
    assert docs.stale(tmp_path) == ["configuration.md"]
    docs.write(tmp_path)
    assert docs.stale(tmp_path) == []
    assert "| `VOXLOG_MIGRATE` |" in page.read_text()


def test_a_page_without_its_tables_markers_is_refused(tmp_path):
    docs.write(tmp_path)
    (tmp_path / "events.md").write_text("# Events\n")
    with pytest.raises(docs.MissingMarkers, match=r"docs/events\.md lacks the markers of its table events"):
        docs.stale(tmp_path)
