"""Undo by origin (History, `O`): everything one chat sender caused, previewed by zcord
(`zcor/history/revertOrigin` with `preview: true`), then reverted as one operation, forced
or cancelled — the revert dialog, asking about a sender instead of one operation.

Only what the sender spoke for is undone (issue 33): the operations they were merely present
at, another sender's message leading to them, are listed apart (zcord's `shared`) and left
alone."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from .revert import RevertScreen


class RevertOriginScreen(RevertScreen):
    """Preview and run `zcor/history/revertOrigin {sender}`; dismisses with its result or None."""

    def __init__(self, sender: str):
        super().__init__(0)
        self.sender = sender
        self.subject = f"the changes caused by {sender}"

    def _title(self) -> Text:
        title = Text("Revert everything caused by ")
        title.append(self.sender, style="bold cyan")
        return title

    async def _request(self, **kwargs: Any) -> dict[str, Any]:
        return dict(await self.app.client.history_revert_origin(self.sender, **kwargs))

    def render_preview(self) -> RenderableType:
        preview = self.preview or {}
        shared = preview.get("shared") or []
        note = Text(f"Left alone: {len(shared)} operation(s) {self.sender} was only present at (another sender's "
                    f"message led to them): #" + ", #".join(map(str, shared[:30])) + (" …" if len(shared) > 30 else ""),
                    style="italic yellow") if shared else None
        if not preview.get("seqs") and note is not None:
            return Group(Text(f"{self.sender} caused no change alone.", style="bold"), note)
        body = super().render_preview()
        return Group(body, Text(""), note) if note is not None else body
