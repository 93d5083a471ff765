"""docs/deployment.md's table of the chart's values is values.yaml's (infra.chart_values): every value, its default and
its `# --` line, so the table cannot drift from the chart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.chart_values import SCHEMA, VALUES, UndocumentedValue, schema_text, value_rows, values_table

PAGE = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"


def _leaves(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in tree.items():
        name = f"{prefix}{key}"
        out |= _leaves(value, f"{name}.") if isinstance(value, dict) and value else {name}
    return out


def test_the_deployment_page_shows_the_values_table_as_values_yaml_makes_it():
    assert values_table() in PAGE.read_text(), "run `voxlog docs`: it writes the table into docs/deployment.md"


def test_every_value_of_the_chart_is_a_row_with_its_default_and_meaning():
    rows = {row.name: row for row in value_rows()}
    leaves = _leaves(yaml.safe_load(VALUES.read_text()))
    # A map documented whole (a default of labels, a volume source) is one row, not one per key.
    assert leaves - set(rows) == {
        "grafanaDashboard.labels.grafana_dashboard",
        "workers.weights.persistentVolumeClaim.claimName",
        "workers.weights.persistentVolumeClaim.readOnly",
    }
    assert rows["workers.mode"].default == '"gpu"'
    assert rows["workers.keda.enabled"].default == "false"
    assert all(row.meaning for row in rows.values())


def test_a_value_without_its_line_is_refused(tmp_path: Path):
    values = tmp_path / "values.yaml"
    values.write_text("api:\n  # -- Documented.\n  replicas: 2\n  port: 8000\n")
    with pytest.raises(UndocumentedValue, match=r"api\.port"):
        value_rows(values)


def test_the_chart_s_values_schema_is_made_from_values_yaml():
    assert SCHEMA.read_text() == schema_text(), "run `python -m infra.chart_values --schema`"


def test_the_schema_types_each_value_by_its_default_and_lets_in_only_voxlog_settings():
    schema = json.loads(schema_text())
    workers = schema["properties"]["workers"]
    assert workers["additionalProperties"] is False
    assert workers["properties"]["replicas"]["type"] == "integer"
    assert workers["properties"]["keda"]["properties"]["enabled"]["type"] == "boolean"
    assert workers["properties"]["mode"]["enum"] == ["gpu", "cpu"]
    assert schema["properties"]["config"]["propertyNames"] == {"pattern": "^VOXLOG_[A-Z0-9_]+$"}
