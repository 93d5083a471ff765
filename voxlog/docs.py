"""Generated documents: the events' JSON Schema, the AsyncAPI description of the topics, and the tables of
the reference pages.

The schema and the AsyncAPI document are produced from the models in ``contracts``; each table of a page
under ``docs/`` (the settings, the chart's values, the SSML and normalization examples) from the code or
data it describes, written between two markers in its page (``<!-- generated: NAME ... -->`` and
``<!-- end of generated: NAME -->``), the rest of the page being prose. All are committed;
``voxlog docs`` writes them and ``voxlog docs --check`` (and a unit test) fails when they drift.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from contracts.events import (
    EVENT_CLASSES,
    JOB_EVENT_ADAPTER,
    NODE_EVENT_ADAPTER,
    NODE_EVENT_CLASSES,
    JobEvent,
    NodeEvent,
    type_name,
)
from contracts.topics import DEFAULT_CONTROL_TOPIC, DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC

DOCS_DIR: Final = Path(__file__).resolve().parent.parent / "docs"
SCHEMA_FILE: Final = "events.schema.json"
ASYNCAPI_FILE: Final = "asyncapi.json"
_TITLE: Final = "voxlog job events"


def events_json_schema() -> dict[str, Any]:
    schema = JOB_EVENT_ADAPTER.json_schema(mode="serialization")
    nodes = NODE_EVENT_ADAPTER.json_schema(mode="serialization", ref_template="#/$defs/nodes/$defs/{model}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": _TITLE,
        **schema,
        "$defs": {**schema.get("$defs", {}), "nodes": nodes},
    }


def asyncapi_document() -> dict[str, Any]:
    """AsyncAPI 3.0 built by faststream from publishers declared on the real topics."""
    # Imported here: every ``voxlog`` command builds the parser that names this module, and faststream is a
    # quarter of a second of start-up that only ``voxlog docs`` needs.
    from faststream.kafka import KafkaBroker
    from faststream.specification import AsyncAPI

    broker = KafkaBroker("127.0.0.1:9092")
    broker.publisher(
        DEFAULT_JOBS_TOPIC,
        title="jobs",
        description=(
            "Every job event, keyed by the request fingerprint so a fingerprint's events stay in one "
            "partition, in order. Headers: type, schema_version, traceparent."
        ),
        schema=JobEvent,
    )
    broker.publisher(
        DEFAULT_CONTROL_TOPIC,
        title="control",
        description=(
            "Compacted: what is kept by key. Each worker announces its engine, model version and voices (key = "
            "worker id) and sends a heartbeat every few seconds (key = heartbeat/<worker id>): alive, and what it "
            "is doing; API keys (key/<key id>), service modes (mode/<mode>/<source>), lexicon entries "
            "(lexicon/<word>), documents (document/<id>), webhook endpoints (webhook/<endpoint id>) and deliveries "
            "(delivery/<delivery id>). Headers: type, schema_version, traceparent."
        ),
        schema=NodeEvent,
    )
    broker.publisher(
        DEFAULT_DLQ_TOPIC,
        title="dlq",
        description=(
            "Records that could not be decoded or applied: the original bytes and headers, plus "
            "dlq.reason, dlq.source.topic, dlq.source.partition and dlq.source.offset headers."
        ),
        schema=bytes,
    )
    spec = AsyncAPI(broker, title="voxlog", version="1", description="Durable text-to-speech job events.")
    document: dict[str, Any] = json.loads(spec.to_specification().to_json())
    return document


@dataclass(frozen=True)
class Table:
    """A table of a reference page: between its markers in ``page``, exactly what ``text`` returns."""

    page: str
    name: str
    source: str  # what to edit instead of the table
    text: Callable[[], str]

    @property
    def begin(self) -> str:
        return f"<!-- generated: {self.name}; `voxlog docs` writes it, edit {self.source} instead -->"

    @property
    def end(self) -> str:
        return f"<!-- end of generated: {self.name} -->"


class MissingMarkers(ValueError):
    """A page lacks the markers of a table it should hold."""


def events_table() -> str:
    """Each event, the topic it is recorded on, and the version it is written at."""
    lines = ["| event | topic | version |", "|---|---|---|"]
    for topic, classes in ((DEFAULT_JOBS_TOPIC, EVENT_CLASSES), (DEFAULT_CONTROL_TOPIC, NODE_EVENT_CLASSES)):
        for cls in classes:
            lines.append(f"| `{type_name(cls)}` | `{topic}` | {cls.model_fields['schema_version'].default} |")
    return "\n".join(lines)


# Each is imported when its table is made: every ``voxlog`` command builds the parser that names this module,
# and the SSML table loads the espeak G2P.
def _settings() -> str:
    from voxlog.config_docs import settings_table

    return settings_table()


def _chart_values() -> str:
    from infra.chart_values import values_table

    return values_table()


def _ssml() -> str:
    from tts_node.ssml_examples import table

    return table()


def _sentences() -> str:
    from tts_node.normalization.examples import SENTENCES, markdown_table

    return markdown_table(SENTENCES)


def _cases() -> str:
    from tts_node.normalization.examples import CASES, markdown_table

    return markdown_table(CASES)


TABLES: Final = (
    Table("events.md", "events", "contracts/events.py", events_table),
    Table("configuration.md", "settings", "foundation/settings.py", _settings),
    Table("deployment.md", "chart-values", "infra/helm/voxlog/values.yaml", _chart_values),
    Table("ssml.md", "ssml", "tts_node/ssml_examples.py", _ssml),
    Table("engines.md", "normalization-sentences", "tts_node/normalization/examples.py", _sentences),
    Table("engines.md", "normalization-cases", "tts_node/normalization/examples.py", _cases),
)


def with_tables(text: str, tables: tuple[Table, ...], page: str = "the page") -> str:
    """``text`` with each table's block, between its markers, made anew (a blank line on either side)."""
    for table in tables:
        start = text.find(table.begin)
        stop = text.find(table.end, start + 1)
        if start < 0 or stop < 0:
            raise MissingMarkers(f"{page} lacks the markers of its table {table.name}: {table.begin} ... {table.end}")
        text = f"{text[: start + len(table.begin)]}\n\n{table.text()}\n\n{text[stop:]}"
    return text


def _pages(directory: Path) -> dict[str, str]:
    """Each page that holds tables → its text with them made anew; read from ``directory``, else from docs/."""
    out = {}
    for page in dict.fromkeys(table.page for table in TABLES):
        source = directory / page if (directory / page).exists() else DOCS_DIR / page
        out[page] = with_tables(source.read_text(), tuple(t for t in TABLES if t.page == page), f"docs/{page}")
    return out


def render(directory: Path = DOCS_DIR) -> dict[str, str]:
    """File name → exact committed text."""
    return {
        SCHEMA_FILE: json.dumps(events_json_schema(), indent=2, sort_keys=True) + "\n",
        ASYNCAPI_FILE: json.dumps(asyncapi_document(), indent=2, sort_keys=True) + "\n",
        **_pages(directory),
    }


def write(directory: Path = DOCS_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render(directory).items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def stale(directory: Path = DOCS_DIR) -> list[str]:
    """Names of the documents whose committed text differs from the code's."""
    out = []
    for name, text in render(directory).items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            out.append(name)
    return out
