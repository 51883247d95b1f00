"""The pure rules of private conversations (issue 34): the `private` flag in a claim and in
an inferred origin, how it reads, the scope map in the state (Tx, replay, snapshot bytes,
both loaders), and the hiding helpers of zcord.service.scope."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from zcord.core import origin as O
from zcord.core.errors import InvalidArgument
from zcord.core.fastload import fast_state, state_of_fast
from zcord.core.journal import apply_change
from zcord.core.models import Node, StateFile
from zcord.core.parsing import state_of_model
from zcord.core.serializer import StateSerializer, StateView
from zcord.core.state import MemoryState, Tx
from zcord.service import scope

T = datetime(2026, 12, 6, tzinfo=UTC)


def test_a_claim_may_say_private_and_only_as_a_boolean():
    assert O.parse_claim({"session": "qq:private:1", "senders": ["qq:1"], "private": True}) == \
        {"session": "qq:private:1", "senders": ["qq:1"], "private": True}
    assert "private" not in O.parse_claim({"session": "s", "private": False})
    for bad in ("yes", 1, None, [True]):
        with pytest.raises(InvalidArgument, match="private must be true or false"):
            O.parse_claim({"session": "s", "private": bad})


def test_an_inferred_origin_carries_the_batch_private_flag():
    assert O.resolve("model", None, ("qq:private:1", ["qq:1"], True), False) == \
        {"session": "qq:private:1", "senders": ["qq:1"], "private": True, "inferred": True}
    assert "private" not in O.resolve("model", None, ("qq:group:1", ["qq:1"]), False)
    assert O.private_session({"session": "s", "private": True}) == "s"
    assert O.private_session({"session": "s"}) is None and O.private_session({"private": True}) is None
    assert O.describe({"session": "qq:private:1", "senders": ["qq:1"], "private": True}) == \
        "from qq:1 in qq:private:1 (private)"


def node(i: str) -> Node:
    return Node(id=i, title=f"t{i}", content="c", created_at=T, updated_at=T)


def test_scopes_roll_back_replay_and_survive_both_loaders():
    st = MemoryState([node("m1"), node("m2")], next_id=3)
    tx = Tx(st, "model", "zcor_memory_write", 1, T)
    tx.set_scope("m1", "qq:private:1")
    assert st.scopes == {"m1": "qq:private:1"}
    tx.rollback()
    assert st.scopes == {}
    # a logged scope.set replays onto a loaded state; null takes it away
    apply_change(st, {"changeId": 1, "at": T.isoformat(), "actor": "operator", "tool": "zcor/scope/set",
                      "kind": "scope.set", "target": "m2", "before": None, "after": "qq:private:9"})
    assert st.scopes == {"m2": "qq:private:9"}
    raw = StateSerializer().encode(StateView.of(st))
    assert json.loads(raw)["scopes"] == {"m2": "qq:private:9"}
    fast = fast_state(raw)
    assert fast is not None and state_of_fast(fast, "x", None).scopes == {"m2": "qq:private:9"}
    assert state_of_model(StateFile.model_validate_json(raw), "x", None).scopes == {"m2": "qq:private:9"}
    apply_change(st, {"changeId": 2, "at": T.isoformat(), "actor": "operator", "tool": "zcor/scope/set",
                      "kind": "scope.set", "target": "m2", "before": "qq:private:9", "after": None})
    assert st.scopes == {} and b'"scopes"' not in StateSerializer().encode(StateView.of(st))


def test_hiding_follows_the_viewer():
    st = MemoryState([node("m1"), node("m2"), node("m3")], next_id=4, scopes={"m1": "a", "m2": "b"})
    assert not scope.hides(st, "m1")  # nobody viewing: an operator's call sees everything
    with scope.viewing("a"):
        assert [scope.hides(st, i) for i in ("m1", "m2", "m3")] == [False, True, False]
        assert scope.hidden_now(st) == {"m2"} and scope.visible(st, ["m1", "m2", "m3"]) == ["m1", "m3"]
    with scope.viewing(None):  # a model's call in no known session sees only shared memories
        assert scope.hidden_now(st) == {"m1", "m2"}
    assert scope.viewer_of("operator", {"session": "a"}, "session") is scope.ALL
    assert scope.viewer_of("model", {"session": "a"}, "everywhere") is scope.ALL
    assert scope.viewer_of("model", {"session": "a"}, "session") == "a"


@pytest.mark.parametrize("bad", ["nowhere", {"session": ""}, {"session": "a\nb"}, {"session": "x" * 201},
                                 {"session": "a", "more": 1}, None, 3])
def test_a_bad_scope_names_the_field(bad):
    with pytest.raises(InvalidArgument) as e:
        scope.parse_scope(bad)
    assert e.value.field == "scope"
