"""Refusals name the advice they give the model (`data: {hint, advice}`, zcord.core.errors.HINTS)
where they are raised, and operator wording swaps it by key (zcord.transport.wording): every hint
has operator words, and every hinted refusal a real daemon sends carries its hint with the
advice exactly as it appears in the message, so editing a message cannot silently break the
TUI's or the CLI's wording."""

from __future__ import annotations

import pytest

from zcord.client import ToolError, for_operator
from zcord.core.errors import HINTS, NotFound, UnknownTool, advice
from zcord.transport.wording import OPERATOR_ADVICE


def test_every_hint_has_operator_words():
    assert set(OPERATOR_ADVICE) == set(HINTS)
    for key, (tui, cli) in OPERATOR_ADVICE.items():
        assert tui and cli and tui != cli, key


def test_a_hint_is_named_where_the_refusal_is_raised():
    err = NotFound(f"No memory with id 'm9'. {advice('find_ids')}", hint="find_ids")
    assert err.message == "No memory with id 'm9'. Use zcor_memory_query or zcor_memory_children to find ids."
    assert err.data == {"hint": "find_ids", "advice": HINTS["find_ids"].advice}
    unnamed = NotFound("No memory with id 'm9'. Use zcor_memory_query or zcor_memory_children to find ids.")
    assert "hint" not in unnamed.data  # the words alone decide nothing
    unknown = UnknownTool.undeclared("zcor_nope")
    assert unknown.message == "Tool 'zcor_nope' is not declared in this request; call only the tools you were given."
    assert unknown.data == {"hint": "undeclared_tool", "advice": unknown.message, "tool": "zcor_nope"}


def _refusal(call) -> ToolError:
    with pytest.raises(ToolError) as e:
        call()
    return e.value


def test_every_hinted_refusal_carries_its_advice_as_sent(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        m = op.call_tool("zcor_memory_write", {"title": "生日", "content": "三月三日"})["id"]
        op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "Mike", "relationship": "friend",
                                                 "affinity": 1, "reason": "r", "memoryNodeId": m})
        op.call_tool("zcor_memory_write", {"id": m, "title": "生日", "content": "三月四日"})
        op.call_tool("zcor_memory_write", {"id": m, "title": "生日", "content": "三月五日"})
        seq = op.history_query({"tool": "zcor_memory_write", "changesOnly": True})["items"][1]["seq"]
        refusals = {
            "find_ids": _refusal(lambda: op.call_tool("zcor_memory_read", {"id": "m999"})),
            "find_person": _refusal(lambda: op.call_tool("zcor_relationship_read", {"personId": "qq:404"})),
            "list_backups": _refusal(lambda: op.backup_preview("memory-state-none.json")),  # an RPC error
            "unlink_first": _refusal(lambda: op.call_tool("zcor_memory_delete", {"id": m})),
            "force_revert": _refusal(lambda: op.history_revert(seq)),
            "undeclared_tool": _refusal(lambda: bot.call_tool("zcor_memory_nope", {})),
        }
    assert set(refusals) == set(HINTS)
    for key, err in refusals.items():
        assert err.data["hint"] == key and err.data["advice"] in err.message, (key, err.to_dict())
        assert err.code == HINTS[key].code
        for where, words in zip(("tui", "cli"), OPERATOR_ADVICE[key]):
            said = for_operator(err.code, err.message, where, data=err.data)
            assert err.data["advice"] not in said and words.split("{tool}")[0] in said, (key, where, said)
    assert for_operator("unknown_tool", refusals["undeclared_tool"].message, "cli",
                        data=refusals["undeclared_tool"].data) == \
        "zcord has no tool 'zcor_memory_nope'; `zcor tools` lists them."
    # the model's message itself is unchanged
    assert refusals["find_ids"].message == ("No memory with id 'm999'. Use zcor_memory_query or "
                                            "zcor_memory_children to find ids.")
