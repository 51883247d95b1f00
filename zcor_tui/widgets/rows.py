"""The row tables of the list screens (Review, History, Versions, Relationships, Backups,
Synonyms, Search): made one way, their columns declared as data, the row under the cursor
read one way, and the cursor put back on its row after the table is filled again.

Functions over a plain DataTable (the screens hold their table; nothing is inherited).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.widgets import DataTable

Column = tuple[str, str, int | None]
"""(label, key, width); width None: as wide as the widest cell."""


def row_table(table_id: str) -> DataTable[Any]:
    """A DataTable with a row cursor and zebra stripes (its columns come at mount)."""
    return DataTable(id=table_id, cursor_type="row", zebra_stripes=True)


def add_columns(table: DataTable[Any], columns: Iterable[Column]) -> None:
    """Add the declared columns, in order."""
    for label, key, width in columns:
        table.add_column(label, key=key, width=width)


def cursor_key(table: DataTable[Any]) -> str | None:
    """The key of the row under the cursor; None when the table is empty."""
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def move_to(table: DataTable[Any], key: str | None) -> bool:
    """Put the cursor on the row `key` (after a refill: the operator's row stays chosen);
    False, cursor untouched, when the table has no such row."""
    if key is None or key not in table.rows:
        return False
    table.move_cursor(row=table.get_row_index(key))
    return True
