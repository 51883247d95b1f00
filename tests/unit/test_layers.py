"""The import contracts in pyproject.toml ([tool.importlinter]) hold, and each one breaks
when a planted import crosses it (checked on a copy of the packages)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())", "--no-cache", "--config", str(root / "pyproject.toml")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_the_code_keeps_every_contract():
    out = lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout
    assert out.stdout.count("KEPT") == 7


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("layers")
    for pkg in ("zcord", "zcor_tui"):
        shutil.copytree(ROOT / pkg, root / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


PLANTS = [
    # (module to edit, line planted, the contract it breaks)
    ("zcord/core/text.py", "from ..service import tools", "zcord's layers"),
    ("zcord/retrieval/prefix.py", "from ..transport import wording", "zcord's layers"),
    ("zcord/core/errors.py", "from . import fsutil", "No import circle"),
    ("zcord/service/calls.py", "from . import dispatcher", "No import circle"),
    ("zcord/transport/server.py", "import textual", "never imports the TUI"),
    ("zcord/transport/client.py", "from ..core import store", "loads none of the daemon"),
    ("zcor_tui/format.py", "from zcord.transport import paths", "only through the client"),
    ("zcord/bot/chat.py", "from ..service import Service", "not the server"),
    ("zcord/bot/core.py", "import asyncio", "bot core does no I/O"),
    ("zcord/bot/prompt.py", "from ..transport.client import Client", "bot core does no I/O"),
]


@pytest.mark.parametrize("module,line,contract", PLANTS, ids=[p[2] + ": " + p[0] for p in PLANTS])
def test_a_planted_import_breaks_its_contract(copy, module, line, contract):
    path = copy / module
    original = path.read_text()
    path.write_text(original + f"\n{line}  # planted\n")
    try:
        out = lint(copy)
    finally:
        path.write_text(original)
    assert out.returncode != 0
    broken = [ln for ln in out.stdout.splitlines() if ln.rstrip().endswith("BROKEN")]
    assert any(contract in ln for ln in broken) or contract in out.stdout.split("Broken contracts")[-1], out.stdout
