"""`Field`: the Input of zcor's forms."""

from __future__ import annotations

from typing import Any

from textual.widgets import Input


class Field(Input):
    """An Input that keeps what it shows: focusing it selects nothing and leaves the cursor
    at the end, so the first key typed into a pre-filled field adds to its value instead of
    replacing it (Textual's Input selects all on focus)."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("select_on_focus", False)
        super().__init__(*args, **kwargs)
        self.cursor_position = len(self.value)
