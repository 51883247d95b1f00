"""Held changes read as if not made (issue 33): with held supersedes, merges, deletes,
rewrites and new memories in one Memory, recall, search candidates and the model's query
answer exactly what a twin Memory without those changes answers (same ids, same order:
the approved versions are ranked with the same statistics), in both ranking modes.
"""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from zcord.service import Service

TOPICS = ["hiking boots", "coffee shop", "orange cat", "phone numbers", "birthday party", "香山爬山", "火锅店",
          "登山鞋", "weekend trip", "guitar lessons", "花园里的猫", "bank card"]
TEXTS = ["where are the hiking boots", "coffee or tea at the shop", "the orange cat again", "phone numbers rule",
         "周末去香山爬山", "火锅店在哪", "登山鞋防水吗", "birthday party weekend trip", "猫", "bank card phone"]
TROLL = {"session": "s", "senders": ["qq:troll"]}


def build(svc: Service) -> list[str]:
    ids = []
    for n in range(40):
        topic = TOPICS[n % len(TOPICS)]
        parent = ids[n - 5] if n >= 20 and n % 3 == 0 else None
        args = {"title": f"{topic} {n}", "content": f"notes on {topic} number {n}"}
        if parent:
            args["parentId"] = parent
        ids.append(svc.call("zcor_memory_write", args)["id"])
    svc.update_config({"relationshipMemory": True})
    svc.call("zcor_relationship_write", {"personId": "qq:alice", "name": "Alice", "relationship": "friend",
                                         "affinity": 10, "reason": "hikes", "memoryNodeId": ids[16]})
    return ids


def model(svc: Service, tool: str, args: dict) -> dict:
    return svc.call(tool, args, actor="model", claim=TROLL)


@pytest.mark.parametrize("ranking", ["seed", "weighted"])
def test_held_changes_leave_recall_search_and_query_as_the_twin_without_them(tmp_path, ranking):
    held = Service(tmp_path / "held", clock=FakeClock()).open()
    twin = Service(tmp_path / "twin", clock=FakeClock()).open()
    try:
        for svc in (held, twin):
            svc.update_config({"recallRanking": ranking})
        ids = build(held)
        assert build(twin) == ids
        held.trust_set({"sender": "qq:troll", "level": "untrusted"})
        outs = [model(held, "zcor_memory_supersede", {"ids": [ids[0], ids[12]], "replacementId": ids[3],
                                                      "reason": "x"}),
                model(held, "zcor_memory_merge", {"ids": [ids[16], ids[19]], "title": "phone numbers bank card",
                                                  "content": "send them", "reason": "tidy"}),
                model(held, "zcor_memory_delete", {"id": ids[39]}),
                model(held, "zcor_memory_write", {"id": ids[1], "title": "hiking cat coffee", "content": "troll"}),
                model(held, "zcor_memory_write", {"title": "orange cat coffee shop 火锅店", "content": "troll"})]
        assert all(o.get("review") == "pending" for o in outs)
        assert outs[1]["movedChildren"] and outs[1]["relinkedRelationships"] == ["qq:alice"]
        for n, text in enumerate(TEXTS):
            batch = [{"text": text, "origin": "external", "senderKey": "qq:alice"}]
            assert held.recall(f"s{n}", batch) == twin.recall(f"s{n}", batch), text
            assert held.context(f"s{n}") == twin.context(f"s{n}"), text
            # search candidates (no LLM here: the candidates it would be given)
            for svc in (held, twin):
                svc.retriever.teach_jieba()
            terms = text.split()
            got = [h.id for h in held.retriever.visible_hits(terms, False, 20, ranking, floor=False)]
            want = [h.id for h in twin.retriever.visible_hits(terms, False, 20, ranking, floor=False)]
            assert got == want, text
        for word in ["cat", "troll", "phone", "火锅店", "notes on hiking"]:
            q = {"keywords": [word], "limit": 50}
            assert held.call("zcor_memory_query", q, actor="model")["items"] == \
                twin.call("zcor_memory_query", q, actor="model")["items"], word
    finally:
        held.close()
        twin.close()
