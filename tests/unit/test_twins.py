"""The twin index (issue 38) follows every change of the Memory: its entries are exactly the
current memories as they are now, whatever changed them, and a check finds a rewording."""

from __future__ import annotations

import random

from zcord.retrieval.twins import Folding, jaccard

FACTS = ["小王在银行上班", "晓雯对芒果过敏", "团子在减肥", "老陈喜欢钓鱼", "阿杰十月结婚", "Sam hates mornings",
         "Mel ran a marathon", "糖糖怕打雷"]


def _in_step(svc) -> None:
    tw = svc.twins
    tw.ready()
    current = {i: n for i, n in svc.state.nodes.items() if n.superseded_by is None}
    assert set(tw.entries) == set(current)
    assert all(tw.indexed(i) is n for i, n in current.items())
    assert tw.posted() <= set(current)


def test_the_index_follows_every_kind_of_change(svc, t, fast_fsync):
    rng = random.Random(3)
    ids: list[str] = []
    for n in range(60):
        op = rng.random()
        live = [i for i in ids if i in svc.state.nodes and svc.state.nodes[i].superseded_by is None]
        if op < 0.5 or len(live) < 3:
            fact = rng.choice(FACTS)
            ids.append(t.write(title=f"{fact} {n}", content=f"{fact}，第{n}条。")["id"])
        elif op < 0.65:
            t.write(id=rng.choice(live), title=rng.choice(FACTS), content="改过了")
        elif op < 0.75:
            victim = rng.choice(live)
            if not svc.state.child_ids(victim) and not svc.state.replaced.get(victim):
                t.delete(id=victim)
        elif op < 0.85:
            a, b = rng.sample(live, 2)
            t.supersede(ids=[a], replacementId=b, reason="旧的")
        else:
            a, b = rng.sample(live, 2)
            t.merge(ids=[a, b], title="合并", content="合并的内容", reason="重复")
        if n % 7 == 0:
            _in_step(svc)
    _in_step(svc)
    backup = t.backup()["backupFile"]
    t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员。")
    t.restore(backupFile=backup)
    _in_step(svc)


def test_a_rewording_is_found_and_a_different_fact_is_not(svc, t, fast_fsync):
    bank = t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员，每天早上八点半到岗。")["id"]
    for fact in FACTS[1:]:
        t.write(title=fact, content=f"{fact}，记下来了。")
    tw = svc.twins
    reworded = tw.folding.features("小王是银行柜员", "小王在工商银行做柜员，早上八点半就要到岗上班。")
    found = tw.similar(reworded)
    assert [x.id for x in found] == [bank]
    assert found[0].score == round(jaccard(reworded, tw.features_of(svc.state.nodes[bank])), 3)
    other = tw.folding.features("小王在超市上班", "小王在家乐福超市上班，做理货员，每天早上七点到岗。")
    assert tw.similar(other) == []
    # new synonym groups: the index is rebuilt with them
    svc.call("zcor_synonyms_add", {"terms": ["柜员", "出纳"]})
    again = tw.folding.features("小王是银行出纳", "小王在工商银行做出纳，早上八点半就要到岗上班。")
    assert [x.id for x in tw.similar(again)] == [bank]


def test_features_fold_case_width_script_stems_and_synonyms(svc):
    f: Folding = svc.twins.folding
    assert f.features("晓雯喜欢猫", "她最喜欢猫") == f.features("曉雯喜歡貓", "她最喜歡貓")
    assert f.features("SAM'S DOGS", "Ｓａｍ walked the dogs") == f.features("sam's dog", "Sam walks the dog")
    # 猫 and cat are one synonym class in the default table
    assert jaccard(f.features("猫", "猫"), f.features("cat", "cat")) == 1.0
    assert f.features("", "") == frozenset()


def test_a_create_taken_back_leaves_no_entry(svc, t, monkeypatch, fast_fsync):
    """The log could not be written: the create is undone in memory, and its change id is given
    to the next change; the index forgets the memory all the same."""
    other = t.write(title="天气", content="晴")["id"]
    real = svc.oplog.append

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(svc.oplog, "append", full)
    try:
        t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员，每天早上八点半到岗。")
    except Exception:
        pass
    monkeypatch.setattr(svc.oplog, "append", real)
    assert len(svc.state.nodes) == 1
    t.write(id=other, title="天气", content="下雨")  # takes the undone change's id
    _in_step(svc)
    probe = svc.twins.folding.features("小王是银行柜员", "小王在工商银行做柜员，早上八点半就要到岗上班。")
    assert svc.twins.similar(probe) == []
    assert "similar" not in t.write(title="小王是银行柜员", content="小王在工商银行做柜员，早上八点半就要到岗上班。")


def test_merged_and_compacted_postings_still_find_twins(svc, t, monkeypatch, fast_fsync):
    """Postings merged from the dict into the sorted array, and the arrays rebuilt without the
    slots of updated and deleted memories: the index stays exactly the current memories, and a
    rewording of an old memory and of a rewritten one is found by the id it has now."""
    import zcord.retrieval.twins as twins_mod

    monkeypatch.setattr(twins_mod, "MERGE_FROM", 16)
    monkeypatch.setattr(twins_mod, "COMPACT_FROM", 4)
    tw = svc.twins
    bank = t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员，每天早上八点半到岗。")["id"]
    ids = [t.write(title=f"{f} {n}", content=f"{f}，第{n}条。")["id"] for n in range(30) for f in FACTS[1:3]]
    assert len(tw._post) > 0  # merged at least once
    for i in ids[:20]:
        t.delete(id=i)
    rewritten = ids[25]
    t.write(id=rewritten, title="阿杰十月结婚", content="阿杰十月在杭州结婚，请了我们去喝喜酒。")
    _in_step(svc)
    assert tw._dead < 4 + len(tw.entries) // 4  # compacted on the way
    probe = tw.folding.features("小王是银行柜员", "小王在工商银行做柜员，早上八点半就要到岗上班。")
    assert [x.id for x in tw.similar(probe)] == [bank]
    probe = tw.folding.features("阿杰十月要结婚", "阿杰十月在杭州结婚，请我们去喝喜酒。")
    assert [x.id for x in tw.similar(probe)] == [rewritten]


def test_a_check_that_fails_leaves_the_create_standing(svc, t, monkeypatch, fast_fsync):
    """The check is advice: when it fails the memory is created, durable, without `similar`."""
    t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员，每天早上八点半到岗。")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(svc.twins, "similar", broken)
    r = t.write(title="小王是银行柜员", content="小王在工商银行做柜员，早上八点半就要到岗上班。")
    assert r["created"] and "similar" not in r and r["id"] in svc.state.nodes
    assert svc.oplog.last_change_id == svc.state.next_change_id() - 1


def test_the_check_runs_beside_the_fsync_and_a_failed_fsync_undoes_the_create(svc, t, monkeypatch):
    """A create's check runs on another thread while the log record is fsynced (the call's
    thread waits in fsync meanwhile); when that fsync fails the create is undone all the same
    and the next check does not name it."""
    import os
    import threading

    bank = t.write(title="小王在银行上班", content="小王在工商银行上班，做柜员，每天早上八点半到岗。")["id"]
    seen: list[str] = []
    real_similar = svc.twins.similar

    def similar(*args, **kwargs):
        seen.append(threading.current_thread().name)
        return real_similar(*args, **kwargs)

    monkeypatch.setattr(svc.twins, "similar", similar)
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    r = t.write(title="小王是银行柜员", content="小王在工商银行做柜员，早上八点半就要到岗上班。")
    assert [s["id"] for s in r["similar"]] == [bank]
    assert seen == ["zcord-beside"]

    def failing(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    count = len(svc.state.nodes)
    try:
        t.write(title="小王在银行做柜员", content="小王在工商银行做柜员，每天早上八点半到岗。")
    except Exception as e:
        assert getattr(e, "code", None) == "storage_error"
    else:
        raise AssertionError("the create stood though its record could not be fsynced")
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    assert len(svc.state.nodes) == count
    _in_step(svc)
    probe = svc.twins.folding.features("小王在银行做柜员", "小王在工商银行做柜员，每天早上八点半到岗。")
    assert {x.id for x in real_similar(probe, limit=10)} == {bank, r["id"]}
