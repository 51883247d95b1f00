"""SPEC §2: the node tools — write, read, delete, children, trace, important, query, merge, supersede.

Every test states one rule of the spec and fails if that rule breaks. Refused calls are
checked to change nothing: the bytes of memory-state.json and everything the read tools
report are compared before and after.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.conftest import persisted_bytes
from zcord.core.errors import StorageError, ZcorError
from zcord.service import Service

STATE = "memory-state.json"
NODE_FIELDS = ("id", "title", "content", "keywords", "parentId", "sourceMessage", "createdAt", "updatedAt",
               "supersededBy", "supersedeReason")


# -- helpers --------------------------------------------------------------------------------


def state_bytes(memdir) -> bytes | None:
    """The persisted Memory (snapshot plus journal), as a snapshot would write it."""
    return persisted_bytes(memdir)


def state_json(memdir) -> dict:
    return json.loads(persisted_bytes(memdir))


def important_ids(memdir) -> list[str]:
    """The important list as persisted (SPEC §4: the state holds the important list)."""
    return state_json(memdir)["important"]


def everything(t) -> dict:
    """All that the read tools can see: every node (with read extras), roots, children lists."""
    q = t.query(includeSuperseded=True, limit=100)
    ids = sorted(item["id"] for item in q["items"])
    return {
        "query": q,
        "read": {i: t.read(id=i) for i in ids},
        "roots": t.children(),
        "children": {i: t.children(parentId=i) for i in ids},
    }


def snapshot(memdir, t) -> tuple:
    return state_bytes(memdir), everything(t)


def refused(svc, memdir, t, tool: str, params: dict, field: str | None = None,
            in_message: tuple[str, ...] = (), field_in_message: bool = True) -> ZcorError:
    """Call a tool that must be refused; check that nothing changed and the error names the field.

    The error's field may be more precise than the parameter (keywords[0] for keywords).
    field_in_message=False for state errors (superseded, cycle) whose sentence names nodes, not
    parameters; err.field is still checked.
    """
    name = tool if tool.startswith("zcor_") else f"zcor_memory_{tool}"
    before = snapshot(memdir, t)
    with pytest.raises(ZcorError) as info:
        svc.call(name, params)
    err = info.value
    after = snapshot(memdir, t)
    assert after[0] == before[0], f"{name} was refused but memory-state.json changed"
    assert after[1] == before[1], f"{name} was refused but what the read tools show changed"
    if field is not None:
        assert err.field is not None and (err.field == field or err.field.startswith((field + "[", field + "."))), \
            f"error field {err.field!r}, expected {field!r} ({err.message})"
        if field_in_message:
            assert field in err.message, f"message does not name {field!r}: {err.message}"
    for text in in_message:
        assert text in err.message, f"message does not mention {text!r}: {err.message}"
    return err


def node_only(result: dict) -> dict:
    return {k: result[k] for k in NODE_FIELDS}


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts)


def contains(haystack, needle) -> bool:
    """True when needle equals haystack or any value nested inside it."""
    if haystack == needle:
        return True
    if isinstance(haystack, dict):
        return any(contains(v, needle) for v in haystack.values())
    if isinstance(haystack, list):
        return any(contains(v, needle) for v in haystack)
    return False


class LocalCaller:
    """t-style calls on another Service (after a restart)."""

    def __init__(self, svc: Service):
        self.svc = svc

    def __getattr__(self, short: str):
        name = f"zcor_{short}" if short.startswith("relationship_") else f"zcor_memory_{short}"
        return lambda **params: self.svc.call(name, params)


def make(t, title: str = "title", content: str = "content", **kw) -> str:
    return t.write(title=title, content=content, **kw)["id"]


# -- zcor_memory_write: create and update -----------------------------------------------------


def test_create_assigns_short_sequential_ids_and_full_node(t):
    r1 = t.write(title="first", content="one")
    r2 = t.write(title="second", content="two")
    r3 = t.write(title="third", content="three")
    assert [r1["id"], r2["id"], r3["id"]] == ["m1", "m2", "m3"]
    node = t.read(id="m2")
    assert node["title"] == "second" and node["content"] == "two"
    assert node["parentId"] is None and node["sourceMessage"] is None
    assert node["supersededBy"] is None and node["supersedeReason"] is None
    for key in ("createdAt", "updatedAt"):
        assert parse(node[key]).utcoffset() is not None, f"{key} has no offset: {node[key]}"
    assert node["createdAt"] == node["updatedAt"]


def test_ids_never_reused_after_delete(t):
    assert make(t) == "m1"
    assert make(t) == "m2"
    t.delete(id="m2")  # the highest id
    assert make(t) == "m3"
    t.delete(id="m1")
    t.delete(id="m3")  # now empty
    assert make(t) == "m4"


def test_ids_never_reused_after_delete_and_restart(svc, t, memdir, clock):
    make(t)
    make(t)
    t.delete(id="m2")
    svc.close()
    s2 = Service(memdir, clock=clock).open()
    try:
        assert s2.call("zcor_memory_write", {"title": "again", "content": ""})["id"] == "m3"
    finally:
        s2.close()


def test_update_changes_title_content_keeps_created_and_moves_updated(t):
    created = t.write(title="old title", content="old content")
    updated = t.write(id="m1", title="new title", content="new content")
    assert updated["id"] == "m1"
    node = t.read(id="m1")
    assert node["title"] == "new title" and node["content"] == "new content"
    assert node["createdAt"] == created["createdAt"]
    assert parse(node["updatedAt"]) > parse(created["updatedAt"])
    assert make(t) == "m2", "an update must not consume an id"


def test_update_unknown_id_refused(svc, memdir, t):
    make(t)
    err = refused(svc, memdir, t, "write", {"id": "m99", "title": "x", "content": "y"}, field="id",
                  in_message=("m99",))
    assert err.code == "not_found"
    assert make(t) == "m2", "the refused update must not create m99 or take an id"


# -- parentId ---------------------------------------------------------------------------------


def test_new_node_without_parent_is_root(t):
    make(t, "a")
    make(t, "b", parentId="m1")
    make(t, "c")
    assert t.read(id="m3")["parentId"] is None
    assert [i["id"] for i in t.children()["items"]] == ["m1", "m3"]


def test_create_with_parent(t):
    make(t, "parent")
    r = t.write(title="child", content="", parentId="m1")
    assert r["parentId"] == "m1"
    assert t.read(id="m2")["parentId"] == "m1"
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2"]


def test_update_omitted_parent_keeps_parent(t):
    make(t, "parent")
    make(t, "child", parentId="m1")
    t.write(id="m2", title="child renamed", content="x")
    assert t.read(id="m2")["parentId"] == "m1"


def test_update_null_parent_moves_to_root(t):
    make(t, "parent")
    make(t, "child", parentId="m1")
    t.write(id="m2", title="child", content="x", parentId=None)
    assert t.read(id="m2")["parentId"] is None
    assert [i["id"] for i in t.children()["items"]] == ["m1", "m2"]
    assert t.children(parentId="m1")["items"] == []


def test_update_moves_to_other_parent(t):
    make(t, "p1")
    make(t, "p2")
    make(t, "child", parentId="m1")
    t.write(id="m3", title="child", content="", parentId="m2")
    assert t.read(id="m3")["parentId"] == "m2"
    assert t.read(id="m1")["childCount"] == 0
    assert t.read(id="m2")["childCount"] == 1


def test_a_move_to_the_current_parent_changes_nothing(svc, memdir, t):
    """Issue 12: no change record and no updatedAt bump when a write changes no field."""
    make(t, "p1")
    make(t, "child", content="x", parentId="m1")
    before, changes = snapshot(memdir, t), len(svc.state.history)
    result = t.write(id="m2", title="child", content="x", parentId="m1")
    assert result["created"] is False and node_only(result) == node_only(before[1]["read"]["m2"])
    assert snapshot(memdir, t) == before and len(svc.state.history) == changes
    t.write(id="m2", title="child", content="y", parentId="m1")  # a real change still is one
    assert len(svc.state.history) == changes + 1 and t.read(id="m2")["updatedAt"] != result["updatedAt"]


def test_create_with_unknown_parent_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"title": "x", "content": "", "parentId": "m42"}, field="parentId",
            in_message=("m42",))
    assert make(t) == "m2"


def test_update_with_unknown_parent_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"id": "m1", "title": "changed", "content": "", "parentId": "nope"},
            field="parentId")


def test_self_parent_refused(svc, memdir, t):
    make(t)
    err = refused(svc, memdir, t, "write", {"id": "m1", "title": "x", "content": "", "parentId": "m1"},
                  field="parentId", field_in_message=False)
    assert "cycle" in err.message.lower()


def test_parent_is_descendant_refused(svc, memdir, t):
    make(t, "a")
    make(t, "b", parentId="m1")
    make(t, "c", parentId="m2")
    refused(svc, memdir, t, "write", {"id": "m1", "title": "a", "content": "", "parentId": "m3"},
            field="parentId", field_in_message=False)
    refused(svc, memdir, t, "write", {"id": "m1", "title": "a", "content": "", "parentId": "m2"},
            field="parentId", field_in_message=False)
    # moving a node under a non-descendant stays allowed
    t.write(id="m3", title="c", content="", parentId="m1")
    assert t.read(id="m3")["parentId"] == "m1"


# -- keywords ---------------------------------------------------------------------------------


def test_keywords_omitted_on_create_derived_from_title(t):
    r = t.write(title="我喜欢吃苹果和香蕉", content="内容里有葡萄")
    kws = r["keywords"]
    # 喜欢 or 喜欢吃: the default synonyms teach jieba 喜欢吃 as one word
    assert {"苹果", "香蕉"} <= set(kws) and ({"喜欢", "喜欢吃"} & set(kws))
    assert "我" not in kws and "和" not in kws, "single characters are not keywords"
    assert all(len(k) >= 2 for k in kws), kws
    assert "葡萄" not in kws, "keywords come from the title, not the content"
    assert t.read(id=r["id"])["keywords"] == kws


def test_keywords_derived_from_latin_title(t):
    """Whole words; chat filler such as "likes" is left out (SPEC §3.3, clean keywords)."""
    kws = t.write(title="Alice likes green tea", content="")["keywords"]
    assert {k.casefold() for k in kws} == {"alice", "green", "tea"}


def test_keywords_omitted_on_update_kept(t):
    make(t, "苹果香蕉", keywords=["水果", "早餐"])
    t.write(id="m1", title="完全不同的标题", content="x")
    assert t.read(id="m1")["keywords"] == ["水果", "早餐"]
    make(t, "小明的生日")
    derived = t.read(id="m2")["keywords"]
    t.write(id="m2", title="大雄的爱好", content="")
    assert t.read(id="m2")["keywords"] == derived, "omitted keywords on update must not be re-derived"


def test_keywords_given_replace(t):
    make(t, "小明的生日", keywords=["a1", "b2"])
    assert t.read(id="m1")["keywords"] == ["a1", "b2"]
    t.write(id="m1", title="小明的生日", content="", keywords=["生日", "小明"])
    assert t.read(id="m1")["keywords"] == ["生日", "小明"]
    t.write(id="m1", title="小明的生日", content="", keywords=[])
    assert t.read(id="m1")["keywords"] == []


def test_keywords_given_on_create_used_instead_of_title(t):
    r = t.write(title="小明的生日", content="", keywords=["蛋糕"])
    assert r["keywords"] == ["蛋糕"]


# -- sourceMessage ----------------------------------------------------------------------------


def test_source_message_max_length(svc, memdir, t):
    ok = "说" * 20_000
    make(t, "a", sourceMessage=ok)
    assert t.read(id="m1")["sourceMessage"] == ok
    refused(svc, memdir, t, "write", {"title": "b", "content": "", "sourceMessage": "x" * 20_001},
            field="sourceMessage")
    refused(svc, memdir, t, "write", {"id": "m1", "title": "a", "content": "", "sourceMessage": "x" * 20_001},
            field="sourceMessage")
    assert t.read(id="m1")["sourceMessage"] == ok


def test_source_message_null_clears_omitted_keeps(t):
    make(t, "a", sourceMessage="她说：我下周去北京")
    t.write(id="m1", title="a2", content="c2")
    assert t.read(id="m1")["sourceMessage"] == "她说：我下周去北京"
    t.write(id="m1", title="a3", content="c3", sourceMessage="新的原话")
    assert t.read(id="m1")["sourceMessage"] == "新的原话"
    t.write(id="m1", title="a4", content="c4", sourceMessage=None)
    assert t.read(id="m1")["sourceMessage"] is None


def test_source_message_stored_as_given(t):
    raw = "  原话 ＡＢＣ\n第二行\t "
    make(t, "a", sourceMessage=raw)
    assert t.read(id="m1")["sourceMessage"] == raw


# -- title / content limits -------------------------------------------------------------------


def test_title_required(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"content": "no title"}, field="title")
    refused(svc, memdir, t, "write", {"id": "m1", "content": "no title"}, field="title")


def test_content_required(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"title": "no content"}, field="content")


def test_title_empty_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"title": "", "content": "x"}, field="title")
    refused(svc, memdir, t, "write", {"id": "m1", "title": "", "content": "x"}, field="title")


def test_title_whitespace_only_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"title": "   \n", "content": "x"}, field="title")


def test_title_length_limit(svc, memdir, t):
    title = "题" * 200
    make(t, title)
    assert t.read(id="m1")["title"] == title
    refused(svc, memdir, t, "write", {"title": "x" * 201, "content": ""}, field="title")
    refused(svc, memdir, t, "write", {"id": "m1", "title": "x" * 201, "content": ""}, field="title")


def test_content_length_limit(svc, memdir, t):
    content = "文" * 20_000
    make(t, "a", content)
    assert t.read(id="m1")["content"] == content
    refused(svc, memdir, t, "write", {"title": "b", "content": "x" * 20_001}, field="content")
    refused(svc, memdir, t, "write", {"id": "m1", "title": "a", "content": "x" * 20_001}, field="content")


def test_empty_content_allowed(t):
    make(t, "only a title", "")
    assert t.read(id="m1")["content"] == ""


# -- superseded nodes cannot be updated ------------------------------------------------------


def test_update_superseded_refused_naming_replacement(svc, memdir, t):
    make(t, "old")
    make(t, "new")
    t.supersede(ids=["m1"], replacementId="m2", reason="outdated")
    err = refused(svc, memdir, t, "write", {"id": "m1", "title": "edit", "content": "edit"}, field="id",
                  in_message=("m2",), field_in_message=False)
    assert err.code == "superseded"
    assert t.read(id="m1")["title"] == "old"


def test_update_merged_source_refused_naming_new_node(svc, memdir, t):
    make(t, "a")
    make(t, "b")
    new = t.merge(ids=["m1", "m2"], title="ab", content="", reason="same")["id"]
    refused(svc, memdir, t, "write", {"id": "m2", "title": "edit", "content": ""}, in_message=(new,))


# -- schema: unknown parameters, wrong types --------------------------------------------------


@pytest.mark.parametrize("extra", ["foo", "parent_id", "source_message", "Title"])
def test_write_unknown_parameter_refused(svc, memdir, t, extra):
    make(t)
    refused(svc, memdir, t, "write", {"title": "x", "content": "y", extra: "m1"}, field=extra)
    refused(svc, memdir, t, "write", {"id": "m1", "title": "x", "content": "y", extra: "m1"}, field=extra)


@pytest.mark.parametrize("params, field", [
    ({"title": 5, "content": "y"}, "title"),
    ({"title": None, "content": "y"}, "title"),
    ({"title": ["a"], "content": "y"}, "title"),
    ({"title": "x", "content": 7}, "content"),
    ({"title": "x", "content": None}, "content"),
    ({"title": "x", "content": "y", "keywords": "x"}, "keywords"),
    ({"title": "x", "content": "y", "keywords": [1, 2]}, "keywords"),
    ({"title": "x", "content": "y", "keywords": {"a": 1}}, "keywords"),
    ({"title": "x", "content": "y", "parentId": 1}, "parentId"),
    ({"title": "x", "content": "y", "sourceMessage": 3}, "sourceMessage"),
    ({"id": 1, "title": "x", "content": "y"}, "id"),
    ({"id": True, "title": "x", "content": "y"}, "id"),
])
def test_write_wrong_types_refused(svc, memdir, t, params, field):
    make(t)
    refused(svc, memdir, t, "write", params, field=field)


def test_write_arguments_not_an_object_refused(svc, memdir, t):
    make(t)
    before = snapshot(memdir, t)
    with pytest.raises(ZcorError):
        svc.call("zcor_memory_write", ["title", "content"])
    assert snapshot(memdir, t) == before


def test_refused_create_takes_no_id(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "write", {"title": "", "content": ""}, field="title")
    refused(svc, memdir, t, "write", {"title": "x", "content": "", "parentId": "m9"}, field="parentId")
    assert make(t) == "m2"


# -- zcor_memory_read -------------------------------------------------------------------------


def test_read_returns_node_and_extras(t):
    make(t, "parent", "pc")
    make(t, "child", "cc", parentId="m1", keywords=["kw"], sourceMessage="src")
    make(t, "grandchild", "gc", parentId="m2")
    r = t.read(id="m2")
    assert r["id"] == "m2" and r["title"] == "child" and r["content"] == "cc"
    assert r["keywords"] == ["kw"] and r["sourceMessage"] == "src" and r["parentId"] == "m1"
    assert r["parentTitle"] == "parent"
    assert r["childCount"] == 1
    assert r["important"] is False
    root = t.read(id="m1")
    assert root["parentTitle"] is None
    assert root["childCount"] == 1, "childCount counts direct children only"
    assert t.read(id="m3")["childCount"] == 0


def test_read_parent_title_is_current(t):
    make(t, "old parent title")
    make(t, "child", parentId="m1")
    t.write(id="m1", title="new parent title", content="")
    assert t.read(id="m2")["parentTitle"] == "new parent title"


def test_read_important_flag(t):
    make(t)
    assert t.read(id="m1")["important"] is False
    t.important(id="m1", important=True)
    assert t.read(id="m1")["important"] is True
    t.important(id="m1", important=False)
    assert t.read(id="m1")["important"] is False


def test_read_superseded_node(t):
    make(t, "old", "old content")
    make(t, "new")
    t.supersede(ids=["m1"], replacementId="m2", reason="she moved")
    r = t.read(id="m1")
    assert r["title"] == "old" and r["content"] == "old content"
    assert r["supersededBy"] == "m2" and r["supersedeReason"] == "she moved"


def test_read_unknown_id_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "read", {"id": "m7"}, field="id", in_message=("m7",))
    refused(svc, memdir, t, "read", {}, field="id")
    refused(svc, memdir, t, "read", {"id": 1}, field="id")
    refused(svc, memdir, t, "read", {"id": "m1", "extra": 1}, field="extra")


def test_read_changes_no_state_file(memdir, t):
    make(t)
    before = state_bytes(memdir)
    t.read(id="m1")
    t.children()
    t.trace(id="m1")
    t.query()
    assert state_bytes(memdir) == before


# -- zcor_memory_delete -----------------------------------------------------------------------


def test_delete_removes_node(t):
    make(t, "a")
    make(t, "b")
    r = t.delete(id="m1")
    assert r["id"] == "m1"
    with pytest.raises(ZcorError) as info:
        t.read(id="m1")
    assert info.value.code == "not_found"
    assert [i["id"] for i in t.children()["items"]] == ["m2"]
    assert t.query()["total"] == 1


def test_delete_unknown_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "delete", {"id": "m5"}, field="id", in_message=("m5",))


def test_delete_with_children_refused_naming_them(svc, memdir, t):
    make(t, "parent")
    make(t, "c1", parentId="m1")
    make(t, "c2", parentId="m1")
    err = refused(svc, memdir, t, "delete", {"id": "m1"}, in_message=("m2", "m3"))
    assert err.code == "conflict"
    # once the children are gone the delete works
    t.delete(id="m2")
    t.write(id="m3", title="c2", content="", parentId=None)
    t.delete(id="m1")


def test_delete_linked_from_relationship_refused_naming_person(svc, memdir, t):
    make(t, "Alice")
    t.relationship_write(personId="qq:42", name="Alice", relationship="friend", affinity=10,
                         reason="helped me", memoryNodeId="m1")
    refused(svc, memdir, t, "delete", {"id": "m1"}, in_message=("qq:42",))
    assert t.relationship_read(personId="qq:42")["memoryNodeId"] == "m1"
    t.relationship_write(personId="qq:42", name="Alice", relationship="friend", affinity=10,
                         reason="helped me", memoryNodeId=None)
    t.delete(id="m1")


def test_delete_supersede_target_refused_naming_replaced(svc, memdir, t):
    make(t, "old")
    make(t, "new")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    refused(svc, memdir, t, "delete", {"id": "m2"}, in_message=("m1",))


def test_delete_merge_result_refused(svc, memdir, t):
    make(t, "a")
    make(t, "b")
    new = t.merge(ids=["m1", "m2"], title="ab", content="", reason="dup")["id"]
    refused(svc, memdir, t, "delete", {"id": new}, in_message=("m1", "m2"))


def test_delete_superseded_node_allowed(t):
    make(t, "old")
    make(t, "new")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    t.delete(id="m1")
    # m2 no longer replaces anything, so it can go too
    t.delete(id="m2")
    assert t.query(includeSuperseded=True)["total"] == 0


def test_delete_clears_important_mark(memdir, t):
    for i in range(7):
        make(t, f"n{i + 1}")
    for i in range(1, 6):
        t.important(id=f"m{i}", important=True)
    t.delete(id="m3")
    assert "m3" not in important_ids(memdir)
    # the freed slot is usable: a 5th mark replaces nothing
    r = t.important(id="m6", important=True)
    assert "replaced" not in r
    assert all(t.read(id=i)["important"] for i in ("m1", "m2", "m4", "m5", "m6"))
    assert important_ids(memdir) == ["m1", "m2", "m4", "m5", "m6"]


def test_delete_history_keeps_full_node(t):
    make(t, "parent")
    t.write(title="to be deleted", content="body text", parentId="m1", keywords=["kw1", "kw2"],
            sourceMessage="the original words")
    t.write(id="m2", title="to be deleted v2", content="body text v2")
    before = node_only(t.read(id="m2"))
    t.delete(id="m2")
    records = t.history(limit=100)["items"]
    deletes = [r for r in records if r.get("tool") == "zcor_memory_delete" and r.get("status") == "ok"]
    assert len(deletes) == 1
    assert contains(deletes[0], before), f"the delete record does not hold the full node {before}"


def test_delete_wrong_type_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "delete", {"id": 1}, field="id")
    refused(svc, memdir, t, "delete", {"id": "m1", "force": True}, field="force")


# -- zcor_memory_children / zcor_memory_trace --------------------------------------------------


def test_children_roots_and_direct_children(t):
    make(t, "r1")
    make(t, "c1", parentId="m1")
    make(t, "r2")
    make(t, "gc", parentId="m2")
    make(t, "c2", parentId="m1")
    roots = t.children()["items"]
    assert [(i["id"], i["title"]) for i in roots] == [("m1", "r1"), ("m3", "r2")]
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m5"]
    assert [i["id"] for i in t.children(parentId="m2")["items"]] == ["m4"]
    assert t.children(parentId="m4")["items"] == []
    assert [i["id"] for i in t.children(parentId=None)["items"]] == ["m1", "m3"]


def test_children_superseded_flag(t):
    make(t, "a")
    make(t, "b")
    make(t, "c")
    t.supersede(ids=["m2"], replacementId="m3", reason="r")
    items = {i["id"]: i for i in t.children()["items"]}
    assert list(items) == ["m1", "m2", "m3"], "superseded nodes are still listed"
    assert items["m2"]["superseded"] is True
    assert items["m1"]["superseded"] is False and items["m3"]["superseded"] is False


def test_children_order_stable_after_move_away_and_back(t):
    make(t, "parent")
    for name in ("b", "c", "d"):
        make(t, name, parentId="m1")
    t.write(id="m3", title="c", content="", parentId=None)
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m4"]
    assert [i["id"] for i in t.children()["items"]] == ["m1", "m3"]
    t.write(id="m3", title="c", content="", parentId="m1")
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m3", "m4"]
    # an update without a move does not change the order either
    t.write(id="m2", title="b edited", content="new")
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m3", "m4"]


def test_roots_order_stable_after_move_away_and_back(t):
    for name in ("a", "b", "c"):
        make(t, name)
    t.write(id="m1", title="a", content="", parentId="m3")
    assert [i["id"] for i in t.children()["items"]] == ["m2", "m3"]
    t.write(id="m1", title="a", content="", parentId=None)
    assert [i["id"] for i in t.children()["items"]] == ["m1", "m2", "m3"]


def test_children_order_survives_restart(svc, memdir, clock, t):
    make(t, "parent")
    for name in ("b", "c", "d"):
        make(t, name, parentId="m1")
    t.write(id="m2", title="b", content="", parentId=None)
    t.write(id="m2", title="b", content="", parentId="m1")
    svc.close()
    s2 = Service(memdir, clock=clock).open()
    try:
        items = s2.call("zcor_memory_children", {"parentId": "m1"})["items"]
        assert [i["id"] for i in items] == ["m2", "m3", "m4"]
    finally:
        s2.close()


def test_children_order_stable_after_refused_delete_and_delete_of_sibling(svc, memdir, t):
    make(t, "parent")
    for name in ("b", "c", "d"):
        make(t, name, parentId="m1")
    make(t, "gc", parentId="m2")
    refused(svc, memdir, t, "delete", {"id": "m2"})
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m3", "m4"]
    t.delete(id="m3")
    assert [i["id"] for i in t.children(parentId="m1")["items"]] == ["m2", "m4"]


def test_children_unknown_parent_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "children", {"parentId": "m9"}, field="parentId")
    refused(svc, memdir, t, "children", {"parentId": 3}, field="parentId")
    refused(svc, memdir, t, "children", {"parent_id": "m1"}, field="parent_id")


def test_trace_path_and_children(t):
    make(t, "root")
    make(t, "mid", parentId="m1")
    make(t, "leaf", parentId="m2")
    make(t, "leaf child", parentId="m3")
    make(t, "grand-grandchild", parentId="m4")
    make(t, "sibling", parentId="m3")
    r = t.trace(id="m3")
    assert [(p["id"], p["title"]) for p in r["path"]] == [("m1", "root"), ("m2", "mid"), ("m3", "leaf")]
    assert [c["id"] for c in r["children"]] == ["m4", "m6"], "direct children only"
    root = t.trace(id="m1")
    assert [p["id"] for p in root["path"]] == ["m1"]
    assert [c["id"] for c in root["children"]] == ["m2"]


def test_trace_reflects_moves_and_superseded_children(t):
    make(t, "a")
    make(t, "b")
    make(t, "c", parentId="m1")
    make(t, "d", parentId="m1")
    t.write(id="m3", title="c", content="", parentId="m2")
    assert [p["id"] for p in t.trace(id="m3")["path"]] == ["m2", "m3"]
    t.supersede(ids=["m4"], replacementId="m3", reason="r")
    kids = t.trace(id="m1")["children"]
    assert [(c["id"], c["superseded"]) for c in kids] == [("m4", True)]


def test_trace_unknown_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "trace", {"id": "m2"}, field="id")


# -- zcor_memory_important --------------------------------------------------------------------


def test_important_first_marked_order(memdir, t):
    for i in range(3):
        make(t, f"n{i + 1}")
    t.important(id="m3", important=True)
    t.important(id="m1", important=True)
    t.important(id="m2", important=True)
    assert important_ids(memdir) == ["m3", "m1", "m2"]


def test_important_remark_is_noop(memdir, t):
    for i in range(6):
        make(t, f"n{i + 1}")
    t.important(id="m1", important=True)
    t.important(id="m2", important=True)
    before = state_bytes(memdir)
    t.important(id="m1", important=True)
    assert state_bytes(memdir) == before, "re-marking changed the state"
    assert important_ids(memdir) == ["m1", "m2"]
    for i in (3, 4, 5):
        t.important(id=f"m{i}", important=True)
    r = t.important(id="m6", important=True)
    assert r["replaced"]["id"] == "m1", "re-marking must not move m1 to the end"


def test_sixth_mark_replaces_earliest_with_receipt(memdir, t):
    for i in range(7):
        make(t, f"note {i + 1}", f"body {i + 1}")
    for i in (2, 1, 3, 4, 5):
        t.important(id=f"m{i}", important=True)
    replaced_before = t.read(id="m2")
    r = t.important(id="m6", important=True)
    assert r["replaced"]["id"] == "m2"
    assert r["replaced"]["title"] == "note 2"
    assert isinstance(r["reminder"], str) and r["reminder"].strip()
    assert "m2" in r["reminder"]
    assert important_ids(memdir) == ["m1", "m3", "m4", "m5", "m6"]
    after = t.read(id="m2")
    assert after["important"] is False
    assert node_only(after) == node_only(replaced_before), "the replaced node itself must be untouched"
    # a 7th replaces the next earliest
    assert t.important(id="m7", important=True)["replaced"]["id"] == "m1"


def test_fifth_mark_has_no_receipt(t):
    for i in range(5):
        make(t, f"n{i}")
    for i in range(1, 6):
        r = t.important(id=f"m{i}", important=True)
        assert "replaced" not in r and "reminder" not in r


def test_important_receipt_recorded_in_history(t):
    for i in range(6):
        make(t, f"node {i + 1}")
    for i in range(1, 7):
        t.important(id=f"m{i}", important=True)
    rec = t.history(keywords=["zcor_memory_important"], limit=1)["items"][0]
    assert contains(rec, "m1") and contains(rec, "node 1")


def test_important_superseded_refused(svc, memdir, t):
    make(t, "old")
    make(t, "new")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    err = refused(svc, memdir, t, "important", {"id": "m1", "important": True}, field="id",
                  in_message=("m2",), field_in_message=False)
    assert err.code == "superseded"


def test_unmark(memdir, t):
    for i in range(3):
        make(t, f"n{i}")
    for i in (1, 2, 3):
        t.important(id=f"m{i}", important=True)
    t.important(id="m2", important=False)
    assert important_ids(memdir) == ["m1", "m3"]
    assert t.read(id="m2")["important"] is False
    before = state_bytes(memdir)
    t.important(id="m2", important=False)  # not marked: nothing to do
    assert state_bytes(memdir) == before
    t.important(id="m2", important=True)
    assert important_ids(memdir) == ["m1", "m3", "m2"], "a re-mark after unmark goes to the end"


def test_important_unmark_does_not_touch_node(t):
    make(t, "n")
    t.important(id="m1", important=True)
    before = node_only(t.read(id="m1"))
    t.important(id="m1", important=False)
    assert node_only(t.read(id="m1")) == before


def test_important_bad_arguments_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "important", {"id": "m9", "important": True}, field="id")
    refused(svc, memdir, t, "important", {"id": "m1"}, field="important")
    refused(svc, memdir, t, "important", {"id": "m1", "important": "true"}, field="important")
    refused(svc, memdir, t, "important", {"id": "m1", "important": 1}, field="important")
    refused(svc, memdir, t, "important", {"id": "m1", "important": True, "slot": 0}, field="slot")


# -- zcor_memory_query ------------------------------------------------------------------------


def ids_of(result) -> list[str]:
    return [i["id"] for i in result["items"]]


def test_query_every_keyword_in_title_or_content(t):
    make(t, "apple pie", "baked on sunday")   # m1
    make(t, "banana", "apple smoothie")       # m2
    make(t, "cherry", "sunday market")        # m3
    make(t, "apple", "")                      # m4
    assert set(ids_of(t.query(keywords=["apple"]))) == {"m1", "m2", "m4"}
    assert ids_of(t.query(keywords=["apple", "sunday"])) == ["m1"], "keywords are ANDed across title/content"
    assert ids_of(t.query(keywords=["pie", "sunday"])) == ["m1"]
    assert ids_of(t.query(keywords=["smooth"])) == ["m2"], "substring match"
    assert t.query(keywords=["apple", "cherry"])["items"] == []


def test_query_three_or_more_keywords_all_must_occur(t):
    """With three or more keywords every one must occur (in the title or the content): the
    longest keyword plus only some of the others is not enough."""
    make(t, "strawberry jam", "made with sugar and lemon")   # m1: all four words
    make(t, "strawberry jam", "made with sugar")             # m2: no lemon
    make(t, "strawberry tart", "lemon and sugar")            # m3: no jam
    make(t, "jam", "lemon, sugar")                           # m4: no strawberry (the longest)
    make(t, "sugar", "strawberry")                           # m5: longest + one other
    assert ids_of(t.query(keywords=["strawberry", "jam", "sugar"])) == ["m2", "m1"]
    assert ids_of(t.query(keywords=["sugar", "jam", "strawberry", "lemon"])) == ["m1"]
    assert ids_of(t.query(keywords=["lemon", "sugar", "tart"])) == ["m3"]
    assert t.query(keywords=["strawberry", "sugar", "jam", "tart"])["total"] == 0
    # the same rule for relationships: every keyword somewhere in the record
    t.relationship_write(personId="p1", name="Lin", relationship="classmate", affinity=0, reason="jam session")
    t.relationship_write(personId="p2", name="Lin", relationship="classmate", affinity=0, reason="lunch")
    t.relationship_write(personId="p3", name="Bo", relationship="classmate", affinity=0, reason="jam session")
    assert [r["personId"] for r in t.relationship_query(keywords=["classmate", "lin", "jam"])["items"]] == ["p1"]


def test_query_does_not_match_keywords_or_source(t):
    make(t, "tea", "green", keywords=["zebra"], sourceMessage="giraffe")
    assert t.query(keywords=["zebra"])["total"] == 0
    assert t.query(keywords=["giraffe"])["total"] == 0


def test_query_no_synonyms(t):
    make(t, "我的妈妈", "")
    assert t.query(keywords=["母亲"])["total"] == 0
    assert t.query(keywords=["妈妈"])["total"] == 1


def test_query_nfkc_and_casefold(t):
    make(t, "abc", "")                   # m1
    make(t, "ＸＹＺ corp", "")           # m2
    make(t, "note", "Straße 5")           # m3
    make(t, "Hello World", "")           # m4
    assert ids_of(t.query(keywords=["ＡＢＣ"])) == ["m1"]
    assert ids_of(t.query(keywords=["ABC"])) == ["m1"]
    assert ids_of(t.query(keywords=["xyz"])) == ["m2"]
    assert ids_of(t.query(keywords=["STRASSE"])) == ["m3"]
    assert ids_of(t.query(keywords=["hello WORLD"])) == ["m4"]


def test_query_no_keywords_returns_all_current(t):
    for i in range(3):
        make(t, f"n{i}")
    r = t.query()
    assert r["total"] == 3 and set(ids_of(r)) == {"m1", "m2", "m3"}
    assert r["nextOffset"] is None


def test_query_items_are_full_nodes(t):
    make(t, "p")
    make(t, "c", "body", parentId="m1", keywords=["k"], sourceMessage="s")
    item = next(i for i in t.query()["items"] if i["id"] == "m2")
    assert node_only(item) == node_only(t.read(id="m2"))


def test_query_newest_updated_first(t):
    for i in range(3):
        make(t, f"n{i}")
    assert ids_of(t.query()) == ["m3", "m2", "m1"]
    t.write(id="m1", title="n0 edited", content="")
    assert ids_of(t.query()) == ["m1", "m3", "m2"]


def test_query_tie_later_created_first(t, clock):
    clock.step = timedelta(0)
    for i in range(3):
        make(t, f"n{i}")
    assert ids_of(t.query()) == ["m3", "m2", "m1"]
    t.write(id="m1", title="n0 edited", content="")  # same updatedAt: creation order decides
    assert ids_of(t.query()) == ["m3", "m2", "m1"]


def test_query_tie_order_with_equal_instants_in_different_offsets(t, clock):
    # the same instant written with different offsets is a tie, broken by creation order
    instant = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    clock.step = timedelta(0)
    clock.set(instant.astimezone(timezone(timedelta(hours=8))))
    make(t, "a")
    clock.set(instant)
    make(t, "b")
    clock.set(instant.astimezone(timezone(timedelta(hours=-5))))
    make(t, "c")
    assert ids_of(t.query()) == ["m3", "m2", "m1"]


def test_query_time_range_inclusive_with_offsets(t):
    u = [t.write(title=f"n{i}", content="")["updatedAt"] for i in range(4)]
    mid1, mid2 = parse(u[1]), parse(u[2])
    z = lambda d: d.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"  # noqa: E731
    minus5 = lambda d: d.astimezone(timezone(timedelta(hours=-5))).isoformat()  # noqa: E731
    plus8 = lambda d: d.astimezone(timezone(timedelta(hours=8))).isoformat()  # noqa: E731
    # exact bounds are inclusive, whatever offset they are written in
    assert ids_of(t.query(**{"from": z(mid1), "to": plus8(mid2)})) == ["m3", "m2"]
    assert ids_of(t.query(**{"from": minus5(mid1), "to": z(mid2)})) == ["m3", "m2"]
    assert ids_of(t.query(**{"from": u[1], "to": u[1]})) == ["m2"]
    assert ids_of(t.query(**{"from": z(mid2)})) == ["m4", "m3"]
    assert ids_of(t.query(to=minus5(mid1))) == ["m2", "m1"]
    # just outside the bounds
    eps = timedelta(milliseconds=1)
    assert ids_of(t.query(**{"from": z(mid1 + eps), "to": z(mid2 - eps)})) == []


def test_query_time_filters_updated_not_created(t):
    first = t.write(title="old", content="")
    for _ in range(3):
        make(t, "filler")
    upd = t.write(id="m1", title="old edited", content="")
    assert parse(upd["updatedAt"]) > parse(first["createdAt"])
    assert ids_of(t.query(**{"from": upd["updatedAt"]})) == ["m1"]
    assert "m1" not in ids_of(t.query(to=first["updatedAt"]))


@pytest.mark.parametrize("name", ["from", "to"])
@pytest.mark.parametrize("value", ["2026-01-01T09:00:00", "2026-01-01", "yesterday", "2026-13-01T00:00:00Z"])
def test_query_time_without_offset_or_malformed_refused(svc, memdir, t, name, value):
    make(t)
    refused(svc, memdir, t, "query", {name: value}, field=name)


def test_query_limit_default_and_paging(t):
    for i in range(25):
        make(t, f"n{i}")
    r = t.query()
    assert len(r["items"]) == 20 and r["total"] == 25 and r["nextOffset"] == 20
    assert ids_of(r) == [f"m{i}" for i in range(25, 5, -1)]
    r2 = t.query(offset=r["nextOffset"])
    assert ids_of(r2) == ["m5", "m4", "m3", "m2", "m1"]
    assert r2["total"] == 25 and r2["nextOffset"] is None
    r3 = t.query(limit=10, offset=10)
    assert ids_of(r3) == [f"m{i}" for i in range(15, 5, -1)] and r3["nextOffset"] == 20
    r4 = t.query(limit=5, offset=20)
    assert len(r4["items"]) == 5 and r4["nextOffset"] is None, "nextOffset null exactly at the end"
    r5 = t.query(offset=30)
    assert r5["items"] == [] and r5["total"] == 25 and r5["nextOffset"] is None


def test_query_limit_bounds(svc, memdir, t):
    for i in range(3):
        make(t, f"n{i}")
    assert len(t.query(limit=1)["items"]) == 1
    assert t.query(limit=1)["nextOffset"] == 1
    assert len(t.query(limit=100)["items"]) == 3
    refused(svc, memdir, t, "query", {"limit": 0}, field="limit")
    refused(svc, memdir, t, "query", {"limit": 101}, field="limit")
    refused(svc, memdir, t, "query", {"limit": -1}, field="limit")
    refused(svc, memdir, t, "query", {"limit": "5"}, field="limit")
    refused(svc, memdir, t, "query", {"offset": -1}, field="offset")
    refused(svc, memdir, t, "query", {"keywords": "abc"}, field="keywords")
    refused(svc, memdir, t, "query", {"includeSuperseded": "yes"}, field="includeSuperseded")
    refused(svc, memdir, t, "query", {"since": "2026-01-01T00:00:00Z"}, field="since")


def test_query_excludes_superseded_unless_asked(t):
    make(t, "cat food", "")
    make(t, "cat toys", "")
    make(t, "cat vet", "")
    t.supersede(ids=["m1"], replacementId="m3", reason="r")
    r = t.query(keywords=["cat"])
    assert set(ids_of(r)) == {"m2", "m3"} and r["total"] == 2
    r = t.query(keywords=["cat"], includeSuperseded=True)
    assert set(ids_of(r)) == {"m1", "m2", "m3"} and r["total"] == 3


# -- zcor_memory_merge ------------------------------------------------------------------------


def test_merge_creates_node_and_supersedes_sources(t):
    make(t, "小明喜欢猫", "a")
    make(t, "小明养了猫", "b")
    make(t, "other", "")
    r = t.merge(ids=["m1", "m2"], title="小明和他的猫", content="merged", reason="same topic")
    new = r["id"]
    assert new == "m4"
    node = t.read(id=new)
    assert node["title"] == "小明和他的猫" and node["content"] == "merged"
    assert node["supersededBy"] is None
    assert {"小明"} <= set(node["keywords"]), "keywords omitted: derived from the title"
    for src in ("m1", "m2"):
        s = t.read(id=src)
        assert s["supersededBy"] == new and s["supersedeReason"] == "same topic"
    assert set(ids_of(t.query())) == {"m3", new}
    assert t.read(id="m3")["supersededBy"] is None


def test_merge_keywords_given(t):
    make(t, "a")
    make(t, "b")
    r = t.merge(ids=["m1", "m2"], title="ab", content="", keywords=["x1", "y2"], reason="r")
    assert t.read(id=r["id"])["keywords"] == ["x1", "y2"]


def test_merge_parent_common(t):
    make(t, "parent")
    make(t, "a", parentId="m1")
    make(t, "b", parentId="m1")
    new = t.merge(ids=["m2", "m3"], title="ab", content="", reason="r")["id"]
    assert t.read(id=new)["parentId"] == "m1"
    kids = t.children(parentId="m1")["items"]
    assert [(k["id"], k["superseded"]) for k in kids] == [("m2", True), ("m3", True), (new, False)]


def test_merge_parent_differs_is_root(t):
    make(t, "p1")
    make(t, "p2")
    make(t, "a", parentId="m1")
    make(t, "b", parentId="m2")
    new = t.merge(ids=["m3", "m4"], title="ab", content="", reason="r")["id"]
    assert t.read(id=new)["parentId"] is None
    assert new in ids_of(t.children())


def test_merge_one_root_one_child_is_root(t):
    make(t, "p")
    make(t, "a", parentId="m1")
    make(t, "b")
    new = t.merge(ids=["m2", "m3"], title="ab", content="", reason="r")["id"]
    assert t.read(id=new)["parentId"] is None


def test_merge_important_takes_earliest_source_slot(memdir, t):
    for i in range(5):
        make(t, f"n{i + 1}")
    for i in (1, 4, 2, 3):
        t.important(id=f"m{i}", important=True)
    new = t.merge(ids=["m3", "m4"], title="34", content="", reason="r")["id"]
    assert important_ids(memdir) == ["m1", new, "m2"]
    assert t.read(id=new)["important"] is True
    assert t.read(id="m3")["important"] is False and t.read(id="m4")["important"] is False


def test_merge_unmarked_sources_new_node_not_important(memdir, t):
    for i in range(3):
        make(t, f"n{i + 1}")
    t.important(id="m3", important=True)
    new = t.merge(ids=["m1", "m2"], title="12", content="", reason="r")["id"]
    assert important_ids(memdir) == ["m3"]
    assert t.read(id=new)["important"] is False


def test_merge_moves_children_and_links(t):
    make(t, "a")                         # m1
    make(t, "b")                         # m2
    make(t, "a child", parentId="m1")    # m3
    make(t, "b child", parentId="m2")    # m4
    make(t, "b child 2", parentId="m2")  # m5
    t.relationship_write(personId="p1", name="P one", relationship="friend", affinity=5, reason="r",
                         memoryNodeId="m1")
    t.relationship_write(personId="p2", name="P two", relationship="friend", affinity=5, reason="r",
                         memoryNodeId="m2")
    new = t.merge(ids=["m1", "m2"], title="ab", content="", reason="r")["id"]
    assert set(ids_of(t.children(parentId=new))) == {"m3", "m4", "m5"}
    for c in ("m3", "m4", "m5"):
        assert t.read(id=c)["parentId"] == new
    assert t.children(parentId="m1")["items"] == [] and t.children(parentId="m2")["items"] == []
    assert t.read(id=new)["childCount"] == 3
    assert t.relationship_read(personId="p1")["memoryNodeId"] == new
    assert t.relationship_read(personId="p2")["memoryNodeId"] == new
    # the sources are no longer linked or parents, only superseded
    assert t.read(id="m1")["childCount"] == 0


def test_merge_fewer_than_two_refused(svc, memdir, t):
    make(t, "a")
    make(t, "b")
    refused(svc, memdir, t, "merge", {"ids": ["m1"], "title": "x", "content": "", "reason": "r"}, field="ids")
    refused(svc, memdir, t, "merge", {"ids": [], "title": "x", "content": "", "reason": "r"}, field="ids")
    assert make(t) == "m3"


def test_merge_duplicate_ids_refused(svc, memdir, t):
    make(t, "a")
    make(t, "b")
    refused(svc, memdir, t, "merge", {"ids": ["m1", "m1"], "title": "x", "content": "", "reason": "r"},
            field="ids")
    refused(svc, memdir, t, "merge", {"ids": ["m1", "m2", "m1"], "title": "x", "content": "", "reason": "r"},
            field="ids")
    assert make(t) == "m3"


def test_merge_superseded_source_refused(svc, memdir, t):
    for i in range(3):
        make(t, f"n{i}")
    t.supersede(ids=["m1"], replacementId="m3", reason="r")
    refused(svc, memdir, t, "merge", {"ids": ["m1", "m2"], "title": "x", "content": "", "reason": "r"},
            in_message=("m1",))
    assert make(t) == "m4"


def test_merge_unknown_source_refused(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "merge", {"ids": ["m1", "m9"], "title": "x", "content": "", "reason": "r"},
            in_message=("m9",))


def test_merge_argument_checks(svc, memdir, t):
    make(t, "a")
    make(t, "b")
    base = {"ids": ["m1", "m2"], "title": "x", "content": "", "reason": "r"}
    refused(svc, memdir, t, "merge", {k: v for k, v in base.items() if k != "reason"}, field="reason")
    refused(svc, memdir, t, "merge", {**base, "title": ""}, field="title")
    refused(svc, memdir, t, "merge", {**base, "title": "x" * 201}, field="title")
    refused(svc, memdir, t, "merge", {**base, "content": "x" * 20_001}, field="content")
    refused(svc, memdir, t, "merge", {**base, "ids": "m1,m2"}, field="ids")
    refused(svc, memdir, t, "merge", {**base, "parentId": "m1"}, field="parentId")


# -- zcor_memory_supersede --------------------------------------------------------------------


def test_supersede_marks_sources(t):
    for i in range(4):
        make(t, f"topic {i + 1}")
    t.supersede(ids=["m1", "m2"], replacementId="m4", reason="newer info")
    for src in ("m1", "m2"):
        r = t.read(id=src)
        assert r["supersededBy"] == "m4" and r["supersedeReason"] == "newer info"
    assert t.read(id="m4")["supersededBy"] is None
    assert t.read(id="m3")["supersededBy"] is None


def test_supersede_sources_drop_out_of_query(t):
    for i in range(3):
        make(t, f"topic {i + 1}")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    assert set(ids_of(t.query(keywords=["topic"]))) == {"m2", "m3"}
    assert set(ids_of(t.query(keywords=["topic"], includeSuperseded=True))) == {"m1", "m2", "m3"}


def test_supersede_moves_important_marks(memdir, t):
    for i in range(5):
        make(t, f"n{i + 1}")
    for i in (5, 1, 2, 3):
        t.important(id=f"m{i}", important=True)
    t.supersede(ids=["m1", "m3"], replacementId="m4", reason="r")
    assert important_ids(memdir) == ["m5", "m4", "m2"]
    assert t.read(id="m4")["important"] is True
    assert t.read(id="m1")["important"] is False and t.read(id="m3")["important"] is False


def test_supersede_replacement_already_important(memdir, t):
    for i in range(3):
        make(t, f"n{i + 1}")
    for i in (1, 3, 2):
        t.important(id=f"m{i}", important=True)
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    marks = important_ids(memdir)
    assert sorted(marks) == ["m2", "m3"], marks
    assert len(marks) == len(set(marks))


def test_supersede_replacement_must_exist(svc, memdir, t):
    make(t)
    refused(svc, memdir, t, "supersede", {"ids": ["m1"], "replacementId": "m5", "reason": "r"},
            field="replacementId")


def test_supersede_replacement_must_be_current(svc, memdir, t):
    for i in range(3):
        make(t, f"n{i}")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    refused(svc, memdir, t, "supersede", {"ids": ["m3"], "replacementId": "m1", "reason": "r"},
            field="replacementId", in_message=("m2",), field_in_message=False)


def test_supersede_replacement_not_among_ids(svc, memdir, t):
    make(t)
    make(t)
    refused(svc, memdir, t, "supersede", {"ids": ["m1", "m2"], "replacementId": "m2", "reason": "r"},
            field="replacementId")
    refused(svc, memdir, t, "supersede", {"ids": ["m1"], "replacementId": "m1", "reason": "r"},
            field="replacementId")


def test_supersede_sources_must_exist_and_be_current(svc, memdir, t):
    for i in range(3):
        make(t, f"n{i}")
    t.supersede(ids=["m1"], replacementId="m2", reason="r")
    refused(svc, memdir, t, "supersede", {"ids": ["m1"], "replacementId": "m3", "reason": "r"},
            in_message=("m1",))
    refused(svc, memdir, t, "supersede", {"ids": ["m3", "m8"], "replacementId": "m2", "reason": "r"},
            in_message=("m8",))
    refused(svc, memdir, t, "supersede", {"ids": [], "replacementId": "m2", "reason": "r"}, field="ids")
    refused(svc, memdir, t, "supersede", {"ids": ["m3"], "replacementId": "m2"}, field="reason")
    refused(svc, memdir, t, "supersede", {"ids": "m3", "replacementId": "m2", "reason": "r"}, field="ids")
    refused(svc, memdir, t, "supersede", {"ids": ["m3"], "replacementId": "m2", "reason": "r", "replacement_id": "m2"},
            field="replacement_id")
    refused(svc, memdir, t, "supersede", {"ids": ["m3"], "replacementId": "m2", "reason": ""}, field="reason")


def test_supersede_keeps_tree(t):
    make(t, "p")
    make(t, "old", parentId="m1")
    make(t, "new")
    t.supersede(ids=["m2"], replacementId="m3", reason="r")
    assert t.read(id="m2")["parentId"] == "m1"
    assert [(c["id"], c["superseded"]) for c in t.children(parentId="m1")["items"]] == [("m2", True)]


# -- persistence of node changes --------------------------------------------------------------


def test_node_changes_persist_across_restart(svc, memdir, clock, t):
    make(t, "p")
    make(t, "c", "body", parentId="m1", keywords=["k"], sourceMessage="src")
    make(t, "x")
    t.important(id="m2", important=True)
    t.supersede(ids=["m3"], replacementId="m2", reason="r")
    before = everything(t)
    svc.close()
    s2 = Service(memdir, clock=clock).open()
    try:
        assert everything(LocalCaller(s2)) == before
    finally:
        s2.close()


def test_keyword_spanning_title_and_content_does_not_match(t):
    make(t, "ab", "cd")
    assert t.query(keywords=["bc"])["total"] == 0
    assert t.query(keywords=["ab", "cd"])["total"] == 1


def test_query_time_bounds_with_millisecond_times(t, clock):
    clock.set(datetime(2026, 5, 4, 3, 2, 1, 123000, tzinfo=timezone(timedelta(hours=8))))
    make(t, "a")
    make(t, "b")
    ua = parse(t.read(id="m1")["updatedAt"])
    z = ua.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert ids_of(t.query(**{"from": z, "to": z})) == ["m1"]


def test_delete_allowed_after_linking_relationship_is_deleted(t):
    make(t, "Bob")
    t.relationship_write(personId="p:bob", name="Bob", relationship="coworker", affinity=0, reason="met",
                         memoryNodeId="m1")
    t.relationship_delete(personId="p:bob")
    t.delete(id="m1")


# -- refused by the disk: a failed save changes nothing, now or later -------------------------


@pytest.fixture
def full_disk(failing_disk):
    """Call on() to make every state-file write fail with ENOSPC at os.write (below the atomic
    write, so a save that rewrote the file in place would be caught), off() to heal the disk."""
    return failing_disk


def history_titles(memdir) -> list:
    """Titles of the nodes recorded (after) in the state file's change history."""
    return [(h.get("after") or {}).get("title") for h in state_json(memdir)["history"]
            if isinstance(h.get("after"), dict)]


def test_failed_delete_keeps_creation_order_past_ten_nodes(svc, memdir, t, full_disk):
    """A refused delete puts the node back in creation order (m2 before m10, not text order)."""
    for i in range(12):
        make(t, f"n{i + 1}")
    order = [c["id"] for c in t.children()["items"]]
    assert order == [f"m{i}" for i in range(1, 13)]
    full_disk.on()
    with pytest.raises(StorageError):
        t.delete(id="m2")
    full_disk.off()
    assert [c["id"] for c in t.children()["items"]] == order
    make(t, "n13")
    assert [n["id"] for n in state_json(memdir)["nodes"]] == order + ["m13"]


def test_failed_create_changes_nothing_and_leaves_no_trace(svc, memdir, t, full_disk):
    make(t, "first")
    full_disk.on()
    refused(svc, memdir, t, "write", {"title": "FAILED", "content": ""})
    full_disk.off()
    assert make(t, "second") == "m2", "a failed create must not consume an id"
    titles = history_titles(memdir)
    assert "FAILED" not in titles, f"the failed create reached the state file's history: {titles}"
    assert "second" in titles, f"the state file's history lost the create of m2: {titles}"


def test_failed_merge_changes_nothing_and_leaves_no_trace(svc, memdir, clock, t, full_disk):
    make(t, "a")
    make(t, "b")
    make(t, "a child", parentId="m1")
    t.relationship_write(personId="p1", name="P", relationship="r", affinity=1, reason="r", memoryNodeId="m2")
    t.important(id="m2", important=True)
    t.important(id="m1", important=True)
    full_disk.on()
    refused(svc, memdir, t, "merge", {"ids": ["m1", "m2"], "title": "FAILED", "content": "", "reason": "r"})
    full_disk.off()
    assert important_ids(memdir) == ["m2", "m1"]
    assert t.relationship_read(personId="p1")["memoryNodeId"] == "m2"
    new = t.merge(ids=["m1", "m2"], title="merged", content="", reason="r")["id"]
    assert new == "m4"
    titles = history_titles(memdir)
    assert "FAILED" not in titles, f"the failed merge reached the state file's history: {titles}"
    assert "merged" in titles, f"the state file's history lost the merge: {titles}"
    before = everything(t)
    svc.close()
    s2 = Service(memdir, clock=clock).open()
    try:
        assert everything(LocalCaller(s2)) == before
    finally:
        s2.close()


def test_failed_delete_keeps_orders(svc, memdir, t, full_disk, clock):
    clock.step = timedelta(0)
    make(t, "parent")
    for name in ("b", "c", "d"):
        make(t, name, parentId="m1")
    t.important(id="m3", important=True)
    full_disk.on()
    refused(svc, memdir, t, "delete", {"id": "m3"})
    full_disk.off()
    assert ids_of(t.children(parentId="m1")) == ["m2", "m3", "m4"]
    assert ids_of(t.query()) == ["m4", "m3", "m2", "m1"]
    assert t.read(id="m3")["important"] is True


def test_failed_important_mark_changes_nothing(svc, memdir, t, full_disk):
    for i in range(6):
        make(t, f"n{i + 1}")
    for i in range(1, 6):
        t.important(id=f"m{i}", important=True)
    full_disk.on()
    refused(svc, memdir, t, "important", {"id": "m6", "important": True})
    full_disk.off()
    assert important_ids(memdir) == ["m1", "m2", "m3", "m4", "m5"]
    assert t.important(id="m6", important=True)["replaced"]["id"] == "m1"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_query_answers_the_same_whether_keywords_narrow_by_the_text_or_by_each_candidate(t, monkeypatch, seed):
    """Past NARROW_FROM candidates, each further keyword is looked up in the query text and
    the sets intersected; below it, every candidate's title and content are checked. Both
    give the same items, totals and pages, with superseded memories and a time range."""
    import random

    from zcord.service.rooms import memories

    rng = random.Random(seed)
    words = ["茶", "奶茶", "Tea", "tea party", "周末", "爬山", "ＡＢＣ", "abc", "猫"]
    for n in range(60):
        make(t, " ".join(rng.sample(words, 2)) + f" {n}", " ".join(rng.sample(words, 3)))
    t.supersede(ids=["m3", "m4"], replacementId="m5", reason="old")
    for _ in range(25):
        query = {"keywords": rng.sample(words, rng.randint(2, 4)), "limit": rng.randint(1, 30),
                 "offset": rng.randint(0, 10), "includeSuperseded": rng.random() < 0.5}
        if rng.random() < 0.3:
            query["from"] = "2000-01-01T00:00:00+00:00"
        monkeypatch.setattr(memories, "NARROW_FROM", 10**9)
        each = t.query(**query)
        monkeypatch.setattr(memories, "NARROW_FROM", 0)
        assert t.query(**query) == each, query
