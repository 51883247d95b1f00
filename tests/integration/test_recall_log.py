"""The recall log (issue 38): per session, the latest recall batches — what the bot was shown
and why — on disk under recall-log/, read with zcor/recall-log and `zcor recall-log`."""

from __future__ import annotations

import json

import pytest

from tests.fault.wire import Wire
from zcord.core import protocol as P
from zcord.service.recall_log import session_file


def _batch(text: str, sender: str = "qq:42") -> list[dict]:
    return [{"text": text, "origin": "external", "senderKey": sender}]


def test_each_recall_batch_is_logged_with_its_reasons_and_header(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        cat = op.call_tool("zcor_memory_write", {"title": "小明养了一只猫", "content": "橘猫，三岁，叫咪咪"})["id"]
        pot = op.call_tool("zcor_memory_write", {"title": "小明喜欢火锅", "content": "重庆老火锅"})["id"]
        ids = bot.recall("qq:group:1", _batch("小明的猫最近怎么样"))
        header = bot.context("qq:group:1")["text"]
        bot.recall("qq:group:1", _batch("今天好累啊", "qq:43"))  # recalls nothing: logged too
        bot.recall("qq:group:1", [{"text": "内部消息 小明", "origin": "internal"}])  # no external event: not a batch
        bot.recall("qq:group:2", _batch("去吃火锅吧"))

        log = op.recall_log("qq:group:1")
        assert log["session"] == "qq:group:1" and log["total"] == 2 and log["nextOffset"] is None
        newest, first = log["items"]
        assert newest["ids"] == [] and newest["hits"] == [] and newest["senders"] == ["qq:43"]
        assert first["ids"] == ids and ids[0] == cat
        assert first["senders"] == ["qq:42"]
        hit = first["hits"][0]
        assert hit["id"] == cat and hit["title"] == "小明养了一只猫"
        terms = {r["term"]: r for r in hit["reasons"]}
        assert "猫" in terms and terms["猫"]["where"] in ("title", "title+keyword") and terms["猫"]["weight"] > 0
        assert first["headerChars"] == len(header) and first["truncated"] is False and first["notShown"] == []
        assert first["at"] <= newest["at"]
        other = op.recall_log("qq:group:2")["items"]
        assert [e["ids"] for e in other] == [[pot]]

        # paging, and the batches at or before a time
        page = op.recall_log("qq:group:1", limit=1, offset=1)
        assert page["items"] == [first] and page["total"] == 2 and page["nextOffset"] is None
        assert op.recall_log("qq:group:1", before=first["at"])["items"] == [first]
        assert op.recall_log("nobody")["total"] == 0

        # not the operation history
        hist = op.call_tool("zcor_memory_history", {"keywords": ["qq:group:1"]})
        assert hist["total"] == 0
    files = sorted(p.name for p in (daemon.memdir / "recall-log").iterdir())
    assert files == sorted([f"{session_file('qq:group:1')}.jsonl", f"{session_file('qq:group:2')}.jsonl"])
    # kept across a restart
    daemon.stop()
    daemon.start()
    with daemon.client("operator") as op:
        assert op.recall_log("qq:group:1")["total"] == 2


def test_budget_cuts_and_left_out_memories_are_shown(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        long_id = op.call_tool("zcor_memory_write", {"title": "小明的猫叫咪咪", "content": "橘猫" * 2000})["id"]
        op.config_set({"recallBudget": 400})
        bot.recall("s", _batch("小明的猫怎么样"))
        entry = op.recall_log("s")["items"][0]
        assert entry["ids"] == [long_id] and entry["budget"] == 400
        assert entry["truncated"] is True and entry["headerChars"] <= 400 < entry["fullChars"]
        assert entry["headerChars"] == len(bot.context("s")["text"])


def test_entries_are_rotated_and_the_folder_is_bounded(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        for n in range(10):
            op.call_tool("zcor_memory_write", {"title": f"小明的猫{n}号" + "很长的标题" * 20, "content": "猫"})
        # seed ranking recalls all ten (each entry holds ten long titles)
        op.config_set({"recallLogEntries": 3, "recallLogBytes": 65536, "recallRanking": "seed"})
        for n in range(7):
            bot.recall("one", _batch(f"小明的猫 第{n}次"))
        log = op.recall_log("one")
        assert log["total"] == 3 and log["kept"] == 3
        assert [len(e["ids"]) for e in log["items"]] == [10] * 3
        assert {r["term"] for r in log["items"][0]["hits"][0]["reasons"]} >= {"小明"}
        stem = session_file("one")
        names = {p.name for p in (daemon.memdir / "recall-log").iterdir()}
        assert names == {f"{stem}.jsonl", f"{stem}.1.jsonl"}
        # many sessions: the least recently written are forgotten, the folder stays within the bound
        for n in range(60):
            bot.recall(f"s{n}", _batch("小明的猫"))
        op.recall_log("s59")  # waits for the writer
        size = sum(p.stat().st_size for p in (daemon.memdir / "recall-log").iterdir())
        assert size <= 65536
        assert op.recall_log("s59")["total"] == 1
        assert op.recall_log("one")["total"] == 0  # written least recently
        # 0 keeps none
        op.config_set({"recallLogEntries": 0})
        bot.recall("later", _batch("小明的猫"))
        assert op.recall_log("later")["total"] == 0


def test_bad_params_are_refused_by_name_and_the_bot_may_not_read(daemon):
    op = Wire(daemon.sock, "operator")
    for params, field in (({}, "session"), ({"session": ""}, "session"), ({"session": "s", "limit": 0}, "limit"),
                          ({"session": "s", "limit": "5"}, "limit"), ({"session": "s", "offset": -1}, "offset"),
                          ({"session": "s", "before": "yesterday"}, "before"),
                          ({"session": "s", "before": "2026-12-01T20:00:00"}, "before"),
                          ({"session": "s", "bogus": 1}, "bogus")):
        error = op.call("zcor/recall-log", params)["error"]
        assert error["code"] == P.ZCOR_ERROR and error["data"]["field"] == field, (params, error)
    op.close()
    bot = Wire(daemon.sock, "bot")
    error = bot.call("zcor/recall-log", {"session": "s"})["error"]
    assert "operator" in error["message"]
    bot.close()


@pytest.mark.parametrize("as_json", [True, False])
def test_cli_prints_the_recall_log(daemon, as_json):
    with daemon.client("operator") as op, daemon.client() as bot:
        cat = op.call_tool("zcor_memory_write", {"title": "小明的猫叫咪咪", "content": "橘猫"})["id"]
        bot.recall("qq:group:9", _batch("小明的猫呢"))
    out = daemon.zcor("recall-log", "qq:group:9", *(["--json"] if as_json else []))
    assert out.returncode == 0, out.stderr
    if as_json:
        answer = json.loads(out.stdout)
        assert answer["items"][0]["ids"] == [cat]
    else:
        assert "1 recall batch kept for session qq:group:9" in out.stdout
        assert cat in out.stdout and "小明的猫叫咪咪" in out.stdout and "from qq:42" in out.stdout
