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
    assert all(tw.entries[i][0] is n for i, n in current.items())
    posted = {i for v in tw.buckets.values() for i in ((v,) if isinstance(v, str) else v)}
    assert posted <= set(current)


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
