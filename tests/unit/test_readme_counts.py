"""README.md's "In numbers" (issue 38's Done-when): every count it gives is the tree's, so that what a newcomer
reads about the codebase's size cannot rot. When one fails, the tree changed: correct the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contracts.events import EVENT_CLASSES, NODE_EVENT_CLASSES
from contracts.upcasting import UPCASTERS
from voxlog.config_docs import rows_by_group, settings_rows

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contracts", "foundation", "producers", "consumers", "projections", "tts_node", "infra", "voxlog", "bench")


def said(pattern: str) -> tuple[int, ...]:
    """The numbers the README's "In numbers" section gives where ``pattern`` (its groups, each a number) is."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("### In numbers") :]
    section = " ".join(section[: section.index("\n### ", 1)].split())  # its lines joined, as they are read
    found = re.search(pattern, section)
    assert found is not None, f"README.md's In numbers lacks {pattern!r}"
    return tuple(int(n.replace(",", "")) for n in found.groups())


def versions(classes: tuple[type, ...]) -> int:
    return sum(cls.model_fields["schema_version"].default for cls in classes)  # type: ignore[attr-defined]


def test_the_modules_and_packages():
    modules = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    assert said(r"\*\*([\d,]+) modules\*\* in (\d+) packages outside the tests") == (len(modules), len(PACKAGES))
    assert {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests"} == set(PACKAGES)


def test_the_settings():
    assert said(r"\*\*(\d+) settings\*\*, in (\d+) groups") == (len(settings_rows()), len(rows_by_group()))


def test_the_record_types_versions_and_upcasters():
    types_, all_versions, job_types, job_versions, node_types, node_versions, upcasters = said(
        r"\*\*(\d+) record types at (\d+) versions\*\*: (\d+) job events \((\d+) versions\) on the jobs topic,"
        r" (\d+) records \((\d+) versions\) on the control topic; \*\*(\d+) upcasters\*\*"
    )
    assert (job_types, job_versions) == (len(EVENT_CLASSES), versions(EVENT_CLASSES))
    assert (node_types, node_versions) == (len(NODE_EVENT_CLASSES), versions(NODE_EVENT_CLASSES))
    assert (types_, all_versions) == (job_types + node_types, job_versions + node_versions)
    assert upcasters == len(UPCASTERS)


def test_the_read_models_one_home():
    (modules,) = said(r"is in `projections/reads/` \((\d+) modules\)")
    assert modules == len(list((ROOT / "projections" / "reads").glob("*.py")))
