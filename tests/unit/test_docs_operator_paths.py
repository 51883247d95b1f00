"""What the README tells a new operator (issue 35): where `make run` put the commands and
how to reach them, and every `zcor` subcommand by name."""

from __future__ import annotations

import argparse
from pathlib import Path

from zcord.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_says_where_the_commands_are_and_how_to_put_them_on_path():
    two_commands = README.split("## The operator TUI")[0]
    assert ".venv/bin/" in two_commands and "PATH" in two_commands
    assert ". .venv/bin/activate" in two_commands and "export PATH=" in two_commands


def test_the_readme_names_every_zcor_subcommand():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name in sub.choices if f"zcor {name}" not in README and f"| {name} " not in README]
    assert not missing, missing


def test_the_readme_says_why_a_title_of_filler_gets_no_keywords():
    from zcord.core.text import derive_keywords

    for word in ("People", "people", "friends", "things", "今天", "朋友"):
        assert derive_keywords(word) == [], word  # what the README says of them
        assert f"`{word}`" in README, word
    assert "gets no keywords" in README
