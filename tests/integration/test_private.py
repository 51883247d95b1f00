"""Private stays private (issue 34) over a real daemon: what a one-to-one conversation creates
is recalled, shown and readable only in its session; every other session's model finds no
trace of it (every string of every answer is scanned for the private words); operators see
it with its scope and change the scope as a logged, revertible operation; privateScope
"everywhere" gives the old behaviour; the scope survives a restart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zcord.client import Client
from zcord.transport.client import ToolError

PRIVATE = "qq:friend:42"
GROUP = "qq:group:1"
ALICE = "qq:42"
BOB = "qq:7"
IN_PRIVATE = {"session": PRIVATE, "senders": [ALICE], "private": True}
IN_GROUP = {"session": GROUP, "senders": [BOB, ALICE]}
# said only in private: none of it may reach another session's model
WORDS = ["Zorblax", "抑郁症秘密", "13800138000", "quexotic", "Plimbo"]


def texts(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False).casefold()


def clean(value: Any) -> Any:
    """`value` (an answer or an error message), checked to hold none of the private words."""
    seen = texts(value)
    leaked = [w for w in WORDS if w.casefold() in seen]
    assert not leaked, f"private words {leaked} reached another session: {seen[:800]}"
    return value


def tool(bot: Client, name: str, args: dict[str, Any], origin: dict[str, Any] | None = None) -> Any:
    """A tool's answer, or its error (code, message) — both scanned by the caller."""
    try:
        return bot.call_tool(name, args, origin=origin)
    except ToolError as e:
        return {"error": e.code, "message": e.message}


def private_life(bot: Client) -> dict[str, str]:
    """A shared memory from the group; a private conversation that writes, updates, merges and
    files its own memories, reads and queries with its words."""
    shared = bot.call_tool("zcor_memory_write", {"title": "Alice likes tea", "content": "green tea in the group"},
                           origin=IN_GROUP)["id"]
    bot.recall(PRIVATE, [{"text": "I need to tell you about Zorblax", "origin": "external", "senderKey": ALICE}],
               private=True)
    # no claim: the origin is inferred from the private batch, and carries `private`
    p1 = bot.call_tool("zcor_memory_write", {"title": "Alice Zorblax diagnosis", "content": "抑郁症秘密 quexotic",
                                             "parentId": shared})["id"]
    p2 = bot.call_tool("zcor_memory_write", {"title": "Alice phone", "content": "new number 13800138000",
                                             "keywords": ["phone", "Plimbo"]}, origin=IN_PRIVATE)["id"]
    bot.call_tool("zcor_memory_write", {"id": p2, "title": "Alice phone Plimbo", "content": "13800138000 (new)"},
                  origin=IN_PRIVATE)
    p3 = bot.call_tool("zcor_memory_write", {"title": "Alice Zorblax therapist", "content": "Plimbo on Mondays"},
                       origin=IN_PRIVATE)["id"]
    merged = bot.call_tool("zcor_memory_merge", {"ids": [p1, p3], "title": "Alice Zorblax care",
                                                 "content": "抑郁症秘密, therapist Plimbo", "reason": "Zorblax"},
                           origin=IN_PRIVATE)["id"]
    bot.call_tool("zcor_memory_query", {"keywords": ["quexotic"]}, origin=IN_PRIVATE)  # a logged read
    return {"shared": shared, "p1": p1, "p2": p2, "p3": p3, "merged": merged}


def test_a_private_conversation_stays_in_its_session(daemon):
    bot, op = daemon.client(), daemon.client(role="operator")
    ids = private_life(bot)
    private_ids = [ids[k] for k in ("p1", "p2", "p3", "merged")]

    # the private session sees its own memories
    got = bot.recall(PRIVATE, [{"text": "Zorblax and Plimbo", "origin": "external", "senderKey": ALICE}],
                     private=True)
    assert ids["merged"] in got and ids["p2"] in got
    assert "抑郁症秘密" in bot.context(PRIVATE)["text"]
    assert bot.call_tool("zcor_memory_read", {"id": ids["p2"]}, origin=IN_PRIVATE)["content"] == "13800138000 (new)"
    assert bot.call_tool("zcor_memory_query", {"keywords": ["Plimbo"]}, origin=IN_PRIVATE)["total"] == 2

    # the group: recall, header, every read tool — not found, not listed, not counted
    op.call_tool("zcor_relationship_write", {"personId": ALICE, "name": "Alice", "relationship": "friend",
                                             "affinity": 20, "reason": "kind", "memoryNodeId": ids["merged"]})
    clean(bot.recall(GROUP, [{"text": "Zorblax Plimbo phone 抑郁症秘密 quexotic Alice tea", "origin": "external",
                              "senderKey": ALICE}]))
    header = clean(bot.context(GROUP))
    assert ids["shared"] in header["ids"] and not set(private_ids) & set(header["ids"])
    assert "Alice likes tea" in header["text"] and "Their memory" not in header["text"]
    # the history, before the group's own calls name the words: nothing of the private conversation
    for words in (["Zorblax"], ["抑郁症秘密"], ["Plimbo"], []):
        got = bot.call_tool("zcor_memory_history", {"keywords": words, "limit": 100}, origin=IN_GROUP)
        mine = [r for r in got["items"] if (r.get("origin") or {}).get("session") == GROUP
                and r["tool"] == "zcor_memory_history"]  # this test's own history calls name the words
        clean([{**r, "params": None} if r in mine else r for r in got["items"]])
        assert got["total"] == len(got["items"])
        if words:
            assert got["items"] == mine
        assert not {c.get("target") for r in got["items"] for c in r["changes"]} & set(private_ids)
    for i in private_ids:
        for name in ("zcor_memory_read", "zcor_memory_trace"):
            got = clean(tool(bot, name, {"id": i}, IN_GROUP))
            assert got.get("error") == "not_found", got
        got = clean(tool(bot, "zcor_memory_children", {"parentId": i}, IN_GROUP))
        assert got.get("error") == "not_found"
    roots = clean(bot.call_tool("zcor_memory_children", {}, origin=IN_GROUP))
    assert [x["id"] for x in roots["items"]] == [ids["shared"]] and roots["total"] == 1
    assert roots["items"][0]["childCount"] == 0  # p1 was filed under it, in private
    under = clean(bot.call_tool("zcor_memory_children", {"parentId": ids["shared"]}, origin=IN_GROUP))
    assert under["items"] == [] and under["total"] == 0
    assert clean(bot.call_tool("zcor_memory_read", {"id": ids["shared"]}, origin=IN_GROUP))["childCount"] == 0
    trace = clean(bot.call_tool("zcor_memory_trace", {"id": ids["shared"]}, origin=IN_GROUP))
    assert trace["children"] == [] and trace["childrenTotal"] == 0
    for words in (["Zorblax"], ["Plimbo"], ["13800138000"], ["Alice"], []):
        got = clean(bot.call_tool("zcor_memory_query", {"keywords": words, "includeSuperseded": True},
                                  origin=IN_GROUP))
        assert {x["id"] for x in got["items"]} <= {ids["shared"]}
        assert got["total"] == (1 if words in (["Alice"], []) else 0)
    # search: no candidate is left, so no LLM is asked (none is configured)
    assert clean(bot.call_tool("zcor_memory_search", {"keywords": ["Zorblax"]}, origin=IN_GROUP))["items"] == []
    # writes naming them: not found; the group cannot file under them or link them
    for args in ({"id": ids["p2"], "title": "x", "content": "y"},
                 {"title": "child", "content": "c", "parentId": ids["p2"]}):
        assert clean(tool(bot, "zcor_memory_write", args, IN_GROUP))["error"] == "not_found"
    assert clean(tool(bot, "zcor_memory_delete", {"id": ids["p2"]}, IN_GROUP))["error"] == "not_found"
    got = clean(tool(bot, "zcor_relationship_write", {"personId": BOB, "name": "Bob", "relationship": "pal",
                                                      "affinity": 1, "reason": "r", "memoryNodeId": ids["p2"]},
                     IN_GROUP))
    assert got["error"] == "not_found"
    # the twin check of a group write never names a private memory it nearly repeats
    twin = bot.call_tool("zcor_memory_write", {"title": "Alice Zorblax care", "content": "抑郁症秘密, therapist Plimbo"},
                         origin=IN_GROUP)
    assert not {x["id"] for x in twin.get("similar", ())} & set(private_ids)
    private_twin = bot.call_tool("zcor_memory_write", {"title": "Alice Zorblax care", "content":
                                                       "抑郁症秘密, therapist Plimbo"}, origin=IN_PRIVATE)
    assert ids["merged"] in {x["id"] for x in private_twin.get("similar", ())}  # there it is one
    # a model call with no session at all sees only shared memories too
    assert clean(tool(daemon.client(), "zcor_memory_read", {"id": ids["p2"]}))["error"] == "not_found"

    # the system prefix is shared: no private memory is in it; nobody marks one important
    clean(bot.prefix())
    got = tool(op, "zcor_memory_important", {"id": ids["p2"], "important": True})
    assert got["error"] == "conflict" and "private" in got["message"]

    # the operator sees everything, with the scope
    read = op.call_tool("zcor_memory_read", {"id": ids["p2"]})
    assert read["scope"] == {"session": PRIVATE} and "scope" not in op.call_tool(
        "zcor_memory_read", {"id": ids["shared"]})
    listed = op.call_tool("zcor_memory_query", {"keywords": ["Plimbo"]})
    assert {x["id"]: x.get("scope") for x in listed["items"]} == {
        ids["p2"]: {"session": PRIVATE}, ids["merged"]: {"session": PRIVATE}, twin["id"]: None,
        private_twin["id"]: {"session": PRIVATE}}
    roots = op.call_tool("zcor_memory_children", {})
    assert {x["id"] for x in roots["items"]} >= {ids["shared"], ids["p2"], ids["merged"]}
    hist = op.history_query({"keywords": ["Zorblax"]})
    assert hist["total"] > 0
    assert any(c.get("kind") == "scope.set" for r in op.history_query({"target": ids["p2"]})["items"]
               for c in r["changes"])


def test_a_private_conversation_changes_only_what_it_created(daemon):
    bot = daemon.client()
    ids = private_life(bot)
    refusals = [
        ("zcor_memory_write", {"id": ids["shared"], "title": "Alice likes tea", "content": "Zorblax"}),
        ("zcor_memory_delete", {"id": ids["shared"]}),
        ("zcor_memory_merge", {"ids": [ids["shared"], ids["p2"]], "title": "t", "content": "c", "reason": "r"}),
        ("zcor_memory_supersede", {"ids": [ids["shared"]], "replacementId": ids["p2"], "reason": "Zorblax"}),
        ("zcor_memory_important", {"id": ids["p2"], "important": True}),
        ("zcor_relationship_write", {"personId": ALICE, "name": "Alice", "relationship": "friend",
                                     "affinity": 5, "reason": "Zorblax"}),
        ("zcor_synonyms_add", {"terms": ["Zorblax", "Plimbo"]}),
    ]
    for name, args in refusals:
        got = tool(bot, name, args, IN_PRIVATE)
        assert got.get("error") == "conflict" and "private" in got["message"], (name, got)
    shared = bot.call_tool("zcor_memory_read", {"id": ids["shared"]}, origin=IN_GROUP)
    assert shared["content"] == "green tea in the group" and shared["supersededBy"] is None
    # a memory created in private and superseded there by a shared one: allowed (nothing shared changes)
    bot.call_tool("zcor_memory_supersede", {"ids": [ids["p2"]], "replacementId": ids["shared"], "reason": "old"},
                  origin=IN_PRIVATE)
    clean(bot.call_tool("zcor_memory_read", {"id": ids["shared"]}, origin=IN_GROUP))
    # the bot forgetting the flag in a claim for a session recalled as private: still private
    loose = bot.call_tool("zcor_memory_write", {"title": "Zorblax again", "content": "x"},
                          origin={"session": PRIVATE, "senders": [ALICE]})["id"]
    assert tool(bot, "zcor_memory_read", {"id": loose}, IN_GROUP)["error"] == "not_found"


def test_scope_change_is_logged_revertible_and_survives_restart(make_daemon):
    d = make_daemon().start()
    bot, op = d.client(), d.client(role="operator")
    ids = private_life(bot)
    p2 = ids["p2"]
    # everywhere: the group reads it now
    got = op.scope_set(p2, "everywhere")
    assert got["scope"] == "everywhere"
    assert bot.call_tool("zcor_memory_read", {"id": p2}, origin=IN_GROUP)["content"] == "13800138000 (new)"
    op.history_revert(got["seq"])
    assert tool(bot, "zcor_memory_read", {"id": p2}, IN_GROUP)["error"] == "not_found"
    # a memory scoped to the group session by the operator: only the group sees it
    moved = op.scope_set(ids["shared"], {"session": GROUP})
    assert moved["scope"] == {"session": GROUP}
    assert tool(bot, "zcor_memory_read", {"id": ids["shared"]}, IN_PRIVATE)["error"] == "not_found"
    # bad input: a clear error naming the field, nothing changed
    for params, field in (({"id": p2, "scope": "nowhere"}, "scope"), ({"id": "m999", "scope": "everywhere"}, "id"),
                          ({"id": p2}, "scope"), ({"id": p2, "scope": {"session": ""}}, "scope")):
        with pytest.raises(Exception) as e:
            op.request("zcor/scope/set", params)
        assert field in str(e.value)
    # the journal replays the scopes; then the snapshot holds them
    d.stop()
    d.start()
    bot = d.client()
    assert tool(bot, "zcor_memory_read", {"id": p2}, IN_GROUP)["error"] == "not_found"
    assert tool(bot, "zcor_memory_read", {"id": ids["shared"]}, IN_PRIVATE)["error"] == "not_found"
    d.client(role="operator").request("zcor/snapshot")
    assert b'"scopes"' in (d.memdir / "memory-state.json").read_bytes()
    d.kill()
    d.start()
    bot = d.client()
    assert tool(bot, "zcor_memory_read", {"id": ids["merged"]}, IN_GROUP)["error"] == "not_found"
    assert bot.call_tool("zcor_memory_read", {"id": ids["merged"]}, origin=IN_PRIVATE)["title"] == "Alice Zorblax care"


def test_private_scope_everywhere_is_the_old_behaviour(daemon):
    bot, op = daemon.client(), daemon.client(role="operator")
    ids = private_life(bot)
    op.config_set({"privateScope": "everywhere"})
    assert bot.call_tool("zcor_memory_read", {"id": ids["p2"]}, origin=IN_GROUP)["title"] == "Alice phone Plimbo"
    got = bot.recall(GROUP, [{"text": "Zorblax", "origin": "external", "senderKey": BOB}])
    assert ids["merged"] in got
    new = bot.call_tool("zcor_memory_write", {"title": "said in private, shared", "content": "x"},
                        origin=IN_PRIVATE)["id"]
    assert "scope" not in op.call_tool("zcor_memory_read", {"id": new})
    bot.call_tool("zcor_memory_write", {"id": ids["shared"], "title": "Alice likes tea", "content": "updated"},
                  origin=IN_PRIVATE)  # not refused either
    op.config_set({"privateScope": "session"})  # the scopes kept apply again
    assert tool(bot, "zcor_memory_read", {"id": ids["p2"]}, IN_GROUP)["error"] == "not_found"
    with pytest.raises(Exception, match="privateScope"):
        op.config_set({"privateScope": "sometimes"})


def test_recall_private_flag_is_checked(daemon):
    bot = daemon.client()
    with pytest.raises(Exception, match="private"):
        bot.request("zcor/recall", {"session": PRIVATE, "events": [], "private": "yes"})
    got = tool(bot, "zcor_memory_write", {"title": "t", "content": "c"},
               {"session": PRIVATE, "senders": [ALICE], "private": "yes"})
    assert got["error"] == "invalid_argument" and "private" in got["message"]


def test_merges_backups_subject_and_erasure_keep_the_scope(daemon):
    bot, op = daemon.client(), daemon.client(role="operator")
    ids = private_life(bot)
    # an operator's merge of a private memory keeps it private; two sessions' memories cannot merge
    op.call_tool("zcor_memory_important", {"id": ids["shared"], "important": True})
    merged = op.call_tool("zcor_memory_merge", {"ids": [ids["p2"], ids["shared"]], "title": "Alice, all",
                                                "content": "13800138000", "reason": "tidy"})["id"]
    read = op.call_tool("zcor_memory_read", {"id": merged})
    assert read["scope"] == {"session": PRIVATE} and read["important"] is True  # the mark moved with the merge
    assert tool(bot, "zcor_memory_read", {"id": merged}, IN_GROUP)["error"] == "not_found"
    assert "13800138000" not in bot.prefix() and "Alice, all" not in bot.prefix()  # never in the shared prefix
    tea = bot.call_tool("zcor_memory_write", {"title": "Group tea time", "content": "Fridays"}, origin=IN_GROUP)["id"]
    marked = bot.call_tool("zcor_memory_important", {"id": tea, "important": True}, origin=IN_GROUP)
    assert marked["importantIds"] == [tea]  # the private one marked too is not named to the group
    with pytest.raises(ToolError, match="unmark it first"):
        op.scope_set(tea, {"session": GROUP})
    other = bot.call_tool("zcor_memory_write", {"title": "Bob secret", "content": "x"},
                          origin={"session": "qq:friend:7", "senders": [BOB], "private": True})["id"]
    with pytest.raises(ToolError) as e:
        op.call_tool("zcor_memory_merge", {"ids": [merged, other], "title": "t", "content": "c", "reason": "r"})
    assert e.value.code == "conflict" and "different sessions" in e.value.message
    # a backup restored keeps them private
    backup = op.call_tool("zcor_memory_backup", {})["backupFile"]
    op.scope_set(merged, "everywhere")
    op.call_tool("zcor_memory_restore", {"backupFile": backup})
    assert op.call_tool("zcor_memory_read", {"id": merged})["scope"] == {"session": PRIVATE}
    assert tool(bot, "zcor_memory_read", {"id": merged}, IN_GROUP)["error"] == "not_found"
    # what the Memory holds about Alice names each memory's scope
    about = op.subject(sender=ALICE)
    scopes = {m["id"]: m.get("scope") for m in about["memories"]}
    assert scopes[ids["merged"]] == {"session": PRIVATE} and f"private to {PRIVATE}" in about["report"]
    # forgetting her removes the scopes of her memories from every file
    gone = {m["id"] for m in op.erase(sender=ALICE, preview=True)["memories"]}
    assert ids["merged"] in gone
    op.erase(sender=ALICE)
    op.request("zcor/snapshot")
    for path in [daemon.memdir / "memory-state.json", *(daemon.memdir / "backups").glob("*.json")]:
        doc = json.loads(path.read_bytes())
        assert not gone & set(doc.get("scopes", {})), path


def test_zcor_scope_shows_and_changes_a_scope(daemon):
    bot = daemon.client()
    ids = private_life(bot)
    out = daemon.zcor("scope", ids["p2"])
    assert out.returncode == 0 and f"private to session {PRIVATE}" in out.stdout
    out = daemon.zcor("scope", ids["p2"], "everywhere")
    assert out.returncode == 0 and "is now visible everywhere" in out.stdout and "zcor revert" in out.stdout
    assert "visible everywhere" in daemon.zcor("scope", ids["p2"]).stdout
    assert bot.call_tool("zcor_memory_read", {"id": ids["p2"]}, origin=IN_GROUP)["id"] == ids["p2"]
    out = daemon.zcor("scope", ids["p2"], "session", GROUP, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["scope"] == {"session": GROUP}
    bad = daemon.zcor("scope", ids["p2"], "session")
    assert bad.returncode == 2 and "session NAME" in bad.stderr
    missing = daemon.zcor("scope", "m999", "everywhere")
    assert missing.returncode != 0 and "m999" in missing.stderr


def test_a_private_memory_under_a_named_person_is_not_recalled_in_the_group(daemon):
    """Memories under a person a batch names are raised in recall; a private one among them
    must be left out (and recall must not fail on it) in every other session."""
    bot, op = daemon.client(), daemon.client(role="operator")
    node = op.call_tool("zcor_memory_write", {"title": "Alice", "content": "a friend from the hiking group"})["id"]
    op.call_tool("zcor_relationship_write", {"personId": ALICE, "name": "Alice", "relationship": "friend",
                                             "affinity": 10, "reason": "hikes with us", "memoryNodeId": node})
    shared = op.call_tool("zcor_memory_write", {"title": "Alice hiking boots", "content": "Alice bought boots",
                                                "parentId": node})["id"]
    bot.recall(PRIVATE, [{"text": "about Alice and Zorblax", "origin": "external", "senderKey": ALICE}],
               private=True)
    secret = bot.call_tool("zcor_memory_write", {"title": "Alice Zorblax boots", "content": "抑郁症秘密 Alice",
                                                 "parentId": node}, origin=IN_PRIVATE)["id"]
    group = bot.recall(GROUP, [{"text": "Alice boots Zorblax", "origin": "external", "senderKey": BOB}])
    assert shared in group and secret not in group
    clean(bot.context(GROUP))
    assert secret in bot.recall(PRIVATE, [{"text": "Alice boots Zorblax", "origin": "external", "senderKey": ALICE}],
                                private=True)
