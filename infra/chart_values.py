"""The chart's values table (docs/deployment.md, Kubernetes) and its values.schema.json, made from
infra/helm/voxlog/values.yaml.

Every value there has a ``# --`` comment line above it (continued by the comment lines that follow): its row
says the value's dotted name, its default as values.yaml gives it, and that comment. A mapping without one
is a group of values, each documented in turn. The schema, which Helm applies to every install, upgrade,
template and lint, takes each value's type from its default and refuses a name values.yaml does not have
(a typo would otherwise be ignored). ``python -m infra.chart_values`` prints the table;
``python -m infra.chart_values --schema`` writes the schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

VALUES = Path(__file__).resolve().parent / "helm" / "voxlog" / "values.yaml"
SCHEMA = VALUES.with_name("values.schema.json")
_SETTINGS_MAPS = ("config", "env")  # VOXLOG_ settings by name
_CHOICES = {
    "workers.mode": ["gpu", "cpu"],
    "kafka.securityProtocol": ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
    "kafka.saslMechanism": ["SCRAM-SHA-512", "SCRAM-SHA-256"],
}
_NUMBER_OR_PERCENT = "maxUnavailable"
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?: |$)")
_DOC = re.compile(r"^ *# -- (?P<text>.*)$")
_MORE = re.compile(r"^ *# (?P<text>.*)$")


@dataclass(frozen=True)
class ValueRow:
    name: str
    default: str
    meaning: str


class UndocumentedValue(ValueError):
    """A value of values.yaml without its ``# --`` line."""


def _lookup(tree: Any, dotted: list[str]) -> Any:
    for key in dotted:
        tree = tree[key]
    return tree


def value_rows(path: Path = VALUES) -> list[ValueRow]:
    text = path.read_text()
    tree = yaml.safe_load(text)
    rows: list[ValueRow] = []
    stack: list[tuple[int, str, bool]] = []  # (indent, key, documented) of the mappings the line is in
    doc: list[str] | None = None
    for line in text.splitlines():
        if (match := _DOC.match(line)) is not None:
            doc = [match["text"]]
            continue
        if doc is not None and (more := _MORE.match(line)) is not None:
            doc.append(more["text"])
            continue
        if (key := _KEY.match(line)) is None:
            continue
        indent = len(key["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if any(documented for *_, documented in stack):  # inside a value documented whole (a default map)
            continue
        dotted = [k for _, k, _ in stack] + [key["key"]]
        value = _lookup(tree, dotted)
        if doc is not None:
            rows.append(ValueRow(".".join(dotted), json.dumps(value), " ".join(doc).replace("|", "\\|")))
        elif not isinstance(value, dict) or not value:
            raise UndocumentedValue(f"{'.'.join(dotted)} in {path.name} has no '# --' line above it")
        stack.append((indent, key["key"], doc is not None))
        doc = None
    return rows


def values_table(path: Path = VALUES) -> str:
    lines = ["| value | default | meaning |", "|---|---|---|"]
    lines += [f"| `{row.name}` | `{row.default}` | {row.meaning} |" for row in value_rows(path)]
    return "\n".join(lines)


def _schema_of(name: str, default: Any, meaning: str) -> dict[str, Any]:
    leaf = name.rsplit(".", 1)[-1]
    schema: dict[str, Any] = {"description": meaning}
    if name in _CHOICES:
        schema["enum"] = _CHOICES[name]
    elif leaf in _SETTINGS_MAPS:
        schema |= {
            "type": "object",
            "propertyNames": {"pattern": "^VOXLOG_[A-Z0-9_]+$"},
            "additionalProperties": {"type": ["string", "number", "boolean"]},
        }
    elif leaf == _NUMBER_OR_PERCENT:
        schema["anyOf"] = [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}]
    else:
        kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
        schema["type"] = kinds[type(default)]
    return schema


def values_schema(path: Path = VALUES) -> dict[str, Any]:
    """JSON Schema of the values: every name of values.yaml, typed by its default; no other name."""
    root: dict[str, Any] = {"$schema": "https://json-schema.org/draft-07/schema#", "type": "object"}
    for row in value_rows(path):
        *groups, leaf = row.name.split(".")
        node = root
        for group in groups:
            node.setdefault("additionalProperties", False)
            node = node.setdefault("properties", {}).setdefault(group, {"type": "object"})
        node.setdefault("additionalProperties", False)
        node.setdefault("properties", {})[leaf] = _schema_of(row.name, json.loads(row.default), row.meaning)
    return root


def schema_text(path: Path = VALUES) -> str:
    return json.dumps(values_schema(path), indent=2) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--schema"]:
        SCHEMA.write_text(schema_text())
        print(f"wrote {SCHEMA}")
    else:
        print(values_table())
