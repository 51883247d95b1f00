"""What the AstrBot plugin adds to a request (issue 23 item 11, issue 32): zcor's prefix
between two fixed markers first in the system prompt, the same bytes whatever the header;
the context header last, with the newest user message (a temporary part on newer AstrBot,
a message AstrBot does not save on 4.14, the end of the system prompt when AstrBot keeps no
conversation); and a retried request (the hook run again on it) the same request, whatever
the texts hold. The plugin's pure functions are taken out of
contrib/astrbot/astrbot_plugin_zcor/main.py (which needs the astrbot package to import) and
run on stand-ins for AstrBot's request, part and message classes; the real AstrBot runs are
tests/integration/test_astrbot.py and tests/fault/test_poisoning.py."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zcord.bot.prompt import assemble

MAIN = Path(__file__).resolve().parents[2] / "contrib" / "astrbot" / "astrbot_plugin_zcor" / "main.py"
NAMES = {"add_memory", "take_out", "PROMPT_START", "PROMPT_END", "ADDED"}


@dataclass
class TextPart:  # astrbot.core.agent.message.TextPart, as far as the plugin uses it
    text: str
    type: str = "text"
    temp: bool = False

    def mark_as_temp(self) -> TextPart:
        self.temp = True
        return self


@dataclass
class HeaderMessage:  # the plugin's Message subclass (pydantic, in AstrBot)
    role: str
    content: str


@dataclass
class Request:  # astrbot.core.provider.entities.ProviderRequest, the fields the plugin touches
    system_prompt: str = ""
    contexts: list[Any] = field(default_factory=list)
    extra_user_content_parts: list[Any] = field(default_factory=list)
    conversation: Any = "conversation"


def plugin_functions(temp_parts: bool, assembler: Any = assemble) -> dict:
    tree = ast.parse(MAIN.read_text(encoding="utf-8"))
    keep = [n for n in tree.body
            if (isinstance(n, ast.FunctionDef) and n.name in NAMES)
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in NAMES for t in n.targets))
            or (isinstance(n, ast.AnnAssign) and getattr(n.target, "id", None) in NAMES)]
    assert len(keep) == len(NAMES), "the plugin still defines its functions and markers"
    ns: dict = {"Any": Any, "ProviderRequest": Request, "TextPart": TextPart, "HeaderMessage": HeaderMessage,
                "TEMP_PARTS": temp_parts, "assemble": assembler}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(MAIN), "exec"), ns)
    return ns


NEWER, OLDER = plugin_functions(True), plugin_functions(False)
BY_HAND = plugin_functions(True, None)  # an older zcor wheel, without zcord.bot.prompt
START, END = NEWER["PROMPT_START"], NEWER["PROMPT_END"]
PIECES = [START, END, "<!-- zcor memory 12 -->", "\n", "\n\n", "-->", "<!--", " ", "x", "记忆", "[Auto-recall]"]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=10).map("".join)
HISTORY = [{"role": "user", "content": "早"}, {"role": "assistant", "content": [{"type": "text", "text": "早喵"}]}]


def state(req: Request) -> tuple:
    return req.system_prompt, list(req.contexts), list(req.extra_user_content_parts)


def hook(p: dict, req: Request, prefix: str, header: str) -> tuple[str, str]:
    """What the plugin's LLM-request hook does to the request."""
    p["take_out"](req)
    return p["add_memory"](req, prefix, header)


@pytest.mark.parametrize("p", [NEWER, OLDER, BY_HAND], ids=["newer", "4.14", "without-assembler"])
def test_the_prefix_comes_first_and_the_header_last_and_temporary(p):
    req = Request("你是群里的聊天机器人。", copy.deepcopy(HISTORY))
    block, header = hook(p, req, "PERSONA\n\n## Rules\n- x\n", "\n[Auto-recall: …]\n\n[m1] 火锅\n│ 好吃\n")
    assert block == f"{START}\nPERSONA\n\n## Rules\n- x\n{END}" and header == "[Auto-recall: …]\n\n[m1] 火锅\n│ 好吃"
    assert req.system_prompt == block + "\n\n你是群里的聊天机器人。"
    if p is not OLDER:
        assert req.contexts == HISTORY and req.extra_user_content_parts == [TextPart(header, temp=True)]
    else:  # a user message of its own after the history (AstrBot adds the newest message after it)
        assert req.contexts[:-1] == HISTORY and req.extra_user_content_parts == []
        (message,) = req.contexts[-1:]
        assert message == HeaderMessage("user", header) and message._no_save is True


def test_without_a_conversation_the_header_ends_the_system_prompt():
    """A request AstrBot keeps no history for (a third-party runner, a plugin's own)."""
    for p in (NEWER, OLDER, BY_HAND):
        req = Request("bot", conversation=None)
        block, header = hook(p, req, "P", "H")
        assert req.system_prompt == block + "\n\nbot\n\nH" and req.contexts == [] == req.extra_user_content_parts
        p["take_out"](req)
        assert state(req) == ("bot", [], [])


def test_nothing_to_add_adds_nothing():
    for p in (NEWER, OLDER, BY_HAND):
        req = Request("bot", copy.deepcopy(HISTORY))
        assert hook(p, req, "  \n", "\n") == ("", "")
        assert state(req) == ("bot", HISTORY, [])


@pytest.mark.parametrize("p", [NEWER, OLDER, BY_HAND], ids=["newer", "4.14", "without-assembler"])
@settings(max_examples=200, deadline=None)
@given(system=texts, prefix=texts, first=texts, second=texts, conversation=st.booleans())
def test_retries_replace_exactly_what_the_plugin_added(p, system, prefix, first, second, conversation):
    req = Request(system, copy.deepcopy(HISTORY), [TextPart("[Quoted Message]")],
                  "conversation" if conversation else None)
    original = copy.deepcopy(state(req))
    block, _ = hook(p, req, prefix, first)
    once = copy.deepcopy(state(req))
    hook(p, req, prefix, first)
    assert state(req) == once, "the same hook run again leaves the same request"
    hook(p, req, prefix, second)
    fresh = Request(system, copy.deepcopy(HISTORY), [TextPart("[Quoted Message]")], req.conversation)
    p["add_memory"](fresh, prefix, second)
    assert state(req) == state(fresh), "a retry with another header replaces the whole header"
    if conversation:  # the system prompt does not depend on the header: byte-stable
        assert req.system_prompt == once[0]
    p["take_out"](req)
    assert state(req) == original, "AstrBot's own request comes back as it was"
    p["take_out"](req)
    assert state(req) == original


@settings(max_examples=200, deadline=None)
@given(system=texts, prefix=texts, header=texts)
def test_zcors_assembler_and_the_fallback_lay_out_the_same_request(system, prefix, header):
    """An older zcor wheel (no zcord.bot.prompt) gets the same bytes."""
    one, two = Request(system), Request(system)
    assert NEWER["add_memory"](one, prefix, header) == BY_HAND["add_memory"](two, prefix, header)
    assert state(one) == state(two)
