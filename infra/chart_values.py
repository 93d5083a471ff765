"""The chart's values table (README.md, Kubernetes), made from infra/helm/voxlog/values.yaml.

Every value there has a ``# --`` comment line above it (continued by the comment lines that follow): its row
says the value's dotted name, its default as values.yaml gives it, and that comment. A mapping without one
is a group of values, each documented in turn. ``python -m infra.chart_values`` prints the table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

VALUES = Path(__file__).resolve().parent / "helm" / "voxlog" / "values.yaml"
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


if __name__ == "__main__":
    print(values_table())
