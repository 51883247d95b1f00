"""Every tool's arguments, generated (hypothesis), in-process against one Service.

For each call: either a result, or a ZcorError whose `field` names the parameter at fault
(and whose message mentions it, for invalid_argument) — never an internal error. A refused
call changes nothing: not the files (memory-state.json, synonyms.json, config.json,
byte for byte), not the Memory in RAM; and it is still recorded in the operation log.
The operator methods that take parameters (synonym groups, config, recall) get the same.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import FakeClock
from tests.fuzz.strategies import json_values, tool_arguments
from zcord.core.errors import ZcorError
from zcord.service import Service
from zcord.service.tools import TOOLS

pytestmark = pytest.mark.fuzz

EXAMPLES = int(os.environ.get("ZCOR_FUZZ_EXAMPLES", "150"))
COUNTS: Counter = Counter()
FILES = ("memory-state.json", "synonyms.json", "config.json")
BACKUPS: list[str] = []  # names of real backups, for plausible restore arguments


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    """A Memory with a tree, superseded and important nodes, linked relationships, and a
    backups/ directory holding a real backup, symlinks out of it, a loop and a subdirectory."""
    memdir = tmp_path_factory.mktemp("fuzz") / "mem"
    s = Service(memdir, clock=FakeClock()).open()
    # the bot's backup interval is not an argument's fault: off here (tests/fault/test_limits.py covers it)
    s.update_config({"llm": {"baseUrl": "http://127.0.0.1:9/v1", "model": "none", "timeoutSeconds": 2},
                     "botBackupIntervalSeconds": 0, "botRestoreIntervalSeconds": 0})
    for i in range(1, 9):
        s.call("zcor_memory_write", {"title": f"记忆{i} 猫咪", "content": f"内容{i}", "keywords": ["记忆"],
                                     **({"parentId": f"m{i // 2}"} if i > 1 else {})})
    s.call("zcor_memory_supersede", {"ids": ["m8"], "replacementId": "m7", "reason": "旧"})
    s.call("zcor_memory_important", {"id": "m2", "important": True})
    s.call("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友", "affinity": 10,
                                       "reason": "r", "memoryNodeId": "m3"})
    s.call("zcor_relationship_write", {"personId": "qq:2", "name": "小红", "relationship": "同学", "affinity": -5,
                                       "reason": "r"})
    real = s.call("zcor_memory_backup")["backupFile"]
    b = s.store.backups
    os.symlink("../memory-state.json", b / "escape.json")
    os.symlink("/etc/passwd", b / "passwd.json")
    os.symlink("loop.json", b / "loop.json")
    os.symlink(real, b / "inside.json")
    (b / "subdir").mkdir()
    BACKUPS.append(real)
    yield s
    s.close()
    # the Memory the fuzzing left behind still opens: valid state, consistent log
    with Service(memdir) as again:
        logged = {c["changeId"] for r in again.oplog.query([], None, None, 10**9, 0)[0]
                  for c in r["changes"] if c.get("changeId")}
        assert logged == {c.change_id for c in again.store.iter_history(again.state)}


@pytest.fixture(scope="module", autouse=True)
def report():
    """Says how many examples ran (shown with pytest -s)."""
    yield
    total = sum(v for k, v in COUNTS.items() if k != "refused")
    print(f"\nfuzzed tool and method calls: {total} ({COUNTS['refused']} tool calls refused); "
          f"per tool: {dict(sorted((k, v) for k, v in COUNTS.items() if k.startswith('zcor_')))}")


def files(svc: Service) -> dict[str, bytes]:
    return {n: (svc.dir / n).read_bytes() for n in FILES if (svc.dir / n).exists()}


def memory(svc: Service) -> tuple:
    st_ = svc.state
    return (dict(st_.nodes), list(st_.important), dict(st_.relationships), st_.next_id, st_.next_change_id(),
            [list(g) for g in svc.synonyms.groups])


def top(field: str) -> str:
    return field.split(".")[0].split("[")[0]


def check_refusal(e: ZcorError, allowed: set[str], what: str) -> None:
    assert e.code != "internal_error", f"{what}: {e.message}"
    if e.code == "provider_error":  # the search's LLM: not an argument's fault
        return
    assert e.field is not None, f"{what}: {e.code} names no field: {e.message}"
    assert top(e.field) in allowed, f"{what}: field {e.field!r} is not a parameter: {e.message}"
    if e.code == "invalid_argument":
        assert top(e.field) in e.message, f"{what}: the message does not mention {e.field}: {e.message}"


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_tool_arguments(svc, tool):
    params = set(TOOLS[tool].input_schema.get("properties", {})) | {"arguments"}
    mutates = TOOLS[tool].mutates

    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(args=tool_arguments(tool, BACKUPS), actor=st.sampled_from(["model", "operator"]))
    def run(args, actor):
        COUNTS[tool] += 1
        before_files, before_mem = files(svc), memory(svc)
        logged = svc.oplog.count()
        try:
            result = svc.call(tool, args, actor=actor)
        except ZcorError as e:
            given_names = {str(k) for k in args} if isinstance(args, dict) else set()
            check_refusal(e, params | given_names, f"{tool}({args!r:.200})")
            assert files(svc) == before_files, f"refused {tool} changed a file"
            assert memory(svc) == before_mem, f"refused {tool} changed the Memory"
            COUNTS["refused"] += 1
        else:
            assert isinstance(result, dict)
            if not mutates:
                assert files(svc) == before_files and memory(svc) == before_mem, f"{tool} is a read"
        assert svc.oplog.count() == logged + 1, "every call is recorded, refused ones too"

    run()


def test_operator_methods_arguments(svc):
    calls = {
        "synonyms": lambda v: svc.set_synonym_group(v.get("index"), v.get("terms")),
        "config": lambda v: svc.update_config(v.get("patch")),
        "recall": lambda v: svc.recall(v.get("session"), v.get("events")),
        "context": lambda v: svc.context(v.get("session")),
        "explain": lambda v: svc.recall_explain(v.get("text")),
    }
    allowed = {"index", "terms", "patch", "session", "events", "text", "llm", "recallBudget",
               "relationshipMemory", "arguments"}
    value = st.one_of(json_values, st.integers(-2, 2000), st.lists(st.text(max_size=4), max_size=4),
                      st.lists(st.fixed_dictionaries({"text": json_values, "origin": st.sampled_from(
                          ["external", "internal", "x", 1])}), max_size=3),
                      st.fixed_dictionaries({}, optional={"recallBudget": json_values, "relationshipMemory":
                                                          json_values, "llm": json_values, "x": json_values}))
    args = st.dictionaries(st.sampled_from(["index", "terms", "patch", "session", "events", "text"]), value,
                           max_size=3)

    @settings(max_examples=EXAMPLES * 2, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(which=st.sampled_from(sorted(calls)), v=args)
    def run(which, v):
        COUNTS["operator methods"] += 1
        before_files = files(svc)
        try:
            calls[which](v)
        except ZcorError as e:
            patch = v.get("patch")
            named = {str(k) for k in patch} if isinstance(patch, dict) else set()  # an unknown setting's name
            check_refusal(e, allowed | named, f"{which}({v!r:.200})")
            assert files(svc) == before_files
    run()
    # leave the config as the other tests expect it
    svc.update_config({"recallBudget": 6000, "relationshipMemory": True})
