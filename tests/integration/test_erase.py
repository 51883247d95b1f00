"""Forgetting a person (issue 34): `zcor/erase` over a real daemon, checked by scanning
every byte under the Memory directory for what was erased, with history, versions, time
travel and revert for another person unchanged, and SIGKILL at several points."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from zcord.client import Client
from zcord.core.text import fold_han
from zcord.service.erasure import CRASH_ENV, PLAN_FILE
from zcord.transport.client import ClientError

ALICE = "qq:AliceZ9"
BOB = "qq:bob"
# what Alice's words and identity are: none of it may survive anywhere
SECRETS = ["爱丽絲的電話號碼是13800138000", "alicediagnosis depression", "AliceZ9", "alicez9",
           "愛麗絲秘密", "alice reason text", "alicez9-private-session", "held words"]
# Bob's: all of it must survive
KEPT = ["Bob likes green tea", "bobfriendreason"]


def forms(text: str) -> list[bytes]:
    """Every way a text can sit in a file: UTF-8, JSON-escaped, folded to Simplified, case."""
    out = set()
    for t in {text, fold_han(text), text.lower(), text.casefold()}:
        out.add(t.encode())
        out.add(json.dumps(t)[1:-1].encode())  # \\uXXXX
        out.add(json.dumps(t)[1:-1].lower().encode())
        out.add(t.encode("utf-16-le"))
    return sorted(out)


def scan(memdir: Path, texts: list[str]) -> list[tuple[str, str]]:
    hits = []
    for path in sorted(memdir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            low = data.lower()
            for t in texts:
                if any(f in data or f.lower() in low for f in forms(t)):
                    hits.append((str(path.relative_to(memdir)), t))
    return hits


def populate(bot: Client, op: Client) -> dict[str, str]:
    """Alice and Bob in a group and alone; the operator trusts, queries and backs up."""
    a_group = {"session": "qq:group:1", "senders": [BOB, ALICE]}
    a_alone = {"session": "alicez9-private-session", "senders": [ALICE]}
    b_group = {"session": "qq:group:1", "senders": [ALICE, BOB]}
    m1 = bot.call_tool("zcor_memory_write", {"title": "爱丽丝电话", "content": SECRETS[0]}, origin=a_group)["id"]
    m2 = bot.call_tool("zcor_memory_write", {"title": "Alice health", "content": SECRETS[1]}, origin=a_alone)["id"]
    bot.call_tool("zcor_memory_write", {"id": m2, "title": "Alice health", "content": SECRETS[1] + " treated"},
                  origin=a_alone)
    b1 = bot.call_tool("zcor_memory_write", {"title": "Bob tea", "content": KEPT[0]}, origin=b_group)["id"]
    bot.call_tool("zcor_memory_write", {"title": "Bob child note", "content": "filed under Alice's memory by bob",
                                        "parentId": m2}, origin=b_group)
    bot.call_tool("zcor_relationship_write", {"personId": ALICE, "name": SECRETS[4], "relationship": "friend",
                                              "affinity": 10, "reason": SECRETS[5], "memoryNodeId": m1},
                  origin=a_group)
    bot.call_tool("zcor_relationship_write", {"personId": BOB, "name": "Bob", "relationship": "pal",
                                              "affinity": 5, "reason": KEPT[1], "memoryNodeId": b1}, origin=b_group)
    bot.call_tool("zcor_memory_important", {"id": m1, "important": True}, origin=a_group)
    op.trust_set("QQ:ALICEZ9", "untrusted")  # her next change is held: the review record holds her words
    held = bot.call_tool("zcor_memory_write", {"title": "held note", "content": SECRETS[6] + " held words"},
                         origin=a_alone)
    assert held.get("review") == "pending"
    op.trust_set("QQ:ALICEZ9", "trusted")
    op.call_tool("zcor_memory_read", {"id": m2})  # the operator reading her memory is a logged call
    op.call_tool("zcor_memory_backup", {})
    mid = op.history_versions(b1)["items"][-1]["at"]  # Bob's memory as first written
    bot.call_tool("zcor_memory_write", {"id": b1, "title": "Bob tea", "content": KEPT[0] + " and oolong"},
                  origin=b_group)
    op.request("zcor/snapshot")
    op.call_tool("zcor_memory_backup", {})
    return {"m1": m1, "m2": m2, "b1": b1, "mid": mid, "held": held["id"]}


def test_erase_leaves_no_byte_of_her_and_bob_unchanged(daemon):
    bot, op = daemon.client("bot"), daemon.client("operator")
    ids = populate(bot, op)
    assert scan(daemon.memdir, SECRETS), "the test must see her texts before the erasure"
    t_mid = ids["mid"]
    bob_versions = op.history_versions(ids["b1"])
    bob_rel_versions = op.history_versions(BOB)

    preview = op.erase(sender="qq:alicez9", preview=True)
    assert preview["preview"] is True and preview["irreversible"] is True
    assert {m["id"] for m in preview["memories"]} == {ids["m1"], ids["m2"], ids["held"]}
    assert preview["relationships"] == [ALICE] and preview["trust"]
    assert preview["places"]["operations.jsonl"] >= 5 and any(p.startswith("backups/") for p in preview["places"])
    assert scan(daemon.memdir, SECRETS), "a preview changes nothing"

    done = op.erase(sender="qq:alicez9")
    assert done["erased"] is True and done["subject"].startswith("hmac-sha256:")
    hits = scan(daemon.memdir, SECRETS)
    assert hits == [], hits
    assert set(scan(daemon.memdir, KEPT)) >= {("operations.jsonl", KEPT[0]), ("memory-state.json", KEPT[0])}

    # the Memory now: her memories and relationship gone, Bob's child lifted, Bob intact
    assert bot.call_tool("zcor_memory_read", {"id": ids["b1"]})["content"] == KEPT[0] + " and oolong"
    with pytest.raises(ClientError):
        bot.call_tool("zcor_memory_read", {"id": ids["m1"]})
    roots = bot.call_tool("zcor_memory_children", {})
    assert "Bob child note" in json.dumps(roots, ensure_ascii=False)
    # Bob's versions are as they were, but for Alice, present at them, gone from their origins
    for now, then in ((op.history_versions(ids["b1"]), bob_versions), (op.history_versions(BOB), bob_rel_versions)):
        assert [{**i, "origin": None} for i in now["items"]] == [{**i, "origin": None} for i in then["items"]]
        assert all(i["origin"]["senders"] == [BOB] for i in now["items"]), now
        assert all(ALICE.lower() in i["origin"]["senders"] for i in then["items"])
    # time travel and revert keep working for Bob
    past = json.dumps(op.history_at(t_mid), ensure_ascii=False)
    assert KEPT[0] in past and "and oolong" not in past
    last = next(i for i in reversed(bob_versions["items"]) if i["kind"] == "node.update")
    op.history_revert(last["seq"])
    assert bot.call_tool("zcor_memory_read", {"id": ids["b1"]})["content"] == KEPT[0]
    # the tombstone: when, by whom, counts; the erasure says it cannot be reverted
    tomb = op.history_query({"tool": "zcor/erase"})["items"]
    assert len(tomb) == 1 and tomb[0]["actor"] == "operator" and tomb[0]["params"]["subject"] == done["subject"]
    with pytest.raises(ClientError) as no:
        op.history_revert(tomb[0]["seq"])
    assert "erasure" in str(no.value).lower()
    # a second request is matched to the tombstone, and finds nothing left
    again = op.erase(personId=ALICE, preview=True) if False else op.erase(person_id=ALICE, preview=True)
    assert again["erasedBefore"] and again["memories"] == []
    # after a restart the Memory loads and still holds none of her
    daemon.stop()
    daemon.start()
    op = daemon.client("operator")
    assert op.history_versions(ids["b1"])["items"][-1]["record"]["content"] == KEPT[0]
    assert op.history_query({"keywords": ["13800138000"]})["total"] == 0
    assert scan(daemon.memdir, SECRETS) == []


@pytest.mark.parametrize("step", ["plan", "backup", "state", "log", "before-unlink"])
def test_killed_mid_erasure_a_restart_completes_it(make_daemon, step):
    d = make_daemon().start()
    bot, op = d.client("bot"), d.client("operator")
    ids = populate(bot, op)
    d.stop()
    d.start(env={CRASH_ENV: step})
    op = d.client("operator")
    with pytest.raises(ClientError):
        op.erase(sender=ALICE)
    d.proc.wait(10)
    assert d.proc.returncode == -signal.SIGKILL
    assert (d.memdir / PLAN_FILE).exists()
    d.start()
    assert not (d.memdir / PLAN_FILE).exists()
    assert scan(d.memdir, SECRETS) == []
    bot, op = d.client("bot"), d.client("operator")
    assert bot.call_tool("zcor_memory_read", {"id": ids["b1"]})["content"] == KEPT[0] + " and oolong"
    assert len(op.history_query({"tool": "zcor/erase"})["items"]) == 1


def test_bad_requests_name_the_problem_and_change_nothing(daemon):
    op = daemon.client("operator")
    daemon.client("bot").call_tool("zcor_memory_write", {"title": "t", "content": "c"})
    before = (daemon.memdir / "operations.jsonl").read_bytes()
    for params, words in (({}, "exactly one"), ({"sender": "a", "personId": "b"}, "exactly one"),
                          ({"sender": " "}, "non-empty"), ({"personId": "nobody"}, "nothing in this Memory names"),
                          ({"sender": "x", "preview": "yes"}, "preview"), ({"sender": "x", "who": 1}, "who")):
        with pytest.raises(ClientError) as bad:
            op.request("zcor/erase", params)
        assert words in str(bad.value), (params, bad.value)
    assert (daemon.memdir / "operations.jsonl").read_bytes() == before
    assert not (daemon.memdir / "erasure.key").exists() and not (daemon.memdir / PLAN_FILE).exists()
    bot = daemon.client("bot")
    with pytest.raises(ClientError):
        bot.request("zcor/erase", {"sender": "x"})


def test_cli_forget_and_subject(daemon):
    bot, op = daemon.client("bot"), daemon.client("operator")
    ids = populate(bot, op)
    got = daemon.zcor("subject", ALICE, "--json")
    assert got.returncode == 0, got.stderr
    subj = json.loads(got.stdout)
    assert {m["id"] for m in subj["memories"]} == {ids["m1"], ids["m2"], ids["held"]}
    assert [h["seq"] for h in subj["held"]] and "review.json" in json.dumps(op.erase(sender=ALICE, preview=True))
    assert subj["relationships"][0]["name"] == SECRETS[4] and subj["trust"] == "trusted"
    assert {r["as"] for r in subj["records"]} >= {"speaker", "present", "named"}
    report = daemon.zcor("subject", ALICE, "--person-id")
    assert "Relationship qq:AliceZ9" in report.stdout and SECRETS[0] in report.stdout
    preview = daemon.zcor("forget", "qq:alicez9", "--preview")
    assert preview.returncode == 0 and "Would erase qq:alicez9: 3 memories" in preview.stdout
    assert "cannot be reverted" in preview.stdout and "operations.jsonl" in preview.stdout
    asked = daemon.zcor("forget", "qq:alicez9", input="")  # not a terminal: refuses without --yes
    assert asked.returncode == 1 and "--yes" in asked.stderr
    assert scan(daemon.memdir, SECRETS)
    done = daemon.zcor("forget", "qq:alicez9", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["erased"] is True
    assert scan(daemon.memdir, SECRETS) == []
    gone = daemon.zcor("subject", ALICE, "--json")
    assert json.loads(gone.stdout)["memories"] == [] and json.loads(gone.stdout)["records"] == []


def test_sealed_history_segments_are_redacted_too(daemon):
    """Past 1 MiB the inline history is sealed into history/ segments: hers are rewritten."""
    bot, op = daemon.client("bot"), daemon.client("operator")
    ids = populate(bot, op)
    filler = "填充内容" * 4000
    for i in range(40):  # 40 x 48 KB of Bob's: past 1 MiB, the history is sealed
        bot.call_tool("zcor_memory_write", {"title": f"bob filler {i}", "content": filler},
                      origin={"session": "qq:group:1", "senders": [BOB]})
    op.request("zcor/snapshot")
    segments = list((daemon.memdir / "history").glob("changes-*.jsonl"))
    assert segments and any(b"alicediagnosis" in p.read_bytes() for p in segments)
    done = op.erase(sender=ALICE)
    assert done["historySegments"] >= 1
    assert scan(daemon.memdir, SECRETS) == []
    assert op.history_versions(ids["b1"])["items"][0]["record"]["content"] == KEPT[0]
    daemon.stop()
    daemon.start()
    assert daemon.client("bot").call_tool("zcor_memory_read", {"id": ids["b1"]})["content"].startswith(KEPT[0])


def test_usage_records_of_her_private_session_go(daemon):
    """usage.jsonl (token usage per session, issue 32): a session named after her goes."""
    bot, op = daemon.client("bot"), daemon.client("operator")
    populate(bot, op)
    report = {"inputTokens": 100, "cachedTokens": 50, "outputTokens": 10, "prefixChars": 1000, "headerChars": 100}
    bot.request("zcor/usage/report", {"session": "qq:private:alicez9", **report})
    bot.request("zcor/usage/report", {"session": "qq:group:1", **report})
    assert b"alicez9" in (daemon.memdir / "usage.jsonl").read_bytes()
    op.erase(sender=ALICE)
    assert scan(daemon.memdir, SECRETS) == []
    sessions = json.dumps(op.request("zcor/usage", {}))
    assert "qq:group:1" in sessions and "alicez9" not in sessions
    bot.request("zcor/usage/report", {"session": "qq:group:1", **report})  # usage goes on being counted
    assert b"qq:group:1" in (daemon.memdir / "usage.jsonl").read_bytes()


def test_recall_log_entries_naming_her_go(daemon):
    """recall-log/ (what the bot was shown, issue 38): batches she spoke in, or that recalled
    a memory of hers, go; the group's other batches stay."""
    bot, op = daemon.client("bot"), daemon.client("operator")
    populate(bot, op)
    bot.recall("alicez9-private-session", [{"text": "我的电话是多少 爱丽丝电话", "origin": "external",
                                             "senderKey": ALICE}])
    bot.recall("qq:group:1", [{"text": "Bob tea green tea", "origin": "external", "senderKey": BOB}])
    assert op.recall_log("alicez9-private-session")["items"]
    assert op.recall_log("qq:group:1")["items"]
    assert any(b"alicez9" in p.read_bytes() for p in (daemon.memdir / "recall-log").iterdir())
    op.erase(sender=ALICE)
    assert scan(daemon.memdir, SECRETS) == []
    assert op.recall_log("alicez9-private-session")["items"] == []
    assert op.recall_log("qq:group:1")["items"]
    bot.recall("qq:group:1", [{"text": "Bob tea", "origin": "external", "senderKey": BOB}])
    assert len(op.recall_log("qq:group:1")["items"]) == 2  # the log goes on
