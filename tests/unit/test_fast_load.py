"""The fast loader (orjson and hand checks), the lazily built retrieval indexes and their
compact forms (issue 13): the same state, the same errors and the same answers as the
pydantic loader and an index built in one go."""

from __future__ import annotations

import json
import random

import pytest

from zcord.core import indexes as indexes_mod
from zcord.core.errors import StateFileInvalid
from zcord.core.fastload import fast_state
from zcord.core.models import Node, StateFile
from zcord.core.parsing import parse_state, state_of_model
from zcord.core.state import MemoryState
from zcord.core.text import normalize
from zcord.service import Service


def call(s: Service, tool: str, **params):
    return s.call(tool if tool.startswith("zcor_") else f"zcor_memory_{tool}", params)


def build(s: Service) -> None:
    """Nodes of every shape: CJK and Latin titles, keywords that normalize and fold, a tree,
    a merge (sources name the later merged node), a node moved under a later one, a
    relationship, important marks."""
    a = call(s, "write", title="王明喜欢奶茶", content="每周三次", keywords=["奶茶", "Dogs", "ＫＴＶ包厢"])["id"]
    b = call(s, "write", title="Running shoes", content="Size 42", keywords=["running", "shoes"], parentId=a)["id"]
    c = call(s, "write", title="小红的ktv包厢", content="周末 KTV", parentId=b)["id"]
    d = call(s, "write", title="Ｆｕｌｌ　ｗｉｄｔｈ Title", content="ＡＢＣ", keywords=[])["id"]
    call(s, "write", title="其它", content="x", keywords=["奶茶"])
    call(s, "merge", ids=[c, d], title="合并后的记忆", content="merged", reason="same thing")
    call(s, "important", id=a, important=True)
    early = call(s, "write", title="早的", content="moved under a later node")["id"]
    late = call(s, "write", title="晚的", content="x")["id"]
    call(s, "write", id=early, title="早的", content="moved under a later node", parentId=late)
    s.call("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "aliases": ["明明"],
                                       "relationship": "friend", "affinity": 10, "reason": "r", "memoryNodeId": a})


def tables(st: MemoryState) -> dict:
    """Everything the retrieval indexes answer, in plain sets (compact forms expanded)."""
    st.ensure_index()
    out = {name: {k: set(getattr(st, name).get(k)) for k in getattr(st, name)}
           for name in ("title_grams", "title_words", "keyword_ids", "title_keys")}
    out["index"] = {i: (x.updated, x.title_len, x.norm_title, x.title_seq) for i, x in st.index.items()}
    out["mixed"] = dict(st.mixed_keywords)
    out["count"] = (st.current_count, round(st.title_len_sum, 6))
    return out


def structure(st: MemoryState) -> dict:
    return {"nodes": list(st.nodes.items()), "rank": dict(st.rank), "children": st.children,
            "replaced": st.replaced, "links": st.links, "important": st.important, "next": st.next_id,
            "history": st.history, "segments": st.history_segments,
            "rels": list(st.relationships.items())}


@pytest.fixture
def raw(tmp_path) -> bytes:
    with Service(tmp_path / "src") as s:
        build(s)
    return (tmp_path / "src" / "memory-state.json").read_bytes()


def test_fast_loader_takes_zcords_own_file_and_matches_pydantic(raw):
    assert fast_state(raw) is not None
    fast = parse_state(raw, "memory-state.json")
    slow = state_of_model(StateFile.model_validate_json(raw), "memory-state.json", None)
    assert structure(fast) == structure(slow)
    assert all(type(n) is Node for n in fast.nodes.values())
    assert tables(fast) == tables(slow)
    # a reference to another node is that node's own id object
    for n in fast.nodes.values():
        if n.parent_id is not None:
            assert n.parent_id is fast.nodes[n.parent_id].id
        if n.superseded_by is not None:
            assert n.superseded_by is fast.nodes[n.superseded_by].id


@pytest.mark.parametrize("layout", ["pretty", "one-line", "snake-case", "z-times", "space-times", "no-optional"])
def test_other_layouts_and_forms_load_the_same(raw, layout):
    doc = json.loads(raw)
    if layout == "pretty":
        out = json.dumps(doc, ensure_ascii=False, indent=2)
    elif layout == "one-line":
        out = json.dumps(doc, ensure_ascii=False)
    else:
        for n in doc["nodes"]:
            if layout == "snake-case":  # pydantic accepts field names too: the fallback decides
                n["parent_id"] = n.pop("parentId")
            elif layout == "z-times":
                n["createdAt"] = n["createdAt"].replace("+08:00", "Z")
            elif layout == "space-times":
                n["updatedAt"] = n["updatedAt"].replace("T", " ")
            elif layout == "no-optional":
                for k in ("keywords", "sourceMessage", "supersedeReason"):
                    if not n.get(k):
                        n.pop(k, None)
        out = json.dumps(doc, ensure_ascii=False)
    data = out.encode()
    got = parse_state(data, "memory-state.json")
    want = state_of_model(StateFile.model_validate_json(data), "memory-state.json", None)
    assert structure(got) == structure(want)
    assert tables(got) == tables(want)


def _node_line_variant(raw: bytes, fn) -> bytes:
    """raw with its first node changed, keeping zcord's one-node-a-line layout."""
    head, _, rest = raw.partition(b'"nodes":[\n')
    first, sep, tail = rest.partition(b",\n")
    node = json.loads(first)
    fn(node)
    return head + b'"nodes":[\n' + json.dumps(node, ensure_ascii=False, separators=(",", ":")).encode() + sep + tail


@pytest.mark.parametrize("change, needle", [
    (lambda n: n.update(color="red"), "nodes.0.color: Extra inputs are not permitted"),
    (lambda n: n.pop("title"), "nodes.0.title: Field required"),
    (lambda n: n.update(title=5), "nodes.0.title: Input should be a valid string"),
    (lambda n: n.update(keywords=["a", 1]), "nodes.0.keywords.1: Input should be a valid string"),
    (lambda n: n.update(createdAt="2026-01-01T00:00:00"), "nodes.0.createdAt: Value error, time must carry"),
    (lambda n: n.update(createdAt="2026-13-01T00:00:00+08:00"), "nodes.0.createdAt: Input should be a valid datetime"),
    (lambda n: n.update(id="m2"), "memory id 'm2' appears twice"),
])
def test_errors_are_pydantics_in_either_layout(raw, change, needle):
    for data in (_node_line_variant(raw, change), json.dumps(_first_changed(raw, change)).encode()):
        with pytest.raises(StateFileInvalid) as ei:
            parse_state(data, "memory-state.json")
        assert needle in ei.value.message


def _first_changed(raw: bytes, fn) -> dict:
    doc = json.loads(raw)
    fn(doc["nodes"][0])
    return doc


def _put(st: MemoryState, node: Node) -> None:
    st._put_node(node)


def _random_ops(st: MemoryState, rng: random.Random, ids: list[str], steps: int, build_every: int | None) -> None:
    """Random creates, updates, moves, supersedes and deletes, interleaved with steps of the
    background build."""
    chars = "王李明红奶茶篮球ab dog dogs running"
    t = next(iter(st.nodes.values())).created_at
    n = len(st.nodes) + 1
    for i in range(steps):
        if build_every and i % build_every == 0:
            st.index_step(3)
        if i % 4 == 0:  # fill the caches of id sets built from arrays: writes must drop them
            for table in (st.title_grams, st.keyword_ids):
                for key in rng.sample(list(table), min(6, len(table))):
                    table.get(key)
        op = rng.random()
        live = [x for x in ids if x in st.nodes]
        if op < 0.3 or not live:
            node = Node(id=f"m{n}", title="".join(rng.choice(chars) for _ in range(rng.randint(1, 6))),
                        content="".join(rng.choice(chars) for _ in range(8)),
                        keywords=rng.sample(["奶茶", "Dogs", "dog", "ktv包厢", "running"], 2),
                        parent_id=rng.choice([None, *live[:3]]), created_at=t, updated_at=t)
            n += 1
            ids.append(node.id)
            _put(st, node)
        elif op < 0.6:
            x = rng.choice(live)
            old = st.nodes[x]
            _put(st, old.model_copy(update={"title": old.title + rng.choice(chars), "keywords": ["篮球", "Dogs"]}))
        elif op < 0.75:
            x = rng.choice(live)
            if not st.child_ids(x) and x not in st.replaced:
                idx_rank = st._remove_node(x)
                if rng.random() < 0.3:
                    st._restore_node(Node(id=x, title="回来", content="back", created_at=t, updated_at=t), idx_rank)
        else:
            x = rng.choice(live)
            old = st.nodes[x]
            if old.superseded_by is None and len(live) > 1:
                target = rng.choice([y for y in live if y != x])
                _put(st, old.model_copy(update={"superseded_by": target, "supersede_reason": "r"}))


@pytest.mark.parametrize("seed", range(4))
def test_writes_during_the_background_build_leave_the_indexes_as_a_fresh_build(raw, monkeypatch, seed):
    monkeypatch.setattr(indexes_mod, "BIG_POSTING", 2)  # arrays of ranks from the third node on
    monkeypatch.setattr(indexes_mod, "TEXT_CHUNK", 3)  # the query text in many pieces
    monkeypatch.setattr(indexes_mod, "SET_CACHE", 12)  # cached id sets evicted too
    rng = random.Random(seed)
    st = parse_state(raw, "memory-state.json")
    assert not st.indexed
    st.text_matches("奶茶")  # pieces built before the writes, kept up to date by them
    _random_ops(st, rng, list(st.nodes), 120, build_every=7)
    fresh = MemoryState(st.nodes.values())
    fresh.rank.clear()
    fresh.rank.update(st.rank)
    fresh._by_rank[:] = st._by_rank
    for key in ("title_grams", "title_words", "keyword_ids", "title_keys"):
        getattr(fresh, key).clear()
    fresh._unindexed = list(st.nodes)
    fresh.index.clear()
    fresh.ensure_index()
    got, want = tables(st), tables(fresh)
    assert got == want
    assert any(type(v) is indexes_mod.array for t in (st.title_grams, st.keyword_ids) for v in t.values())
    for word in ("奶茶", "王", "dog", "回来", "b"):
        found = st.text_matches(word)
        assert sorted(found) == sorted(i for i, n in st.nodes.items()
                                       if word in normalize(n.title) or word in normalize(n.content))


def test_reads_answer_before_the_build_and_recall_finishes_it(tmp_path):
    with Service(tmp_path / "m") as s:
        build(s)
    with Service(tmp_path / "m") as s:
        assert not s.state.indexed
        assert call(s, "read", id="m1")["title"] == "王明喜欢奶茶"
        assert [i["id"] for i in call(s, "children")["items"]] == ["m1", "m4", "m5", "m6", "m8"]
        assert [i["id"] for i in call(s, "query", keywords=["奶茶"])["items"]] == ["m1"]
        assert not s.state.indexed  # reads and query need no retrieval index
        got = s.recall_explain("王明喜欢奶茶吗")
        assert s.state.indexed
        assert "m1" in json.dumps(got)


def test_node_keeps_the_pydantic_surface():
    from pydantic import ValidationError

    t = "2026-02-01T08:00:00.000+08:00"
    d = {"id": "m1", "title": "标题", "content": "c", "keywords": ["a", "b"], "parentId": None,
         "sourceMessage": "s", "createdAt": t, "updatedAt": t, "supersededBy": None, "supersedeReason": None}
    node = Node.model_validate(d)
    assert node.dump() == d and json.loads(node.model_dump_json(by_alias=True)) == d
    assert node == Node.model_validate_json(json.dumps(d)) and hash(node) == hash(Node.model_validate(d))
    assert node.current and node.keywords == ("a", "b")
    moved = node.model_copy(update={"parent_id": "m0", "keywords": ["c"]})
    assert (moved.parent_id, moved.keywords, moved.title, node.parent_id) == ("m0", ("c",), "标题", None)
    assert "parent_id='m0'" in repr(moved) and moved != node and node != tuple(node)
    with pytest.raises(ValidationError):
        Node.model_validate({**d, "color": "red"})
    with pytest.raises(ValidationError):
        Node.model_validate({**d, "createdAt": "2026-02-01T08:00:00"})
