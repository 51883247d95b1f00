"""Undo (issue 12): revert any logged operation, every version of a memory, the Memory at
any instant. A revert is an operation of its own, journaled and revertible."""

from __future__ import annotations

import json
import random
from datetime import timedelta

import pytest

import zcord.core.store as store_mod
from tests import operator_rooms as rooms
from zcord.core.errors import Conflict, InvalidArgument, NotFound
from zcord.service import Service, undo


def fingerprint(svc) -> str:
    """Everything the tools can see: nodes in order, important list, relationships."""
    st = svc.state
    return json.dumps({"nodes": [n.dump() for n in st.nodes.values()], "important": st.important,
                       "relationships": [r.dump() for r in st.relationships.values()],
                       "children": {str(k): v for k, v in st.children.items() if v}}, ensure_ascii=False, sort_keys=True)


def last_seq(svc) -> int:
    return svc.seq


def revert(svc, seq, force=False):
    return rooms.revert(svc, {"seq": seq, "force": force})


def seed(t):
    t.write(title="家人", content="根")
    t.write(title="妈妈", content="喜欢花", parentId="m1")
    t.write(title="爸爸", content="喜欢钓鱼", parentId="m1")
    t.write(title="妈妈的花园", content="种了月季", parentId="m2")
    t.important(id="m2", important=True)
    t.relationship_write(personId="qq:1", name="妈妈", relationship="母亲", affinity=90, reason="家人", memoryNodeId="m2")


OPS = {
    "create": lambda t: t.write(title="新的", content="x", parentId="m1"),
    "update": lambda t: t.write(id="m3", title="爸爸改", content="喜欢下棋"),
    "move": lambda t: t.write(id="m4", title="妈妈的花园", content="种了月季", parentId="m3"),
    "delete": lambda t: t.delete(id="m3"),
    "delete important": lambda t: t.delete(id="m3"),
    "merge": lambda t: t.merge(ids=["m2", "m3"], title="父母", content="合并", reason="一起"),
    "supersede": lambda t: t.supersede(ids=["m2"], replacementId="m3", reason="过时"),
    "important": lambda t: t.important(id="m3", important=True),
    "unimportant": lambda t: t.important(id="m2", important=False),
    "relationship create": lambda t: t.relationship_write(personId="qq:2", name="爸爸", relationship="父亲",
                                                          affinity=80, reason="家人"),
    "relationship update": lambda t: t.relationship_write(personId="qq:1", name="妈", relationship="母亲",
                                                          affinity=50, reason="吵架", memoryNodeId=None),
    "relationship delete": lambda t: t.relationship_delete(personId="qq:1"),
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_revert_restores_exactly_and_can_itself_be_reverted(svc, t, op):
    seed(t)
    if op == "delete important":
        t.important(id="m3", important=True)
    before = fingerprint(svc)
    OPS[op](t)
    after = fingerprint(svc)
    assert after != before
    res = revert(svc, last_seq(svc))
    assert fingerprint(svc) == before
    assert res["reverted"] == res["seq"] - 1 and res["seq"] == last_seq(svc)
    hist = t.history(limit=1)["items"][0]
    assert hist["tool"] == undo.REVERT and hist["actor"] == "operator"
    assert all(c["receipt"] == {"revertOf": res["reverted"]} for c in hist["changes"])
    # the revert is an operation too: reverting it redoes the change
    revert(svc, res["seq"])
    assert fingerprint(svc) == after
    # and all of it survives a restart (journal replay, ids never reused)
    svc.close()
    with Service(svc.dir, clock=svc.clock) as again:
        assert fingerprint(again) == after
        new = again.call("zcor_memory_write", {"title": "later", "content": ""})["id"]
        assert int(new[1:]) > max(int(i[1:]) for i in svc.state.nodes)


def test_revert_of_a_restore(svc, t):
    seed(t)
    name = t.backup()["backupFile"]
    t.write(title="备份后", content="x")
    before = fingerprint(svc)
    t.restore(backupFile=name)
    assert fingerprint(svc) != before
    res = revert(svc, last_seq(svc))
    assert fingerprint(svc) == before
    assert [c["kind"] for c in res["changes"]] == ["state.restore"]
    # written to the snapshot at once: a restore cannot be replayed from its record
    assert "备份后" in (svc.dir / "memory-state.json").read_text()


def test_a_later_change_is_a_conflict_naming_fields_unless_forced(svc, t):
    seed(t)
    t.write(id="m3", title="爸爸改", content="喜欢下棋")
    first = last_seq(svc)
    t.write(id="m3", title="爸爸改", content="喜欢打球")
    state = fingerprint(svc)
    with pytest.raises(Conflict) as ei:
        revert(svc, first)
    assert "m3: it changed since (content, updatedAt)" in ei.value.message
    assert ei.value.data["conflicts"][0]["fields"] == ["content", "updatedAt"]
    assert fingerprint(svc) == state, "a refused revert changes nothing"
    assert t.history(limit=1)["items"][0]["status"] == "error"
    res = revert(svc, first, force=True)
    assert res["forced"] is True
    assert svc.state.nodes["m3"].title == "爸爸" and svc.state.nodes["m3"].content == "喜欢钓鱼"


def test_reverting_a_create_that_has_children_now_is_refused_even_with_force(svc, t):
    seed(t)
    t.write(title="新", content="x")
    seq = last_seq(svc)
    t.write(title="孩子", content="y", parentId="m5")
    with pytest.raises(Conflict, match="orphan children m6") as ei:
        revert(svc, seq, force=True)
    assert "Pass force" not in ei.value.message


@pytest.mark.parametrize("params,field", [({"seq": 0}, "seq"), ({"seq": "1"}, "seq"), ({"seq": 1, "x": 1}, "x"),
                                          ({"seq": 1, "force": "yes"}, "force")])
def test_bad_revert_params_name_the_field(svc, t, params, field):
    seed(t)
    with pytest.raises(InvalidArgument) as ei:
        rooms.revert(svc, params)
    assert ei.value.field == field


def test_revert_of_a_read_or_unknown_seq(svc, t):
    seed(t)
    t.read(id="m1")
    with pytest.raises(InvalidArgument, match="changed nothing"):
        revert(svc, last_seq(svc))
    with pytest.raises(NotFound):
        revert(svc, 10_000)


def test_random_sequences_reverted_in_reverse_return_to_each_earlier_state(memdir, clock):
    """Property: after random operations, reverting the last k in reverse order gives the
    state of k operations ago, for every k."""
    for trial in range(4):
        rng = random.Random(trial)
        with Service(memdir / str(trial), clock=clock) as svc:
            t = _caller(svc)
            seed(t)
            states, seqs = [fingerprint(svc)], []
            for _ in range(18):
                _random_op(rng, svc, t)
                if fingerprint(svc) != states[-1]:
                    states.append(fingerprint(svc))
                    seqs.append(last_seq(svc))
            for k in range(1, len(seqs) + 1):
                revert(svc, seqs[-k])
                assert fingerprint(svc) == states[-1 - k], f"trial {trial}: after reverting {k} operations"


def _caller(svc):
    from tests.conftest import Caller
    return Caller(svc)


def _random_op(rng, svc, t) -> None:
    st = svc.state
    current = [i for i, n in st.nodes.items() if n.superseded_by is None]
    leaves = [i for i in current if not st.child_ids(i) and not st.links.get(i) and not st.replaced.get(i)]
    roll = rng.random()
    try:
        if roll < 0.25 or len(current) < 3:
            t.write(title=f"记{rng.randint(0, 999)}", content="c", parentId=rng.choice(current + [None]))
        elif roll < 0.45:
            i = rng.choice(current)
            t.write(id=i, title=st.nodes[i].title + "改", content=f"v{rng.randint(0, 99)}")
        elif roll < 0.55 and leaves:
            t.delete(id=rng.choice(leaves))
        elif roll < 0.65:
            t.merge(ids=rng.sample(current, 2), title="合", content="m", reason="r")
        elif roll < 0.72:
            a, b = rng.sample(current, 2)
            t.supersede(ids=[a], replacementId=b, reason="r")
        elif roll < 0.85:
            t.important(id=rng.choice(current), important=rng.random() < 0.7)
        elif roll < 0.95:
            t.relationship_write(personId=f"qq:{rng.randint(1, 3)}", name="人", relationship="友",
                                 affinity=rng.randint(-100, 100), reason="r",
                                 memoryNodeId=rng.choice(current + [None]))
        elif st.relationships:
            t.relationship_delete(personId=rng.choice(sorted(st.relationships)))
    except Exception as e:  # a refused call (e.g. a cycle) changes nothing
        assert getattr(e, "code", None) in ("conflict", "superseded", "invalid_argument", "not_found"), e


def test_versions_across_sealed_segments_and_reinstate(monkeypatch, svc, t):
    monkeypatch.setattr(store_mod, "SEAL_BYTES", 1500)
    t.write(title="猫", content="v0")
    for i in range(1, 8):
        t.write(id="m1", title="猫", content=f"v{i}" + "长" * 300)
        t.write(title=f"别的{i}", content="x" * 300)
        svc.snapshot()  # sealing happens at snapshots
    assert svc.state.history_segments, "some history is sealed"
    res = undo.versions(svc, "m1")
    contents = [v["record"]["content"][:2] for v in res["items"]]
    assert contents == [f"v{i}" for i in range(8)]
    assert [v["kind"] for v in res["items"]] == ["node.create"] + ["node.update"] * 7
    assert all(v["actor"] == "operator" and v["seq"] for v in res["items"])
    # make version 2 current again: one new change
    v2 = res["items"][2]
    out = rooms.reinstate(svc, {"id": "m1", "changeId": v2["changeId"]})
    assert svc.state.nodes["m1"].content.startswith("v2") and out["changes"] == [{"kind": "node.update",
                                                                                 "target": "m1"}]
    assert len(undo.versions(svc, "m1")["items"]) == 9
    with pytest.raises(NotFound):
        undo.versions(svc, "m999")


def test_state_at_an_instant(svc, t, clock):
    seed(t)
    mid = clock() + timedelta(microseconds=500)
    t.write(id="m3", title="爸爸改", content="新")
    t.delete(id="m4")
    t.important(id="m3", important=True)
    t.relationship_delete(personId="qq:1")
    then = undo.state_at(svc, mid)
    assert then["undoneChanges"] == 4
    nodes = {n["id"]: n for n in then["nodes"]}
    assert nodes["m3"]["title"] == "爸爸" and "m4" in nodes
    assert then["important"] == ["m2"]
    assert [r["personId"] for r in then["relationships"]] == ["qq:1"]
    assert svc.state.nodes["m3"].title == "爸爸改", "read-only: today's Memory is untouched"


def test_preview_shows_exactly_what_a_revert_would_do_and_changes_nothing(svc, t):
    seed(t)
    t.merge(ids=["m2", "m3"], title="父母", content="合并", reason="一起")
    seq = last_seq(svc)
    state, log = fingerprint(svc), (svc.dir / "operations.jsonl").read_bytes()
    preview = rooms.revert(svc, {"seq": seq, "preview": True})
    assert fingerprint(svc) == state and (svc.dir / "operations.jsonl").read_bytes() == log
    assert preview["ok"] is True
    done = revert(svc, seq)
    assert [(c["kind"], c["target"]) for c in preview["changes"]] == [(c["kind"], c["target"]) for c in done["changes"]]
    deleted = [c for c in preview["changes"] if c["kind"] == "node.delete"]
    assert deleted[0]["before"]["title"] == "父母"
    t.write(id="m3", title="再改", content="x")
    refused = rooms.revert(svc, {"seq": done["seq"], "preview": True})
    assert refused["ok"] is False and "m3: it changed since" in refused["message"]
