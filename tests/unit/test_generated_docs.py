from __future__ import annotations

import json

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
    assert addresses == {"voxlog.jobs.v1", "voxlog.jobs.dlq", "voxlog.nodes.v1"}


def test_drift_is_detected(tmp_path):
    docs.write(tmp_path)
    assert docs.stale(tmp_path) == []
    (tmp_path / docs.SCHEMA_FILE).write_text("{}\n")
    assert docs.stale(tmp_path) == [docs.SCHEMA_FILE]
