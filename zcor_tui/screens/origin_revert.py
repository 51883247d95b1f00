"""Undo by origin (History, `O`): everything one chat sender caused, previewed by zcord
(`zcor/history/revertOrigin` with `preview: true`), then reverted as one operation, forced
or cancelled — the revert dialog, asking about a sender instead of one operation."""

from __future__ import annotations

from typing import Any

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
        return await self.app.client.history_revert_origin(self.sender, **kwargs)
