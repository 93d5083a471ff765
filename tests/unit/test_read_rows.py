"""The read model's row types (projections/reads/rows.py) are the projector's tables as it writes them
(projections/rows.TABLES, the one description): every field a row type reads is a column of its table, or
is read apart or computed by its query, and of the column's type (or its decoder's), so a column renamed,
dropped or retyped on the write side fails here, not in a query at run time."""

from __future__ import annotations

import pytest

from projections.reads import rows
from projections.reads.rows import Row, mistyped, not_columns

pytestmark = pytest.mark.unit
ROW_TYPES = [t for t in vars(rows).values() if isinstance(t, type) and issubclass(t, Row) and t._table]


def test_every_read_row_names_its_table():
    assert {t.__name__ for t in ROW_TYPES} >= {"JobRecord", "SegmentRow", "PartRow", "DocumentRow", "UsageRow"}


@pytest.mark.parametrize("row_type", ROW_TYPES, ids=lambda t: t.__name__)
def test_a_read_rows_fields_are_its_tables_columns(row_type: type[Row]):
    assert not_columns(row_type) == []


def test_a_field_the_table_lacks_is_named():
    class Drifted(rows.JobStateRow, frozen=True, kw_only=True):
        renamed_state: str = ""

    assert not_columns(Drifted) == ["renamed_state"]


@pytest.mark.parametrize("row_type", ROW_TYPES, ids=lambda t: t.__name__)
def test_a_read_rows_fields_have_their_columns_types(row_type: type[Row]):
    assert mistyped(row_type) == []


def test_a_field_of_another_type_than_its_column_is_named():
    class Retyped(rows.JobStateRow, frozen=True, kw_only=True):
        error_code: int | None = None  # the table's is text

    class Undecoded(rows.JobStateRow, frozen=True, kw_only=True):
        state: str = ""  # the table's text, but the row decodes it to a JobState

    assert mistyped(Retyped) == ["error_code"]
    assert mistyped(Undecoded) == ["state"]
