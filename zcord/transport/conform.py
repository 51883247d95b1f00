"""Whether an answer is what its result model (zcord.transport.results) says it is.

The result models are TypedDicts: they type the code, never the wire, so nothing held the
dicts the Service builds to them. `problems(model, value)` walks a value against a model
(a TypedDict's required keys present, no key it does not name, each value of its type;
lists, dicts, unions, literals, `Any`) and names every place that differs. The daemon runs
it on every answer when `ZCOR_CHECK_RESULTS` is set in its environment (the test suite sets
it: a result that differs from its model is then an internal error there); otherwise it
costs nothing.
"""

from __future__ import annotations

import os
import types
import typing
from collections.abc import Iterator
from typing import Annotated, Any, Literal, NotRequired, Required, Union, is_typeddict

CHECK_ENV = "ZCOR_CHECK_RESULTS"


def target() -> str:
    """Where this process's answers are checked to (`ZCOR_CHECK_RESULTS`): "" not checked
    (unset or 0), "1" a difference fails the request, else the file the differences are
    listed in."""
    value = os.environ.get(CHECK_ENV, "")
    return "" if value == "0" else value


_HINTS: dict[Any, tuple[dict[str, Any], frozenset[str]]] = {}


def _hints(model: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """A TypedDict's keys' types and its required keys. Read from the hints, not from
    `__required_keys__`: under `from __future__ import annotations` Python 3.11 does not see
    NotRequired in the strings, and calls every key required."""
    kept = _HINTS.get(model)
    if kept is None:
        hints = typing.get_type_hints(model, include_extras=True)
        total = getattr(model, "__total__", True)
        required = frozenset(k for k, tp in hints.items()
                             if typing.get_origin(tp) is Required or total and typing.get_origin(tp) is not NotRequired)
        kept = _HINTS[model] = (hints, required)
    return kept


def problems(model: Any, value: Any, where: str = "result") -> list[str]:
    """Every place `value` differs from `model`, as "where: what" sentences (empty: it fits)."""
    return list(_walk(model, value, where))


def _walk(tp: Any, value: Any, where: str) -> Iterator[str]:
    if tp is Any or tp is object:
        return
    origin = typing.get_origin(tp)
    if origin in (NotRequired, Required, Annotated):
        yield from _walk(typing.get_args(tp)[0], value, where)
        return
    if is_typeddict(tp):
        if not isinstance(value, dict):
            yield f"{where}: an object ({tp.__name__}) was expected, not {type(value).__name__}"
            return
        hints, required = _hints(tp)
        for key in sorted(required):
            if key not in value:
                yield f"{where}: {key!r} is missing ({tp.__name__})"
        for key, v in value.items():
            if key not in hints:
                yield f"{where}: {key!r} is not a key of {tp.__name__}"
            else:
                yield from _walk(hints[key], v, f"{where}.{key}")
        return
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if not any(not list(_walk(o, value, where)) for o in options):
            yield f"{where}: {value!r:.80} is none of {tp}"
        return
    if origin is Literal:
        if value not in typing.get_args(tp):
            yield f"{where}: {value!r:.80} is not one of {typing.get_args(tp)}"
        return
    if tp is None or tp is type(None):
        if value is not None:
            yield f"{where}: null was expected, not {value!r:.80}"
        return
    if origin is list:
        if not isinstance(value, list):
            yield f"{where}: a list was expected, not {type(value).__name__}"
            return
        (item,) = typing.get_args(tp) or (Any,)
        for k, v in enumerate(value):
            yield from _walk(item, v, f"{where}[{k}]")
        return
    if origin is dict:
        if not isinstance(value, dict):
            yield f"{where}: an object was expected, not {type(value).__name__}"
            return
        _key, item = typing.get_args(tp) or (str, Any)
        for k, v in value.items():
            yield from _walk(item, v, f"{where}[{k!r}]")
        return
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            yield f"{where}: a number was expected, not {value!r:.80}"
        return
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            yield f"{where}: an integer was expected, not {value!r:.80}"
        return
    if isinstance(tp, type):
        if not isinstance(value, tp):
            yield f"{where}: {tp.__name__} was expected, not {value!r:.80}"
        return
    raise TypeError(f"conform: no rule for the type {tp!r} at {where}")
