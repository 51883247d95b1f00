"""Hypothesis strategies: JSON values, hostile strings, and tool arguments that are mostly
almost right (so calls get past the first check) with one or more things wrong."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from zcord.service.inputs import MAX_CONTENT, MAX_SOURCE, MAX_TITLE
from zcord.service.tools import TOOLS

OMIT = object()

HOSTILE_STRINGS = [
    "", " ", "\t\n", "\x00", "a\x00b", "\x00" * 50, "\ud800", "x\udfffy", "\ud83d", "\u202e反转\u202c",
    "\u200f\u061c\u200e", "\ufeff", "\u200b", "ｍ１", "Ⅻ", "ß", "İ", "😀" * 10, "\U0010ffff", "..",
    "../memory-state.json", "/etc/passwd", "backups/x.json", "%2e%2e", "．．", "\\", "a/b", "NaN", "null",
    "true", "-0", "1e999", "2026-01-01T00:00:00", "2026-01-01T00:00:00+08:00", "9999-12-31T23:59:59+14:00",
    "0001-01-01T00:00:00-14:00", "2026-02-30T00:00:00Z", "m1", "m0", "m-1", "M1", " m1 ", "m01", "m" + "9" * 400,
    "{}", "[]", "<script>", "'; DROP TABLE", "x" * MAX_TITLE, "x" * (MAX_TITLE + 1), "y" * MAX_CONTENT,
    "y" * (MAX_CONTENT + 1), "z" * (MAX_SOURCE + 1), "字" * 2001,
]

hostile_text = st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=30),
                         st.text(st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=5))
numbers = st.one_of(st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from([
    0, 1, -1, 5, 100, 101, -100, -101, 2**31, 2**63, -(2**63) - 1, 10**4000]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, 1.0, 100.0, -0.0]))
scalars = st.one_of(st.none(), st.booleans(), numbers, hostile_text)
json_values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=6), kids, max_size=4)), max_leaves=12)


def nested(depth: int, leaf: Any = "x") -> Any:
    out = leaf
    for _ in range(depth):
        out = [out]
    return out


deep = st.integers(min_value=40, max_value=900).map(nested)

IDS = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m999"]
PERSONS = ["qq:1", "qq:2", "qq:3", "nobody"]
TIMES = ["2026-01-01T00:00:00+08:00", "2020-01-01T00:00:00Z", "2030-01-01T00:00:00-05:00",
         "2026-01-01T00:00:00", "yesterday", "2026-13-01T00:00:00+08:00"]

words = st.lists(st.one_of(st.sampled_from(["猫咪", "火锅", "记忆", "Apple", "ＡＰＰＬＥ"]), hostile_text), max_size=6)
node_id = st.one_of(st.sampled_from(IDS), hostile_text)
prose = st.one_of(st.sampled_from(["记忆", "今天吃了火锅", "a\u202eb"]), hostile_text)


def field_values(name: str, backups: list[str]) -> st.SearchStrategy:
    """Values for one parameter: mostly plausible for its name, sometimes anything."""
    plausible = {
        "id": node_id, "parentId": st.one_of(st.none(), node_id), "replacementId": node_id,
        "memoryNodeId": st.one_of(st.none(), node_id),
        "ids": st.lists(node_id, max_size=5),
        "title": prose, "content": prose, "reason": prose, "name": prose, "relationship": prose,
        "sourceMessage": st.one_of(st.none(), prose),
        "keywords": st.one_of(st.none(), words), "aliases": st.one_of(st.none(), words), "terms": words,
        "from": st.one_of(st.none(), st.sampled_from(TIMES), hostile_text),
        "to": st.one_of(st.none(), st.sampled_from(TIMES), hostile_text),
        "limit": st.one_of(st.integers(-3, 130), numbers), "offset": st.one_of(st.integers(-3, 50), numbers),
        "affinity": st.one_of(st.integers(-130, 130), numbers),
        "minAffinity": st.one_of(st.none(), st.integers(-130, 130)),
        "maxAffinity": st.one_of(st.none(), st.integers(-130, 130)),
        "important": st.one_of(st.booleans(), st.sampled_from([0, 1, "true", None])),
        "includeSuperseded": st.one_of(st.booleans(), st.sampled_from([0, "false"])),
        "personId": st.one_of(st.sampled_from(PERSONS), hostile_text),
        "backupFile": st.one_of(st.sampled_from(backups or ["none.json"]), st.sampled_from(
            ["..", ".", "../memory-state.json", "/etc/passwd", "escape.json", "loop.json", "inside.json",
             "subdir", "a\x00b.json", "memory-state.json"]), hostile_text),
    }.get(name, json_values)
    return st.one_of(plausible, plausible, plausible, json_values, deep)


@st.composite
def tool_arguments(draw, tool: str, backups: list[str]) -> Any:
    """An arguments value for `tool`: usually an object, each parameter present or not."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.one_of(json_values, deep))  # not even an object
    props = TOOLS[tool].input_schema.get("properties", {})
    args: dict[str, Any] = {}
    for name in props:
        value = draw(st.one_of(st.just(OMIT), field_values(name, backups)))
        if value is not OMIT:
            args[name] = value
    if draw(st.integers(0, 9)) == 0:
        args[draw(st.sampled_from(["extra", "parent_id", "ID", "\ud800", "", "title "]))] = draw(json_values)
    return args
