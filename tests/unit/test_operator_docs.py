"""What the README and the launcher tell operators matches what the code does: the recall
budget's fixed text, how to get the TUI when zcor is on no package index, the scripts."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

from zcor_tui import launcher
from zcord.retrieval.recall import render_header

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_counts_the_fixed_text_against_the_budget(t, svc):
    a = t.write(title="小明的生日", content="三月五号" * 50, keywords=[])["id"]
    b = t.write(title="火锅底料", content="牛油" * 50, keywords=[])["id"]
    # the smallest budget that gets the full frame (opening line, entries, note): the fixed text
    fixed = next(n for n in range(1, 2000) if render_header(svc.state, [a, b], n)[0].startswith("[Auto-recall"))
    assert 150 <= fixed <= 450, fixed  # "a couple of hundred characters"
    assert "With two hits that fixed\n  text is already a couple of hundred characters" in README

    text, _ = render_header(svc.state, [a, b], 50)  # the README's example
    assert text == f"{a} {b}" and "the bare ids `m3 m7`" in README
    text, _ = render_header(svc.state, [a, b], fixed - 1)  # no room for titles: note and ids
    assert text.endswith(f" {a} {b}") and text.startswith("[Truncated to fit;")
    assert "`[Truncated to fit; …] m3 m7`" in README


def test_the_tui_hint_names_where_zcor_came_from(monkeypatch):
    hint = launcher.install_hint("/venv/bin/python")
    assert "'zcor[tui]'" not in hint and "not on a package index" in hint
    try:
        origin = json.loads(importlib.metadata.distribution("zcor").read_text("direct_url.json") or "{}")
    except importlib.metadata.PackageNotFoundError:
        origin = {}
    if origin.get("url", "").startswith("file://"):  # installed from a checkout or a wheel here
        path = origin["url"].removeprefix("file://")
        assert f"/venv/bin/python -m pip install '{path}[tui]'" in hint

    def nowhere(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", nowhere)
    assert "/venv/bin/python -m pip install textual\n" in launcher.install_hint("/venv/bin/python")


def test_every_console_script_exists_and_zcor_demo_is_gone():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"zcord", "zcor", "zcor-tui"}
    for target in scripts.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func))
    assert not (ROOT / "zcord" / "bot" / "demo.py").exists()
    assert not re.search(r"zcor-demo", README)
