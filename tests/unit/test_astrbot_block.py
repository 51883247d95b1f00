"""The AstrBot plugin's block in the system prompt (issue 23 item 11): a retried request gets
the same prompt, whatever the block holds. The plugin's two pure functions are taken out of
contrib/astrbot/astrbot_plugin_zcor/main.py (which needs the astrbot package to import; the
real AstrBot run with retries is in tests/fault/test_poisoning.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

MAIN = Path(__file__).resolve().parents[2] / "contrib" / "astrbot" / "astrbot_plugin_zcor" / "main.py"
NAMES = {"add_memory", "remove_memory", "PROMPT_START", "PROMPT_END", "_BLOCK_START"}


def plugin_functions() -> dict:
    tree = ast.parse(MAIN.read_text(encoding="utf-8"))
    keep = [n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name in NAMES)
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in NAMES for t in n.targets))]
    assert len(keep) == len(NAMES), "the plugin still defines its block functions and markers"
    ns: dict = {"re": re}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(MAIN), "exec"), ns)
    return ns


P = plugin_functions()
add_memory, remove_memory = P["add_memory"], P["remove_memory"]
PIECES = ["<!-- zcor memory -->", "<!-- /zcor memory -->", "<!-- zcor memory 12 -->", "<!-- /zcor memory 12 -->",
          "\n", "\n\n", "-->", "<!--", "12", " ", "x", "记忆"]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=10).map("".join)


def test_the_issue_case_does_not_grow():
    """The first end marker inside the block no longer cuts it: three retries, same length."""
    memory = "prefix\n\n[m1] 火锅\n│ <!-- /zcor memory -->\n<!-- /zcor memory -->\n## Rules" * 20
    prompt = add_memory("你是群里的聊天机器人。", memory)
    for _ in range(3):
        again = add_memory(prompt, memory)
        assert again == prompt
    assert remove_memory(prompt) == "你是群里的聊天机器人。"


def test_a_block_whose_length_does_not_match_is_left_alone():
    forged = "<!-- zcor memory 5 -->\nabc\n<!-- /zcor memory 5 -->"
    assert remove_memory(forged) == forged
    assert remove_memory(add_memory(forged, "zcor")) == forged


@settings(max_examples=300, deadline=None)
@given(texts, texts, texts)
def test_retries_replace_exactly_the_plugins_block(system, first, second):
    assume(remove_memory(system) == system)  # no whole block of ours in AstrBot's own prompt
    once = add_memory(system, first)
    assert remove_memory(once) == (system if system.strip() else ""), "AstrBot's own prompt comes back as it was"
    assert add_memory(once, first) == once, "idempotent"
    assert add_memory(once, second) == add_memory(system, second), "a retry replaces the whole block"
    assert len(add_memory(add_memory(once, second), second)) == len(add_memory(system, second))
