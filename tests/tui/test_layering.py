"""The TUI reaches zcord only through zcord.client (which also gives the default socket paths)."""

from __future__ import annotations

import ast
from pathlib import Path

import zcor_tui

ALLOWED = {"zcord.client"}


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_zcor_tui_uses_only_the_client_side_of_zcord():
    root = Path(zcor_tui.__file__).parent
    for path in root.rglob("*.py"):
        zcord = {m for m in imported_modules(path) if m == "zcord" or m.startswith("zcord.")}
        assert zcord <= ALLOWED, f"{path.relative_to(root)} imports {sorted(zcord - ALLOWED)}"
