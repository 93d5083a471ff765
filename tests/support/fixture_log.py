"""The committed version-1 log (tests/fixtures/v1_log, an archive) and the tables it must replay into.

``tests/e2e/write_v1_fixture.py`` wrote both with the code of the day the events were at
schema_version 1; ``tests/integration/test_fixture_log.py`` replays the log through today's decoder
(upcasters included) and compares the tables with the committed ones.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import asyncpg

from contracts import DecodeError, decode_event
from foundation.kafka import RecordPosition
from projections.archive import Manifest, read_file
from projections.migrations import quote_schema
from projections.rebuild import NOT_FROM_THE_LOG
from projections.reducer import Projection

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "v1_log"
EXPECTED: Final = FIXTURE.parent / "v1_log_expected_tables.json"
CACHE_TTL: Final = timedelta(hours=1)
TABLES: Final = ("jobs", "segments", "job_events", "result_cache", "projection_offsets")


def fold_archive(directory: Path) -> Projection:
    """The archive's records folded in log order, partition by partition, as replay folds them."""
    manifest = Manifest.load(directory)
    projection = Projection(CACHE_TTL)
    for partition in sorted(manifest.partitions()):
        for entry in manifest.of_partition(partition):
            for record in read_file(directory, entry):
                at = RecordPosition(manifest.topic, partition, record.offset)
                try:
                    projection.apply(decode_event(record.value), at)
                except DecodeError:
                    projection.skip(at)
    return projection


async def dump_tables(conn: asyncpg.Connection, schema: str) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows as JSON values, in a stable order, without the columns the log does not determine."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for table in TABLES:
        rows = []
        for record in await conn.fetch(f"SELECT * FROM {quote_schema(schema)}.{table}"):
            row = {k: v for k, v in dict(record).items() if f"{table}.{k}" not in NOT_FROM_THE_LOG}
            text = json.dumps(row, default=str, sort_keys=True)
            rows.append(json.loads(text))
        tables[table] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))
    return tables
