"""Every earlier schema version still reads as what it meant (tests/fixtures/event_versions.json, written once
by the chain of its day: tests/support/event_versions.py): each record of each (type, version) decodes to the
event it was read as then, and the sample log as each version wrote it replays to the tables it did then."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contracts import encode_event
from contracts.events import CURRENT_SCHEMA_VERSIONS
from tests.support.event_versions import decoded, load, replayed

pytestmark = pytest.mark.unit
FIXTURE = load()


def test_every_earlier_version_of_every_event_type_has_a_record():
    have = {(entry["type"], entry["version"]) for entry in FIXTURE["entries"]}
    expected = {(t, v) for t, current in CURRENT_SCHEMA_VERSIONS.items() for v in range(1, current)}
    assert expected <= have, f"no record for {sorted(expected - have)}: run python -m tests.support.event_versions"
    assert set(FIXTURE["logs"]) == {str(v) for v in range(1, max(CURRENT_SCHEMA_VERSIONS.values()))}


@pytest.mark.parametrize("entry", FIXTURE["entries"], ids=lambda e: f"{e['type']}-v{e['version']}")
def test_a_record_of_an_earlier_version_reads_as_it_meant(entry: dict[str, Any]):
    read = decoded(entry["record"])
    assert read.schema_version == CURRENT_SCHEMA_VERSIONS[entry["type"]]
    assert json.loads(encode_event(read)) == entry["reads_as"]


@pytest.mark.parametrize("version", sorted(FIXTURE["logs"], key=int))
def test_a_log_written_at_an_earlier_version_replays_to_the_same_tables(version: str):
    log = FIXTURE["logs"][version]
    assert {record["schema_version"] for record in log} <= set(range(1, int(version) + 1))
    assert replayed(log) == FIXTURE["tables"][version]
