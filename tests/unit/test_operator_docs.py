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
from zcord.retrieval.recall import HEADER, HEADER_PEOPLE, NOTE, NOTE_PEOPLE, _entry, render_header

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_counts_the_fixed_text_against_the_budget(t, svc):
    for n in (len(HEADER), len(HEADER_PEOPLE), len(NOTE), len(NOTE_PEOPLE)):
        assert f"{n}" in README
    a = t.write(title="小明的生日", content="三月五号" * 50, keywords=[])["id"]
    b = t.write(title="火锅底料", content="牛油" * 50, keywords=[])["id"]
    fixed = len(HEADER) + len("\n\n" + NOTE) + len(_entry(a, "", "")) + len(_entry(b, "", ""))
    assert "With two hits that fixed text is\n  about 190 characters" in README and abs(fixed - 190) <= 5

    text, _ = render_header(svc.state, [a, b], 50)  # the README's example
    assert text == f"{a} {b}" and f"the bare ids `m3 m7`" in README
    text, _ = render_header(svc.state, [a, b], fixed - 1)  # no room for titles: note and ids
    assert text == f"{NOTE} {a} {b}"
    text, _ = render_header(svc.state, [a, b], fixed + 12)  # a little room: the titles begin
    assert text.startswith(HEADER) and "小" in text


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
