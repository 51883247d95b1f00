"""Consolidation proposals (issue 38): near-duplicate clusters and superseded chains, listed
by zcor/consolidate/list, merged through zcor_memory_merge, dismissed for good."""

from __future__ import annotations

import json

from tests.fault.wire import Wire
from zcord.core import protocol as P

BANK = {"title": "小王在银行上班", "content": "小王在工商银行上班，做柜员，每天早上八点半到岗。"}
BANK_REWORDED = {"title": "小王是银行柜员", "content": "小王在工商银行做柜员，早上八点半就要到岗上班。"}
CAT = {"title": "晓雯喜欢猫", "content": "晓雯最喜欢猫，家里养了一只英短叫团子。"}
CAT_TRADITIONAL = {"title": "曉雯喜歡貓", "content": "曉雯最喜歡貓，家裡養了一隻英短叫團子。"}


def _write(c, args: dict) -> str:
    return c.call_tool("zcor_memory_write", args)["id"]


def test_clusters_are_listed_merged_and_dismissed(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        a, b = _write(bot, BANK), _write(bot, BANK_REWORDED)
        c, d = _write(bot, CAT), _write(bot, CAT_TRADITIONAL)
        _write(bot, {"title": "小王在超市上班", "content": "小王在家乐福超市上班，做理货员，每天早上七点到岗。"})
        listing = op.consolidate_list()
        assert listing["scan"]["complete"] is True and listing["total"] == 2
        clusters = {frozenset(i["ids"]): i for i in listing["items"]}
        assert set(clusters) == {frozenset({a, b}), frozenset({c, d})}
        bank = clusters[frozenset({a, b})]
        assert bank["kind"] == "twins" and bank["newest"] == b and bank["ids"][0] == b
        assert [m["id"] for m in bank["members"]] == [b, a] and bank["members"][1]["content"] == BANK["content"]
        assert bank["pairs"][0]["ids"] == sorted([a, b]) and bank["score"] >= 0.4

        # paging
        first = op.consolidate_list(limit=1)
        assert len(first["items"]) == 1 and first["nextOffset"] == 1 and first["total"] == 2
        assert op.consolidate_list(limit=1, offset=1)["nextOffset"] is None

        # a merge is an ordinary tool call; the cluster is gone, the merged memory is no twin of itself
        merged = op.call_tool("zcor_memory_merge", {"ids": [a, b], "title": BANK["title"],
                                                    "content": BANK["content"], "reason": "重复"})
        left = op.consolidate_list()
        assert [set(i["ids"]) for i in left["items"]] == [{c, d}]
        hist = op.call_tool("zcor_memory_history", {"keywords": ["重复"]})
        assert hist["total"] >= 1
        # and it can be reverted like any operation: the cluster comes back
        op.history_revert(hist["items"][0]["seq"])
        assert {frozenset(i["ids"]) for i in op.consolidate_list()["items"]} == {frozenset({a, b}), frozenset({c, d})}
        assert merged["id"] not in {i for item in op.consolidate_list()["items"] for i in item["ids"]}

        # dismissed: not proposed again, also after a restart
        op.consolidate_dismiss([c, d])
        assert [set(i["ids"]) for i in op.consolidate_list()["items"]] == [{a, b}]
    stored = json.loads((daemon.memdir / "consolidate.json").read_text())
    assert stored == {"version": 1, "dismissed": [sorted([c, d])]}
    daemon.stop()
    daemon.start()
    with daemon.client("operator") as op:
        items = op.consolidate_list()["items"]
        assert [set(i["ids"]) for i in items] == [{a, b}]
        # a new twin joins the dismissed cluster: the bigger cluster is proposed
        e = _write(op, {"title": "晓雯喜欢猫", "content": "晓雯最喜欢猫，家里养了一只英短叫团子，很胖。"})
        assert {frozenset(i["ids"]) for i in op.consolidate_list()["items"]} == {frozenset({a, b}),
                                                                                frozenset({c, d, e})}


def test_superseded_chains_are_proposed_and_folded_from_the_cli(daemon):
    with daemon.client("operator") as op:
        v1 = _write(op, {"title": "晓雯住在北京", "content": "朝阳区"})
        v2 = _write(op, {"title": "晓雯搬到上海", "content": "浦东"})
        v3 = _write(op, {"title": "晓雯现在住杭州", "content": "西湖区"})
        op.call_tool("zcor_memory_supersede", {"ids": [v1], "replacementId": v2, "reason": "搬家"})
        only_one = op.consolidate_list(kind="chain")
        assert only_one["total"] == 0  # one old version is no chain to fold
        op.call_tool("zcor_memory_supersede", {"ids": [v2], "replacementId": v3, "reason": "又搬家"})
        chain = op.consolidate_list(kind="chain")["items"]
        assert len(chain) == 1
        assert chain[0]["ids"] == [v3, v2, v1] and chain[0]["fold"] == [v1, v2] and chain[0]["newest"] == v3
    out = daemon.zcor("consolidate", "--kind", "chain")
    assert out.returncode == 0 and f"superseded chain to {v3}" in out.stdout, out.stderr
    out = daemon.zcor("consolidate", "fold", v3)
    assert out.returncode == 0, out.stderr
    with daemon.client("operator") as op:
        assert op.consolidate_list(kind="chain")["total"] == 0
        for gone in (v1, v2):
            assert op.call_tool("zcor_memory_history", {"keywords": [gone]})["total"] >= 1
        assert op.call_tool("zcor_memory_read", {"id": v3})["title"] == "晓雯现在住杭州"


def test_cli_lists_merges_and_dismisses(daemon):
    with daemon.client() as bot:
        a, b = _write(bot, BANK), _write(bot, BANK_REWORDED)
        c, d = _write(bot, CAT), _write(bot, CAT_TRADITIONAL)
    out = daemon.zcor("consolidate")
    assert out.returncode == 0, out.stderr
    assert "2 proposals" in out.stdout and f"zcor consolidate merge {b} {a}" in out.stdout
    listed = json.loads(daemon.zcor("consolidate", "--json").stdout)
    assert listed["total"] == 2
    out = daemon.zcor("consolidate", "merge", a, b, "--title", "小王的工作")
    assert out.returncode == 0, out.stderr
    merged = json.loads(out.stdout)
    assert merged["node"]["title"] == "小王的工作" and merged["node"]["content"] == BANK_REWORDED["content"]
    assert daemon.zcor("consolidate", "dismiss", c, d).returncode == 0
    out = daemon.zcor("consolidate")
    assert "0 proposals" in out.stdout
    bad = daemon.zcor("consolidate", "merge", a)
    assert bad.returncode == 2 and "two or more" in bad.stderr


def test_bad_params_are_refused_by_name(daemon):
    op = Wire(daemon.sock, "operator")
    for method, params, field in (("zcor/consolidate/list", {"limit": 0}, "limit"),
                                  ("zcor/consolidate/list", {"kind": "other"}, "kind"),
                                  ("zcor/consolidate/list", {"bogus": 1}, "bogus"),
                                  ("zcor/consolidate/dismiss", {}, "ids"),
                                  ("zcor/consolidate/dismiss", {"ids": ["m1"]}, "ids"),
                                  ("zcor/consolidate/dismiss", {"ids": ["m1", "m1"]}, "ids")):
        error = op.call(method, params)["error"]
        assert error["code"] == P.ZCOR_ERROR and error["data"]["field"] == field, (method, params, error)
    op.close()
    assert not (daemon.memdir / "consolidate.json").exists()
    bot = Wire(daemon.sock, "bot")
    assert "operator" in bot.call("zcor/consolidate/list", {})["error"]["message"]
    bot.close()
