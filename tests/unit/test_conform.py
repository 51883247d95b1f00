"""zcord.transport.conform: an answer against its result model names every difference (a
missing key, a key the model does not name, a value of another type, deep inside lists and
nested models), and the public config's model follows zcord.core.config.Config."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from zcord.core.config import Config, LlmConfig
from zcord.transport import results as R
from zcord.transport.conform import problems


class Inner(TypedDict):
    id: str
    n: int


class Outer(TypedDict):
    items: list[Inner]
    total: int
    kind: Literal["a", "b"]
    note: NotRequired[str | None]
    extra: NotRequired[dict[str, float]]
    raw: Any


def good() -> dict[str, Any]:
    return {"items": [{"id": "m1", "n": 1}], "total": 1, "kind": "a", "raw": object()}


def test_a_value_that_fits_has_no_problems():
    assert problems(Outer, good()) == []
    assert problems(Outer, {**good(), "note": None, "extra": {"x": 1, "y": 2.5}}) == []


def test_each_difference_is_named_where_it_is():
    assert problems(Outer, {k: v for k, v in good().items() if k != "total"}) == ["result: 'total' is missing (Outer)"]
    assert problems(Outer, {**good(), "surplus": 1}) == ["result: 'surplus' is not a key of Outer"]
    assert problems(Outer, {**good(), "items": [{"id": "m1", "n": "1"}]}) == \
        ["result.items[0].n: an integer was expected, not '1'"]
    assert problems(Outer, {**good(), "total": True}) == ["result.total: an integer was expected, not True"]
    assert problems(Outer, {**good(), "kind": "c"}) == ["result.kind: 'c' is not one of ('a', 'b')"]
    assert problems(Outer, {**good(), "note": 3}) == ["result.note: 3 is none of str | None"]
    assert problems(Outer, {**good(), "extra": {"x": "1"}}) == ["result.extra['x']: a number was expected, not '1'"]
    assert problems(Outer, [good()]) == ["result: an object (Outer) was expected, not list"]


def test_the_public_config_model_names_every_key_the_config_has():
    public = Config().public(api_key_set=True, withheld="a reason")
    assert set(R.Config.__annotations__) == {f.alias or n for n, f in Config.model_fields.items()}
    assert set(R.LlmConfigResult.__annotations__) >= {f.alias or n for n, f in LlmConfig.model_fields.items()}
    assert problems(R.Config, public) == []
    assert problems(R.Config, {**public, "recallBudget": "6000"}) != []
