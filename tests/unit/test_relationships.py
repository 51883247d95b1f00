"""zcor_relationship_* tools (SPEC §1 Relationship, §2 relationship rows)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from zcord.core.errors import InvalidArgument, NotFound, ZcorError

TZ = timezone(timedelta(hours=8))
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=TZ)


def rel(t, person_id="qq:1", **over):
    params = {"personId": person_id, "name": "Alice", "relationship": "friend", "affinity": 10,
              "reason": "helped me once"}
    params.update(over)
    return t.relationship_write(**params)


def fields(record: dict) -> dict:
    """The stored record, without result-only fields like `created`."""
    return {k: v for k, v in record.items() if k != "created"}


def pids(result: dict) -> list[str]:
    return [r["personId"] for r in result["items"]]


# -- create / update -----------------------------------------------------------------------


def test_create_returns_full_record_and_created_true(t):
    r = rel(t, aliases=["Ally"], affinity=-3)
    assert r["created"] is True
    assert r["personId"] == "qq:1"
    assert r["name"] == "Alice"
    assert r["aliases"] == ["Ally"]
    assert r["relationship"] == "friend"
    assert r["affinity"] == -3
    assert r["reason"] == "helped me once"
    assert r["memoryNodeId"] is None
    assert r["createdAt"] == r["updatedAt"]
    assert datetime.fromisoformat(r["createdAt"]).utcoffset() is not None
    assert fields(t.relationship_read(personId="qq:1")) == fields(r)


def test_update_keeps_created_at_and_changes_updated_at(t, clock):
    clock.set(T0)
    first = rel(t, affinity=10)
    clock.set(T0 + timedelta(hours=1))
    second = rel(t, affinity=25, reason="gave me a gift", relationship="close friend")
    assert second["created"] is False
    assert second["createdAt"] == first["createdAt"]
    assert second["updatedAt"] != first["updatedAt"]
    assert datetime.fromisoformat(second["updatedAt"]) == T0 + timedelta(hours=1)
    stored = t.relationship_read(personId="qq:1")
    assert stored["affinity"] == 25
    assert stored["reason"] == "gave me a gift"
    assert stored["relationship"] == "close friend"
    assert stored["createdAt"] == first["createdAt"]
    # one record, not two
    assert t.relationship_query()["total"] == 1


def test_model_actor_can_create_and_read(svc):
    r = svc.call("zcor_relationship_write", {"personId": "qq:9", "name": "Bo", "relationship": "x",
                                             "affinity": 0, "reason": "met"}, actor="model")
    assert r["created"] is True
    assert svc.call("zcor_relationship_read", {"personId": "qq:9"}, actor="model")["name"] == "Bo"


# -- affinity ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-100, 0, 100])
def test_affinity_bounds_accepted(t, value):
    assert rel(t, affinity=value)["affinity"] == value


@pytest.mark.parametrize("value", [101, -101, 3.5, "5", True, False, None, 1000])
def test_affinity_out_of_range_or_not_integer_refused(t, value):
    with pytest.raises(InvalidArgument) as ei:
        rel(t, affinity=value)
    assert ei.value.field == "affinity"
    assert "affinity" in ei.value.message
    with pytest.raises(NotFound):
        t.relationship_read(personId="qq:1")


def test_bad_affinity_on_update_changes_nothing(t):
    before = rel(t, affinity=40)
    with pytest.raises(InvalidArgument) as ei:
        rel(t, affinity=101, reason="new reason")
    assert ei.value.field == "affinity"
    assert fields(t.relationship_read(personId="qq:1")) == fields(before)


def test_affinity_missing_is_refused_naming_field(t):
    with pytest.raises(InvalidArgument) as ei:
        t.relationship_write(personId="qq:1", name="A", relationship="r", reason="x")
    assert ei.value.field == "affinity"


def test_unknown_parameter_refused(t):
    with pytest.raises(InvalidArgument) as ei:
        rel(t, mood="happy")
    assert "mood" in ei.value.message


# -- memoryNodeId -----------------------------------------------------------------------------


def test_memory_node_id_links_existing_current_node(t):
    node = t.write(title="Alice's profile", content="likes tea")
    r = rel(t, memoryNodeId=node["id"])
    assert r["memoryNodeId"] == node["id"]
    assert t.relationship_read(personId="qq:1")["memoryNodeId"] == node["id"]


def test_memory_node_id_unknown_refused_and_nothing_changes(t):
    with pytest.raises(NotFound) as ei:
        rel(t, memoryNodeId="m404")
    assert ei.value.field == "memoryNodeId"
    with pytest.raises(NotFound):
        t.relationship_read(personId="qq:1")

    before = rel(t)
    with pytest.raises(NotFound) as ei:
        rel(t, memoryNodeId="m404", affinity=50)
    assert ei.value.field == "memoryNodeId"
    assert fields(t.relationship_read(personId="qq:1")) == fields(before)


def test_memory_node_id_superseded_refused(t):
    old = t.write(title="Alice old", content="old")
    new = t.write(title="Alice new", content="new")
    t.supersede(ids=[old["id"]], replacementId=new["id"], reason="outdated")
    with pytest.raises(ZcorError) as ei:
        rel(t, memoryNodeId=old["id"])
    assert ei.value.field == "memoryNodeId"
    with pytest.raises(NotFound):
        t.relationship_read(personId="qq:1")
    # the current replacement is fine
    assert rel(t, memoryNodeId=new["id"])["memoryNodeId"] == new["id"]


def test_memory_node_id_omitted_keeps_and_null_unlinks(t):
    node = t.write(title="Alice", content="profile")
    rel(t, memoryNodeId=node["id"])
    kept = rel(t, affinity=20)  # memoryNodeId omitted
    assert kept["memoryNodeId"] == node["id"]
    assert t.relationship_read(personId="qq:1")["memoryNodeId"] == node["id"]

    # while linked, the node cannot be deleted (error names the person)
    with pytest.raises(ZcorError) as ei:
        t.delete(id=node["id"])
    assert "qq:1" in ei.value.message

    unlinked = rel(t, affinity=20, memoryNodeId=None)
    assert unlinked["memoryNodeId"] is None
    assert t.relationship_read(personId="qq:1")["memoryNodeId"] is None
    # once unlinked, the node can go
    assert t.delete(id=node["id"])["deleted"] is True


def test_relink_to_another_node(t):
    a = t.write(title="A", content="a")
    b = t.write(title="B", content="b")
    rel(t, memoryNodeId=a["id"])
    rel(t, memoryNodeId=b["id"])
    assert t.relationship_read(personId="qq:1")["memoryNodeId"] == b["id"]
    # a is no longer linked, so it can be deleted; b is
    t.delete(id=a["id"])
    with pytest.raises(ZcorError):
        t.delete(id=b["id"])


# -- aliases ----------------------------------------------------------------------------------


def test_aliases_omitted_keeps_given_replaces(t):
    rel(t, aliases=["Ally", "A."])
    assert rel(t, affinity=1)["aliases"] == ["Ally", "A."]
    assert t.relationship_read(personId="qq:1")["aliases"] == ["Ally", "A."]
    assert rel(t, aliases=["Lis"])["aliases"] == ["Lis"]
    assert rel(t, aliases=[])["aliases"] == []
    assert t.relationship_read(personId="qq:1")["aliases"] == []


def test_aliases_default_empty_on_create(t):
    assert rel(t)["aliases"] == []


# -- read ---------------------------------------------------------------------------------------


def test_read_unknown_person_is_clear_not_found(t):
    with pytest.raises(NotFound) as ei:
        t.relationship_read(personId="qq:nobody")
    assert ei.value.code == "not_found"
    assert "no relationship for personid" in ei.value.message.casefold()
    assert "qq:nobody" in ei.value.message
    assert ei.value.field == "personId"


def test_read_missing_person_id_refused(t):
    with pytest.raises(InvalidArgument) as ei:
        t.relationship_read()
    assert ei.value.field == "personId"


# -- query ----------------------------------------------------------------------------------------


@pytest.fixture
def people(t, clock):
    clock.set(T0)
    rel(t, "p1", name="Ａｌｉｃｅ Wong", aliases=["Ally"], relationship="Classmate", affinity=60,
        reason="shared notes before exams")
    clock.set(T0 + timedelta(minutes=1))
    rel(t, "p2", name="Bob", aliases=["STRASSE"], relationship="neighbor", affinity=-20,
        reason="helped move the sofa")
    clock.set(T0 + timedelta(minutes=2))
    rel(t, "p3", name="Carol", relationship="coworker", affinity=0, reason="neutral")
    clock.set(T0 + timedelta(minutes=3))
    rel(t, "p4", name="Dan", relationship="cousin", affinity=100, reason="family")
    clock.set(T0 + timedelta(minutes=4))
    rel(t, "p5", name="Eve", relationship="rival", affinity=-100, reason="stole my seat")
    clock.set(T0 + timedelta(hours=1))
    return t


def test_query_all_newest_updated_first(people):
    r = people.relationship_query()
    assert pids(r) == ["p5", "p4", "p3", "p2", "p1"]
    assert r["total"] == 5
    assert r["nextOffset"] is None


def test_query_order_follows_updates(people, clock):
    clock.set(T0 + timedelta(hours=2))
    rel(people, "p2", name="Bob", aliases=["STRASSE"], relationship="neighbor", affinity=-10,
        reason="apologised")
    assert pids(people.relationship_query())[0] == "p2"


@pytest.mark.parametrize("keyword, expected", [
    ("alice", ["p1"]),        # name, full-width letters (NFKC) and case
    ("ALLY", ["p1"]),         # alias
    ("classMATE", ["p1"]),    # relationship text
    ("EXAMS", ["p1"]),        # reason
    ("Straße", ["p2"]),       # casefold: ß -> ss matches alias STRASSE
    ("sofa", ["p2"]),
    ("nobody-like-this", []),
])
def test_query_keywords_over_name_aliases_relationship_reason(people, keyword, expected):
    r = people.relationship_query(keywords=[keyword])
    assert pids(r) == expected
    assert r["total"] == len(expected)


def test_query_every_keyword_must_match(people):
    assert pids(people.relationship_query(keywords=["bob", "sofa"])) == ["p2"]
    assert pids(people.relationship_query(keywords=["bob", "classmate"])) == []


def test_query_keywords_do_not_match_person_id(people):
    # personId is not one of the searched fields (name, aliases, relationship, reason)
    assert people.relationship_query(keywords=["p3"])["total"] == 0


def test_query_affinity_range_inclusive(people):
    assert pids(people.relationship_query(minAffinity=0)) == ["p4", "p3", "p1"]
    assert pids(people.relationship_query(maxAffinity=0)) == ["p5", "p3", "p2"]
    assert pids(people.relationship_query(minAffinity=-20, maxAffinity=60)) == ["p3", "p2", "p1"]
    assert pids(people.relationship_query(minAffinity=100)) == ["p4"]
    assert pids(people.relationship_query(maxAffinity=-100)) == ["p5"]


@pytest.mark.parametrize("params, field", [
    ({"minAffinity": 101}, "minAffinity"),
    ({"maxAffinity": -101}, "maxAffinity"),
    ({"minAffinity": 1.5}, "minAffinity"),
    ({"maxAffinity": "3"}, "maxAffinity"),
])
def test_query_affinity_bounds_validated(people, params, field):
    with pytest.raises(InvalidArgument) as ei:
        people.relationship_query(**params)
    assert ei.value.field == field


def test_query_min_above_max_refused(people):
    with pytest.raises(InvalidArgument):
        people.relationship_query(minAffinity=50, maxAffinity=10)


def test_query_time_range_on_updated_at_inclusive(people):
    r = people.relationship_query(**{"from": (T0 + timedelta(minutes=1)).isoformat(),
                                     "to": (T0 + timedelta(minutes=3)).isoformat()})
    assert pids(r) == ["p4", "p3", "p2"]
    # the same instants written with another offset
    r = people.relationship_query(**{"from": "2026-03-01T04:01:00+00:00", "to": "2026-03-01T04:03:00Z"})
    assert pids(r) == ["p4", "p3", "p2"]
    assert pids(people.relationship_query(to=T0.isoformat())) == ["p1"]
    assert pids(people.relationship_query(**{"from": (T0 + timedelta(minutes=4)).isoformat()})) == ["p5"]


@pytest.mark.parametrize("name", ["from", "to"])
def test_query_time_without_offset_refused(people, name):
    with pytest.raises(InvalidArgument) as ei:
        people.relationship_query(**{name: "2026-03-01T12:00:00"})
    assert ei.value.field == name


def test_query_paging(people):
    r1 = people.relationship_query(limit=2)
    assert pids(r1) == ["p5", "p4"]
    assert r1["total"] == 5 and r1["nextOffset"] == 2
    r2 = people.relationship_query(limit=2, offset=r1["nextOffset"])
    assert pids(r2) == ["p3", "p2"]
    assert r2["nextOffset"] == 4
    r3 = people.relationship_query(limit=2, offset=r2["nextOffset"])
    assert pids(r3) == ["p1"]
    assert r3["total"] == 5 and r3["nextOffset"] is None
    beyond = people.relationship_query(offset=10)
    assert beyond["items"] == [] and beyond["total"] == 5 and beyond["nextOffset"] is None


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 101}, "limit"), ({"offset": -1}, "offset"),
])
def test_query_paging_bounds(people, params, field):
    with pytest.raises(InvalidArgument) as ei:
        people.relationship_query(**params)
    assert ei.value.field == field


def test_query_returns_full_records(people):
    item = people.relationship_query(keywords=["alice"])["items"][0]
    assert fields(item) == fields(people.relationship_read(personId="p1"))


# -- delete -------------------------------------------------------------------------------------------


def test_delete_then_read_not_found_and_history_keeps_record(t):
    node = t.write(title="Alice", content="profile")
    rel(t, aliases=["Ally"], memoryNodeId=node["id"], affinity=42)
    before = t.relationship_read(personId="qq:1")
    r = t.relationship_delete(personId="qq:1")
    assert r["deleted"] is True
    with pytest.raises(NotFound):
        t.relationship_read(personId="qq:1")
    assert t.relationship_query()["total"] == 0
    # deleting the relationship also frees the node
    t.delete(id=node["id"])

    hist = t.history(keywords=["zcor_relationship_delete"])["items"]
    deletes = [h for h in hist if h["tool"] == "zcor_relationship_delete" and h["status"] == "ok"]
    assert len(deletes) == 1
    befores = [c["before"] for c in deletes[0]["changes"] if c.get("before")]
    assert fields(before) in befores


def test_delete_unknown_is_not_found(t):
    with pytest.raises(NotFound) as ei:
        t.relationship_delete(personId="qq:ghost")
    assert ei.value.field == "personId"


def test_recreate_after_delete_is_a_new_record(t, clock):
    clock.set(T0)
    rel(t)
    t.relationship_delete(personId="qq:1")
    clock.set(T0 + timedelta(days=1))
    r = rel(t)
    assert r["created"] is True
    assert datetime.fromisoformat(r["createdAt"]) == T0 + timedelta(days=1)


def test_query_ties_later_created_first(t, clock):
    clock.set(T0)
    clock.step = timedelta(0)
    for p in ("a", "b", "c"):
        rel(t, p)
    # an update at the same instant does not change creation order
    rel(t, "a", affinity=5)
    assert pids(t.relationship_query()) == ["c", "b", "a"]
