"""Generated documents: the events' JSON Schema and the AsyncAPI description of the topics.

Both are produced from the models in ``contracts`` and committed under
``docs/``; ``voxlog docs --check`` (and a unit test) fails when they drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from contracts.events import JOB_EVENT_ADAPTER, NODE_EVENT_ADAPTER, JobEvent, NodeEvent
from contracts.topics import DEFAULT_DLQ_TOPIC, DEFAULT_JOBS_TOPIC, DEFAULT_NODES_TOPIC

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
        DEFAULT_NODES_TOPIC,
        title="nodes",
        description=(
            "Compacted. Each worker announces its engine, model version and voices (key = worker id) and "
            "sends a heartbeat every few seconds (key = heartbeat/<worker id>): alive, and what it is doing."
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


def render() -> dict[str, str]:
    """File name → exact committed text."""
    return {
        SCHEMA_FILE: json.dumps(events_json_schema(), indent=2, sort_keys=True) + "\n",
        ASYNCAPI_FILE: json.dumps(asyncapi_document(), indent=2, sort_keys=True) + "\n",
    }


def write(directory: Path = DOCS_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written


def stale(directory: Path = DOCS_DIR) -> list[str]:
    """Names of the documents whose committed text differs from the code's."""
    out = []
    for name, text in render().items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            out.append(name)
    return out
