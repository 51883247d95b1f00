"""Issue 23 item 10, the operator's side: the bot plants a chain of synonym groups to make
an operator's word recall a planted memory; the operator sees the chain held, discards it
(recall unchanged) or accepts it (it expands), and can discard a group the bot added. Run as
the attacker would, against a real daemon over a real socket."""

from __future__ import annotations

import json

import pytest

from tests.fault.test_limits import configured
from zcord.client import ToolError

pytestmark = pytest.mark.fault


def _recall(bot, text: str) -> list[str]:
    return bot.recall("s", [{"text": text, "origin": "external"}])


def _plant(op, bot) -> tuple[str, str]:
    """The operator's group pizza · 披萨 and an ordinary memory; the bot's planted memory and
    its chain in two groups: 意式薄饼 · 毒药 (a class of its own, in use at once) and the
    link 披萨 · 意式薄饼 (held). Returns (planted id, ordinary id)."""
    op.synonyms_set(None, ["pizza", "披萨"])
    ordinary = op.call_tool("zcor_memory_write", {"title": "周末吃披萨", "content": "x"})["id"]
    planted = bot.call_tool("zcor_memory_write", {"title": "毒药配方", "content": "x", "keywords": ["毒药"]})["id"]
    first = bot.call_tool("zcor_synonyms_add", {"terms": ["意式薄饼", "毒药"]})
    link = bot.call_tool("zcor_synonyms_add", {"terms": ["披萨", "意式薄饼"]})
    assert "held" not in first and link["held"] is True
    return planted, ordinary


def test_the_operator_discards_a_held_chain_and_recall_stays_as_it_was(make_daemon):
    d = configured(make_daemon, {})
    with d.client("operator") as op, d.client() as bot:
        before = _recall(bot, "pizza")
        planted, ordinary = _plant(op, bot)
        assert _recall(bot, "pizza") == [ordinary] and planted not in _recall(bot, "披萨")
        listing = op.request("zcor/synonyms/list", {})
        assert listing["held"] == [["披萨", "意式薄饼"]]
        assert [listing["groups"][i] for i in listing["botAdded"]] == [["意式薄饼", "毒药"]]
        groups = len(listing["groups"])

        # bad input names what is wrong and changes nothing
        for params, field in (({"action": "keep", "held": 0}, "action"), ({"action": "discard", "held": 1}, "held"),
                              ({"action": "discard"}, "held"), ({"action": "accept", "index": 0}, "index"),
                              ({"action": "discard", "held": 0, "extra": 1}, "extra"),
                              ({"action": "discard", "index": 0}, "index")):  # group 0 is not the bot's
            with pytest.raises(ToolError) as bad:
                op.request("zcor/synonyms/held", params)
            assert bad.value.field == field, (params, bad.value)
        assert op.request("zcor/synonyms/list", {})["held"] == listing["held"]
        with pytest.raises(ToolError) as forbidden:  # the bot cannot decide on its own groups
            bot.request("zcor/synonyms/held", {"action": "accept", "held": 0})
        assert forbidden.value.code == "forbidden"

        out = op.synonyms_held("discard", held=0)
        assert out == {"action": "discard", "terms": ["披萨", "意式薄饼"], "groups": groups, "held": 0}
        after = op.request("zcor/synonyms/list", {})
        assert after["held"] == [] and after["groups"] == listing["groups"]
        assert _recall(bot, "pizza") == [ordinary] and before == []
        assert _recall(bot, "披萨") == [ordinary]
        # the bot cannot plant the same link again unnoticed: it is held again
        assert bot.call_tool("zcor_synonyms_add", {"terms": ["披萨", "意式薄饼"]})["held"] is True
        # the file says so too (a restart reads the same), and the log records the decision
        doc = json.loads((d.memdir / "synonyms.json").read_text())
        assert doc["held"] == [["披萨", "意式薄饼"]] and ["披萨", "意式薄饼"] not in doc["groups"]
        rec = op.history_query({"tool": "zcor/synonyms/held", "limit": 20})["items"]
        ok = [r for r in rec if r["status"] == "ok"]
        assert len(rec) == 7 and len(ok) == 1 and ok[0]["actor"] == "operator"  # six refused
        assert ok[0]["changes"][0]["kind"] == "synonyms.discard"
        assert ok[0]["changes"][0]["before"] == ["披萨", "意式薄饼"]
        # synonym changes are not in the Memory's change history: revert says so, changes nothing
        with pytest.raises(ToolError) as no_revert:
            op.history_revert(ok[0]["seq"])
        assert no_revert.value.field == "seq" and "changed nothing in the Memory" in no_revert.value.message
        assert op.request("zcor/synonyms/list", {})["held"] == [["披萨", "意式薄饼"]]


def test_accepting_the_held_chain_makes_it_expand(make_daemon):
    d = configured(make_daemon, {})
    with d.client("operator") as op, d.client() as bot:
        planted, ordinary = _plant(op, bot)
        assert planted not in _recall(bot, "pizza")
        out = op.synonyms_held("accept", held=0)
        assert out["terms"] == ["披萨", "意式薄饼"] and out["held"] == 0
        assert set(_recall(bot, "pizza")) == {planted, ordinary}
        listing = op.request("zcor/synonyms/list", {})
        assert listing["held"] == [] and listing["groups"][-1] == ["披萨", "意式薄饼"]
        assert len(listing["groups"]) - 1 not in listing["botAdded"]  # accepted: the operator's group now
        rec = op.history_query({"tool": "zcor/synonyms/held", "limit": 5})["items"]
        assert [(r["actor"], r["changes"][0]["kind"], r["changes"][0]["after"]) for r in rec] == \
            [("operator", "synonyms.accept", ["披萨", "意式薄饼"])]


def test_the_operator_discards_a_group_the_bot_added(make_daemon):
    d = configured(make_daemon, {"maxBotSynonymGroups": 1})
    with d.client("operator") as op, d.client() as bot:
        planted = bot.call_tool("zcor_memory_write", {"title": "毒药配方", "content": "x", "keywords": ["毒药"]})["id"]
        bot.call_tool("zcor_synonyms_add", {"terms": ["zorblax", "毒药"]})
        assert _recall(bot, "zorblax") == [planted]
        listing = op.request("zcor/synonyms/list", {})
        [i] = listing["botAdded"]
        out = op.synonyms_held("discard", index=i)
        assert out["terms"] == ["zorblax", "毒药"] and out["groups"] == len(listing["groups"]) - 1
        assert _recall(bot, "zorblax") == []
        after = op.request("zcor/synonyms/list", {})
        assert after["botAdded"] == [] and ["zorblax", "毒药"] not in after["groups"]
        # the slot is free again: the cap counts the bot's groups in the table and held
        assert bot.call_tool("zcor_synonyms_add", {"terms": ["qwxa", "qwxb"]})["added"] is True


def test_a_hand_edit_between_adds_is_picked_up(make_daemon):
    """An add writes the file from what the daemon holds: a hand edit made before it is read
    first, never overwritten by the older copy."""
    d = configured(make_daemon, {})
    with d.client("operator") as op, d.client() as bot:
        bot.call_tool("zcor_synonyms_add", {"terms": ["qwxa", "qwxb"]})
        path = d.memdir / "synonyms.json"
        doc = json.loads(path.read_text())
        doc["groups"].append(["手改一", "手改二"])
        path.write_text(json.dumps(doc, ensure_ascii=False))
        bot.call_tool("zcor_synonyms_add", {"terms": ["qwxc", "qwxd"]})
        groups = op.request("zcor/synonyms/list", {})["groups"]
        assert ["手改一", "手改二"] in groups and ["qwxa", "qwxb"] in groups and ["qwxc", "qwxd"] in groups
        assert json.loads(path.read_text())["groups"] == groups
