"""What importing the client really loads, seen in a fresh interpreter's sys.modules.

Bots and the TUI import zcord.client; the import contracts (tests/unit/test_layers.py)
check the import statements, this checks the run time: no module imported lazily, by a
plugin or through a package's __init__ may pull the daemon's heavy dependencies in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pydantic", "jieba", "orjson", "httpx")


def loaded_after(code: str, env_extra: dict[str, str] | None = None) -> dict[str, list[str]]:
    """Run code in a fresh interpreter on this checkout; report which HEAVY packages (and
    which zcord modules) sys.modules holds afterwards."""
    report = ("import json, sys\n"
              f"heavy = {HEAVY!r}\n"
              "print(json.dumps({'heavy': sorted(m for m in sys.modules if m.split('.')[0] in heavy),\n"
              "                  'zcord': sorted(m for m in sys.modules if m.split('.')[0] == 'zcord')}))\n")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", **(env_extra or {})}
    done = subprocess.run([sys.executable, "-c", code + "\n" + report], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_client_loads_none_of_the_daemons_dependencies():
    loaded = loaded_after("import zcord.client")
    assert loaded["heavy"] == []
    assert "zcord.client" in loaded["zcord"]
    assert not any(m.startswith(("zcord.service", "zcord.retrieval", "zcord.bot")) for m in loaded["zcord"])


def test_using_the_clients_names_loads_none_of_them_either():
    """Every name zcord.client exports, touched (a lazy attribute would import on access)."""
    loaded = loaded_after("import zcord.client as c\nfor name in c.__all__: getattr(c, name)")
    assert loaded["heavy"] == []


def test_the_check_sees_a_heavy_import():
    """The probe itself is not blind: importing zcord.service shows pydantic and orjson
    (jieba itself is loaded only when text is first cut)."""
    loaded = loaded_after("import zcord.service")
    assert {"pydantic", "orjson"} <= {m.split(".")[0] for m in loaded["heavy"]}


@pytest.mark.parametrize("module", ["zcor_tui.launcher", "zcor_tui.app"])
def test_importing_the_tui_loads_no_jieba(module):
    pytest.importorskip("textual")
    loaded = loaded_after(f"import {module}")
    assert not any(m.split(".")[0] == "jieba" for m in loaded["heavy"])
