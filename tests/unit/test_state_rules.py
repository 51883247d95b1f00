"""zcord.state's own rules, found untested by mutation testing (docs/testing.md): creation
order after a refused delete, the query text's refusals and its build in steps, phrases of
title words, and the bound of the id-set cache."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from zcord.core import indexes as indexes_mod
from zcord.core.errors import StorageError
from zcord.core.models import Node, Relationship
from zcord.core.state import MemoryState, Tx
from zcord.core.text import normalize, term_key

T0 = datetime(2026, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=8)))


def node(i: int, title: str, content: str = "c", keywords=(), parent=None) -> Node:
    return Node(id=f"m{i}", title=title, content=content, keywords=list(keywords), parent_id=parent,
                created_at=T0, updated_at=T0)


def test_refused_delete_keeps_creation_order_in_the_next_snapshot(svc, t, failing_disk):
    """A delete the disk refuses is undone in memory; the node goes back in creation order
    (m2 before m10, not in text order), so the next snapshot lists the nodes as before."""
    for i in range(12):
        t.write(title=f"n{i + 1}", content="c")
    failing_disk.on()
    with pytest.raises(StorageError):
        t.delete(id="m2")
    failing_disk.off()
    svc.snapshot()
    nodes = json.loads((svc.dir / "memory-state.json").read_bytes())["nodes"]
    assert [n["id"] for n in nodes] == [f"m{i}" for i in range(1, 13)]


@pytest.mark.parametrize("keyword", ["", "a\x00b", "a\x01b", "\x00", "\x01"])
def test_text_search_refuses_its_own_separators(keyword):
    st = MemoryState([node(1, "a"), node(2, "b", content="ab")])
    assert st.text_matches(keyword) is None


def test_text_search_finds_each_node_once(monkeypatch):
    monkeypatch.setattr(indexes_mod, "TEXT_CHUNK", 2)
    st = MemoryState([node(1, "奶茶", content="奶茶 奶茶"), node(2, "tea"), node(3, "x", content="喝奶茶"),
                      node(4, "y")])
    assert st.text_matches("奶茶") == ["m1", "m3"]
    assert st.text_matches("TEA".casefold()) == ["m2"]
    assert st.text_matches("none") == []


def test_text_pieces_built_one_step_at_a_time(monkeypatch):
    monkeypatch.setattr(indexes_mod, "TEXT_CHUNK", 2)
    st = MemoryState([node(i, f"t{i}", content=f"c{i}") for i in range(1, 6)])  # ranks 2..10: 4 pieces
    filled = []
    for _ in range(20):
        if (wanted := st.text_piece_wanted()) is None:
            break
        filled.append(sum(c.blob is not None for c in st._text.values()))  # the pieces are laid out first
        assert st.text_piece_made(*wanted, indexes_mod.build_text_piece(st.nodes, wanted[1]))
    filled.append(sum(c.blob is not None for c in st._text.values()))
    assert len(st._text) == 5  # ranks 2, 4, ..., 10 in pieces of two ranks
    assert filled == [0, 1, 2, 3, 4, 5]  # the pieces first, then one filled per step
    assert st.text_piece_wanted() is None
    assert st.text_matches("c3") == ["m3"] and st.text_matches("t5") == ["m5"]


def _build_outside(st: MemoryState) -> int:
    """The daemon's background build of the query text (Service.warm): pieces built outside
    the lock, kept under it; returns how many were kept."""
    kept = 0
    while (wanted := st.text_piece_wanted()) is not None:
        kept += st.text_piece_made(*wanted, indexes_mod.build_text_piece(st.nodes, wanted[1]))
    return kept


def test_text_pieces_built_outside_the_lock_match_a_query_built_text(monkeypatch):
    monkeypatch.setattr(indexes_mod, "TEXT_CHUNK", 2)
    nodes = [node(i, f"T{i} 喜歡", content=f"c{i} 後來") for i in range(1, 8)]
    st, fresh = MemoryState(nodes), MemoryState(nodes)
    assert _build_outside(st) == len(st._text) == 7  # ranks 2, 4, ..., 14: one node a piece
    for word in ("c3", "t7", "喜欢", "后来", "c1 后来"):
        assert st.text_matches(word) == fresh.text_matches(word) != []


@pytest.mark.parametrize("change", ["update", "delete", "add", "restore"])
def test_a_piece_changed_while_it_was_built_is_not_kept(monkeypatch, change):
    """A write that lands between text_piece_wanted and text_piece_made (the lock is free
    meanwhile) to a node of the piece makes the piece built from the old nodes stale: it is
    not kept, the next round builds it again, and queries see the write."""
    monkeypatch.setattr(indexes_mod, "TEXT_CHUNK", 4)
    st = MemoryState([node(i, f"t{i}", content=f"old{i}") for i in range(1, 4)])  # ranks 2, 4, 6: pieces 0, 1
    wanted = st.text_piece_wanted()
    assert wanted[1] == ("m1",)
    made = indexes_mod.build_text_piece(st.nodes, wanted[1])
    tx = Tx(st, "operator", "zcor_memory_write", 1, T0)
    if change == "update":
        tx.put_node(node(1, "t1", content="new1"))
    elif change == "delete":
        tx.remove_node("m1")
    elif change == "add":
        tx.add_node(node(9, "t9", content="new9"))
    else:
        tx.replace_all(MemoryState([node(1, "t1", content="new1")]))
    tx.commit_changes()
    # a node added lands in another piece (rank 8): the one built is still right, and kept
    assert st.text_piece_made(*wanted, made) is (change == "add")
    _build_outside(st)
    assert st.text_matches("old1") == ([] if change in ("update", "delete", "restore") else ["m1"])
    if change != "delete":
        assert st.text_matches("new") == (["m9"] if change == "add" else ["m1"])


def test_title_phrase_of_words_matches_them_in_a_row_only():
    st = MemoryState([node(1, "Running shoes"), node(2, "shoes for running"), node(3, "running fast shoes"),
                      node(4, "New running shoes today"), node(5, "running")])
    st.ensure_index()
    assert sorted(st.title_hits(term_key("running shoes"))) == ["m1", "m4"]
    assert sorted(st.title_hits(term_key("shoes"))) == ["m1", "m2", "m3", "m4"]
    assert st.title_hits(term_key("running shoes today")) == {"m4"}
    assert st.title_hits(term_key("shoes running")) == set()


def test_id_set_cache_keeps_up_to_its_bound(monkeypatch):
    """Terms held by many nodes answer an id set built once and cached, up to SET_CACHE ids
    per table; a write to a term drops its set (and its count), so the bound holds."""
    monkeypatch.setattr(indexes_mod, "BIG_POSTING", 2)
    monkeypatch.setattr(indexes_mod, "SET_CACHE", 8)
    st = MemoryState([node(i, f"{w} {i}") for i, w in enumerate(["alpha"] * 4 + ["beta"] * 4, start=1)])
    st.ensure_index()
    words = st.title_words
    a = words.get("alpha")
    b = words.get("beta")
    assert a == {"m1", "m2", "m3", "m4"} and b == {"m5", "m6", "m7", "m8"}
    assert words.get("alpha") is a and words.get("beta") is b  # 8 ids: both kept
    st._put_node(node(9, "alpha 9"))  # alpha changes: its cached set is dropped
    a2 = words.get("alpha")
    assert a2 == a | {"m9"}
    assert words.get("beta") is not b  # 5 + 4 ids > 8: the older set was evicted
    st2 = MemoryState([node(i, f"{w} {i}") for i, w in enumerate(["alpha"] * 4 + ["beta"] * 4, start=1)])
    st2.ensure_index()
    w2 = st2.title_words
    a = w2.get("alpha")
    st2._remove_node("m1")  # alpha's set dropped, and its 4 ids no longer counted
    b = w2.get("beta")
    a = w2.get("alpha")
    assert w2.get("beta") is b and w2.get("alpha") is a  # 4 + 3 ids: both kept



# -- undo of a transaction: memory exactly as before ---------------------------------------


def rel(pid: str, at: datetime, aliases=(), node_id=None) -> Relationship:
    return Relationship(person_id=pid, name=pid, aliases=list(aliases), relationship="friend", affinity=0,
                        reason="r", memory_node_id=node_id, created_at=at, updated_at=at)


def everything(st: MemoryState) -> dict:
    """Every table of the state, in order, in plain values."""
    st.ensure_index()
    out = {name: {k: set(getattr(st, name).get(k)) for k in getattr(st, name)}
           for name in ("title_grams", "title_words", "keyword_ids", "title_keys")}
    out.update(nodes=list(st.nodes.items()), rank=dict(st.rank), children=st.children, replaced=st.replaced,
               links=st.links, important=st.important, next_id=st.next_id,
               rels=list(st.relationships.items()),
               by_rel_rank=sorted(st.rel_index, key=lambda p: st.rel_index[p].rank),
               aliases=st.alias_ids, count=st.current_count)
    return json.loads(json.dumps(out, default=lambda x: sorted(x) if isinstance(x, (set, frozenset)) else repr(x)))


def people() -> MemoryState:
    st = MemoryState([node(1, "one"), node(2, "two")],
                     relationships=[rel("qq:1", T0, ["小明", "明明"], "m1"),
                                    rel("qq:2", T0 + timedelta(hours=1), ["明明"], "m1"),
                                    rel("qq:3", T0 + timedelta(hours=2), ["阿三"], "m2")])
    return st


def test_undone_relationship_delete_comes_back_in_its_place():
    st = people()
    before = everything(st)
    tx = Tx(st, "operator", "zcor_relationship_delete", 1, T0)
    tx.remove_rel("qq:2")
    assert list(st.relationships) == ["qq:1", "qq:3"] and st.alias_ids[normalize("明明")] == {"qq:1"}
    tx.remove_rel("qq:1")
    assert "明明" not in st.alias_ids and "m1" not in st.links
    tx.rollback()
    assert everything(st) == before


def test_reverted_relationship_delete_goes_back_in_creation_order():
    st = people()
    before = everything(st)
    gone = st.relationships["qq:2"]
    st._remove_rel("qq:2")
    tx = Tx(st, "operator", "zcor/history/revert", 1, T0)
    tx.add_rel(gone)
    assert everything(st) == before
    ranks = [st.rel_index[p].rank for p in st.relationships]
    assert ranks == sorted(ranks) and len(set(ranks)) == 3
    tx.rollback()
    assert list(st.relationships) == ["qq:1", "qq:3"] and st.alias_ids[normalize("明明")] == {"qq:1"}


def test_reverted_relationship_delete_among_equal_creation_times():
    """A relationship created in the same instant as an older one goes back after it."""
    st = MemoryState(relationships=[rel("qq:1", T0), rel("qq:2", T0), rel("qq:3", T0 + timedelta(hours=1))])
    gone = st.relationships["qq:2"]
    st._remove_rel("qq:2")
    st.add_rel(gone)
    assert list(st.relationships) == ["qq:1", "qq:2", "qq:3"]
    ranks = [st.rel_index[p].rank for p in st.relationships]
    assert ranks == sorted(ranks) and len(set(ranks)) == 3
    st._put_rel(rel("qq:4", T0 + timedelta(hours=2)))
    assert list(st.relationships)[-1] == "qq:4"


def test_undone_revert_of_a_node_delete_removes_it_again():
    st = MemoryState([node(i, f"t{i}") for i in range(1, 5)])
    gone = st.nodes["m2"]
    st._remove_node("m2")
    before = everything(st)
    tx = Tx(st, "operator", "zcor/history/revert", 1, T0)
    tx.add_node(gone)
    assert list(st.nodes) == ["m1", "m2", "m3", "m4"]
    tx.rollback()
    assert everything(st) == before


def test_undone_restore_puts_every_table_back():
    st = people()
    st.text_matches("one")
    before = everything(st)
    other = MemoryState([node(1, "其它"), node(7, "seven")], relationships=[rel("qq:9", T0, ["九"])], next_id=8)
    tx = Tx(st, "operator", "zcor_memory_restore", 1, T0)
    tx.replace_all(other)
    assert list(st.nodes) == ["m1", "m7"] and st.text_matches("seven") == ["m7"]
    tx.rollback()
    assert everything(st) == before
    assert st.text_matches("seven") == [] and st.text_matches("one") == ["m1"]


def test_refused_create_leaves_no_node_behind(svc, t, failing_disk):
    t.write(title="first", content="c")
    failing_disk.on()
    with pytest.raises(StorageError):
        t.write(title="FAILED", content="c")
    failing_disk.off()
    assert [c["id"] for c in t.children()["items"]] == ["m1"]
    assert t.query(keywords=["FAILED"])["items"] == []


def test_index_built_in_steps_and_then_done():
    st = MemoryState([node(i, f"t{i}") for i in range(1, 6)])
    assert not st.indexed
    assert [st.index_step(2), st.index_step(2)] == [True, True]
    assert not st.indexed and len(st.index) == 4
    assert st.index_step(2) is False and st.indexed and len(st.index) == 5
    assert st.index_step(2) is False
    st.ensure_index()
    assert st.title_hits("t3") == {"m3"}


def test_reverted_deletes_go_back_between_their_neighbours():
    st = MemoryState([node(i, f"t{i}") for i in range(1, 7)])
    gone = {i: st.nodes[i] for i in ("m3", "m4")}
    st._remove_node("m3")
    st._remove_node("m4")
    st.add_node(gone["m4"])
    st.add_node(gone["m3"])
    assert list(st.nodes) == [f"m{i}" for i in range(1, 7)]
    assert [st.rank[f"m{i}"] for i in range(1, 7)] == [2, 4, 6, 8, 10, 12]  # where they were
    st.add_node(node(7, "new"))
    assert list(st.nodes)[-1] == "m7"


@pytest.mark.parametrize("seed", range(3))
def test_reverted_deletes_in_any_order_keep_creation_order(seed):
    import random

    rng = random.Random(seed)
    st = MemoryState([node(i, f"t{i}") for i in range(1, 21)])
    gone = rng.sample(sorted(st.nodes), 8)
    kept = {i: st.nodes[i] for i in gone}
    for i in gone:
        st._remove_node(i)
    rng.shuffle(gone)
    for i in gone:
        st.add_node(kept[i])
        assert list(st.nodes) == sorted(st.nodes, key=lambda x: int(x[1:]))
    ranks = [st.rank[i] for i in st.nodes]
    assert ranks == sorted(ranks) and len(set(ranks)) == 20


def test_reverted_delete_with_no_free_rank_left_goes_last():
    st = MemoryState([node(1, "a"), node(4, "d")])  # ranks 2 and 4: one free rank between
    st.add_node(node(2, "b"))
    assert list(st.nodes) == ["m1", "m2", "m4"]
    st.add_node(node(3, "c"))
    assert list(st.nodes) == ["m1", "m2", "m4", "m3"]
    assert st.child_ids(None) == ["m1", "m2", "m4", "m3"]


def test_text_search_maps_matches_of_many_short_nodes_to_their_own_ids():
    st = MemoryState([node(i, f"n{i}", content="") for i in range(1, 31)])
    assert st.text_matches("n7") == ["m7"]
    assert st.text_matches("n30") == ["m30"]
    assert st.text_matches("n2") == ["m2", "m20", "m21", "m22", "m23", "m24", "m25", "m26", "m27", "m28", "m29"]


def test_reverted_delete_of_the_first_node_goes_first():
    st = MemoryState([node(2, "b"), node(3, "c")])  # m1 was deleted before the file was written
    st.add_node(node(1, "a"))
    assert list(st.nodes) == ["m1", "m2", "m3"]
    assert st.child_ids(None) == ["m1", "m2", "m3"]


def test_reverted_relationship_delete_ordered_by_creation_not_by_id():
    st = MemoryState(relationships=[rel("qq:30", T0), rel("qq:200", T0 + timedelta(hours=1)),
                                    rel("qq:1", T0 + timedelta(hours=2))])
    gone = st.relationships["qq:200"]
    tx = Tx(st, "operator", "zcor_relationship_delete", 1, T0)
    tx.remove_rel("qq:200")
    tx.rollback()
    assert list(st.relationships) == ["qq:30", "qq:200", "qq:1"]
    st._remove_rel("qq:200")
    st.add_rel(gone)
    assert list(st.relationships) == ["qq:30", "qq:200", "qq:1"]


def test_removing_one_superseded_source_keeps_the_others_replaced():
    merged = node(3, "merged")
    sources = [node(i, f"s{i}").model_copy(update={"superseded_by": "m3", "supersede_reason": "r"}) for i in (1, 2)]
    st = MemoryState([*sources, merged])
    assert st.replaced == {"m3": {"m1", "m2"}}
    st._remove_node("m1")
    assert st.replaced == {"m3": {"m2"}}
    st._remove_node("m2")
    assert st.replaced == {}


def test_text_search_after_a_reverted_delete_in_the_middle():
    # found open by the issue-16 sample: the text pieces are built, then a node goes back
    # between its neighbours (a revert), inside a piece
    st = MemoryState([node(i, f"t{i}", content=f"qq{i}") for i in range(1, 6)])
    assert set(st.text_matches("qq")) == {f"m{i}" for i in range(1, 6)}
    gone = st.nodes["m3"]
    st._remove_node("m3")
    assert set(st.text_matches("qq")) == {"m1", "m2", "m4", "m5"}
    st.add_node(gone)
    assert set(st.text_matches("qq")) == {f"m{i}" for i in range(1, 6)}
    assert set(st.text_matches("qq3")) == {"m3"}


def test_new_id_skips_ids_in_use_upwards():
    # a hand-edited file may hold a nextId that names existing memories: ids are never reused
    st = MemoryState([node(i, f"t{i}") for i in (1, 2, 3, 5)], next_id=2)
    tx = Tx(st, "operator", "zcor_memory_write", 1, T0)
    assert tx.take_id() == "m4" and st.next_id == 5
    assert tx.take_id() == "m6" and st.next_id == 7
