"""Showing a diff view without freezing the TUI (issue 33): a small view is built at once; a
large one (zcor_tui.diff.heavy) in a worker thread, the widget saying "computing the diff…"
meanwhile and taking only the view of the latest request."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.dom import DOMNode
from textual.widgets import Static

from ..diff import heavy

PENDING = "computing the diff…"
_latest: weakref.WeakKeyDictionary[Static, object] = weakref.WeakKeyDictionary()


def show_view(owner: DOMNode, target: Static, build: Callable[[], RenderableType], *values: Any) -> None:
    """Put build() in target: now when the values are small, else from a worker thread."""
    token = object()
    _latest[target] = token
    if not heavy(*values):
        target.update(build())
        return
    target.update(Text(PENDING, style="dim italic"))

    def run() -> None:
        view = build()

        def put() -> None:
            if _latest.get(target) is token:
                target.update(view)

        owner.app.call_from_thread(put)

    owner.run_worker(run, thread=True, group=f"diff-{target.id}", description="diff")
