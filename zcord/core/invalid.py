"""pydantic's validation errors said as an operator or a model understands them.

pydantic words its errors for developers ("Input should be less than or equal to 100",
"unable to parse string as an integer"). A call's refusal instead says what the field must
be and what it got: "affinity must be between -100 and 100; got 150".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def shown(value: Any, limit: int = 40) -> str:
    """A value as JSON (as it was sent), cut to `limit` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate shown escaped


def bounds(model: type[BaseModel] | None, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    """The (lowest, highest) the number field at `loc` of `model` allows (None where open);
    nested models are followed (`llm.timeoutSeconds`)."""
    lo = hi = None
    for part in loc:
        field = None if model is None else next(
            (f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        if field is None:
            return None, None
        lo = hi = None
        for m in field.metadata:
            lo = getattr(m, "ge", lo)
            hi = getattr(m, "le", hi)
        ann = field.annotation
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return lo, hi


def what_it_must_be(error: Mapping[str, Any], model: type[BaseModel] | None = None) -> str | None:
    """`must be …; got …` (or `is required`, …) for one of pydantic's error dicts; None for
    a rule of the model's own (its message is already in words)."""
    got: Any = error.get("input")  # any JSON value (or none); len() is taken only for the kinds that have one
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind in ("less_than_equal", "greater_than_equal", "less_than", "greater_than"):
        lo, hi = bounds(model, tuple(error["loc"]))
        if lo is not None and hi is not None:
            return f"must be between {lo} and {hi}; got {shown(got)}"
        words = {"less_than_equal": "at most", "greater_than_equal": "at least",
                 "less_than": "less than", "greater_than": "more than"}[kind]
        limit = next(iter(ctx.values()), "?")
        return f"must be {words} {limit}; got {shown(got)}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"must be a whole number; got {shown(got)}"
    if kind in ("float_parsing", "float_type"):
        return f"must be a number; got {shown(got)}"
    if kind in ("bool_parsing", "bool_type"):
        return f"must be true or false; got {shown(got)}"
    if kind == "string_unicode":
        return f"must be valid Unicode text (it holds a lone surrogate); got {shown(got)}"
    if kind == "string_type":
        return f"must be text (a JSON string); got {shown(got)}"
    if kind in ("list_type", "tuple_type", "set_type"):
        return f"must be a list (a JSON array); got {shown(got)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"must be a JSON object; got {shown(got)}"
    if kind == "string_too_short":
        n = ctx.get("min_length", 1)
        return "must not be empty" if n == 1 else f"must be at least {n:,} characters long; got {len(got):,}"
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length'):,} characters long; got {len(got):,}"
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} items; got {ctx.get('actual_length', len(got))}"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} items; got {ctx.get('actual_length', '?')}"
    if kind in ("literal_error", "enum"):
        return f"must be {ctx.get('expected')}; got {shown(got)}"
    if kind == "extra_forbidden":
        return "is not a known parameter"
    msg = str(error.get("msg", ""))
    if msg.startswith("Input should be "):
        return f"must be {msg.removeprefix('Input should be ')}; got {shown(got)}"
    return None


def sentence(name: str, error: Mapping[str, Any], model: type[BaseModel] | None = None) -> str:
    """`affinity must be between -100 and 100; got 150`; a rule of the model's own (a
    `ValueError` in a validator) as `name: its message`."""
    said = what_it_must_be(error, model)
    if said is None:
        msg = str(error.get("msg", "")).removeprefix("Value error, ")
        return f"{name}: {msg}" if name else msg
    return f"{name} {said}" if name else f"the value {said}"
