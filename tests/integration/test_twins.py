"""Twins at write time (issue 38): a create that nearly repeats a current memory names it."""

from __future__ import annotations

BANK = {"title": "小王在银行上班", "content": "小王在工商银行上班，做柜员，每天早上八点半到岗。"}
BANK_REWORDED = {"title": "小王是银行柜员", "content": "小王在工商银行做柜员，早上八点半就要到岗上班。"}
BANK_TRADITIONAL = {"title": "小王在銀行上班", "content": "小王在工商銀行上班，做櫃員，每天早上八點半到崗。"}
SUPERMARKET = {"title": "小王在超市上班", "content": "小王在家乐福超市上班，做理货员，每天早上七点到岗。"}


def test_a_create_that_repeats_a_memory_names_it_and_is_still_made(daemon):
    with daemon.client() as bot:
        first = bot.call_tool("zcor_memory_write", BANK)
        assert "similar" not in first and "note" not in first  # the spec's result, nothing added

        again = bot.call_tool("zcor_memory_write", BANK_REWORDED)
        assert again["created"] is True and again["id"] != first["id"]  # nothing refused
        assert [s["id"] for s in again["similar"]] == [first["id"]]
        assert again["similar"][0]["title"] == BANK["title"]
        assert 0.4 <= again["similar"][0]["score"] <= 1.0
        assert first["id"] in again["note"] and "zcor_memory_write" in again["note"]

        # a partial overlap (same person, another workplace) is not the same fact
        other = bot.call_tool("zcor_memory_write", SUPERMARKET)
        assert "similar" not in other

        # Traditional characters fold to Simplified, as in recall
        trad = bot.call_tool("zcor_memory_write", BANK_TRADITIONAL)
        assert {s["id"] for s in trad["similar"]} >= {first["id"]}
        assert trad["similar"] == sorted(trad["similar"], key=lambda s: -s["score"])

        # an update is never checked
        upd = bot.call_tool("zcor_memory_write", {"id": again["id"], **BANK})
        assert upd["created"] is False and "similar" not in upd


def test_the_check_follows_updates_supersedes_and_synonyms(daemon):
    with daemon.client("operator") as op:
        a = op.call_tool("zcor_memory_write", BANK)["id"]
        # a is rewritten to something else: a twin of its old text finds nothing
        op.call_tool("zcor_memory_write", {"id": a, "title": "天气", "content": "今天下雨了"})
        assert "similar" not in op.call_tool("zcor_memory_write", BANK_REWORDED)
        b = op.call_tool("zcor_memory_write", {"title": "Xiao Wang works at a bank",
                                               "content": "Xiao Wang works at a bank"})["id"]
        probe = {"title": "小王在银行上班", "content": "小王在银行上班"}
        # Chinese and English are one fact only where the synonym table links the words
        first = op.call_tool("zcor_memory_write", probe)
        assert b not in {s["id"] for s in first.get("similar", [])}
        op.call_tool("zcor_synonyms_add", {"terms": ["小王", "Xiao Wang"]})
        op.call_tool("zcor_synonyms_add", {"terms": ["银行", "bank"]})
        op.call_tool("zcor_synonyms_add", {"terms": ["上班", "work"]})
        op.call_tool("zcor_memory_delete", {"id": first["id"]})
        linked = op.call_tool("zcor_memory_write", probe)
        assert b in {s["id"] for s in linked["similar"]}
        # a superseded memory is no twin
        op.call_tool("zcor_memory_supersede", {"ids": [b], "replacementId": a, "reason": "test"})
        op.call_tool("zcor_memory_delete", {"id": linked["id"]})
        assert b not in {s["id"] for s in op.call_tool("zcor_memory_write", probe).get("similar", [])}


def test_twins_are_found_after_a_restart(daemon):
    with daemon.client() as bot:
        first = bot.call_tool("zcor_memory_write", BANK)["id"]
    daemon.stop()
    daemon.start()
    with daemon.client() as bot:
        again = bot.call_tool("zcor_memory_write", BANK_REWORDED)
        assert [s["id"] for s in again["similar"]] == [first]


def test_a_restore_is_followed(daemon):
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", SUPERMARKET)
        backup = op.call_tool("zcor_memory_backup", {})["backupFile"]
        op.call_tool("zcor_memory_write", BANK)
        op.call_tool("zcor_memory_restore", {"backupFile": backup})
        # the bank memory is gone with the restore: nothing repeats it now
        assert "similar" not in op.call_tool("zcor_memory_write", BANK_REWORDED)
