"""Truncated or hand-broken memory-state.json, synonyms.json and config.json.

At start: zcord exits non-zero with a message that names the file, never says READY, and
leaves every file byte for byte as it was. While running: a broken hand edit is never
replaced by the daemon's own copy (an operator's edit through the socket is refused until
the file is fixed), and the previous good values stay in use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import FakeClock
from zcord.client import ToolError
from zcord.service import Service

pytestmark = pytest.mark.fault


def build(memdir: Path) -> None:
    """A small Memory with history, relationships, custom synonyms and a config file."""
    with Service(memdir, clock=FakeClock()) as svc:
        for i in range(1, 6):
            svc.call("zcor_memory_write", {"title": f"记忆{i}", "content": "内容" * 50, "keywords": ["记忆"],
                                           **({"parentId": "m1"} if i > 1 else {})})
        svc.call("zcor_memory_important", {"id": "m2", "important": True})
        svc.call("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                             "affinity": 10, "reason": "r", "memoryNodeId": "m3"})
        svc.synonyms.replace_groups([["猫", "猫咪"], ["狗", "狗狗"]])
        svc.update_config({"recallBudget": 500})


def files(memdir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(memdir)): p.read_bytes() for p in sorted(memdir.rglob("*"))
            if p.is_file() and p.name != "zcord.lock"}


def notifications(d) -> list[str]:
    """What an exited daemon sent to its NOTIFY_SOCKET."""
    d.notify.setblocking(False)
    out = []
    try:
        while True:
            out.append(d.notify.recv(4096).decode())
    except BlockingIOError:
        return out


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict[str, bytes]:
    memdir = tmp_path_factory.mktemp("good") / "mem"
    build(memdir)
    return files(memdir)


def breakages(good: dict[str, bytes]) -> list[tuple[str, bytes]]:
    state, syn, cfg = good["memory-state.json"], good["synonyms.json"], good["config.json"]
    doc = json.loads(state)
    out = []
    for name, raw in [("memory-state.json", state), ("synonyms.json", syn), ("config.json", cfg)]:
        out += [(name, raw[:len(raw) // 2]), (name, raw[:-2]), (name, b"")]
    out.append(("memory-state.json", b"\xff\xfe" + state))  # not UTF-8

    def edited(change) -> bytes:
        d = json.loads(state)
        change(d)
        return json.dumps(d, ensure_ascii=False).encode()

    out += [
        ("memory-state.json", edited(lambda d: d["nodes"][1].update(parentId="m99"))),
        ("memory-state.json", edited(lambda d: d["nodes"][0].update(parentId="m2"))),  # a cycle m1 → m2 → m1
        ("memory-state.json", edited(lambda d: d["nodes"].append(dict(d["nodes"][0])))),
        ("memory-state.json", edited(lambda d: d["relationships"][0].update(affinity=1000))),
        ("memory-state.json", edited(lambda d: d.update(important=["m1", "m2", "m3", "m4", "m5", "m6"]))),
        ("memory-state.json", edited(lambda d: d.update(version=9))),
        ("memory-state.json", edited(lambda d: d["nodes"][0].update(createdAt="yesterday"))),
        ("memory-state.json", edited(lambda d: d["history"][0].pop("kind"))),
        ("memory-state.json", edited(lambda d: d.update(historySegments=["changes-000000001-000000009.jsonl"]))),
        ("synonyms.json", b'{"version": 1, "groups": [["a", ""]]}'),
        ("synonyms.json", b'{"version": 1, "groups": "a b"}'),
        ("synonyms.json", b'{"version": 1, "groups": [["a", 7]]}'),
        ("config.json", b'{"recallBudget": -5}'),
        ("config.json", b'{"recallBudget": 100, "colour": "blue"}'),
        ("config.json", b'{"llm": {"protocol": "carrier-pigeon"}}'),
        ("config.json", b'[]'),
    ]
    assert doc["version"] == 3
    return out


def test_broken_files_stop_zcord_with_a_message_naming_them(make_daemon, good):
    cases = breakages(good)
    for batch in range(0, len(cases), 8):  # a few daemons at a time: start-up is mostly imports
        running = []
        for name, raw in cases[batch:batch + 8]:
            d = make_daemon()
            d.memdir.mkdir(parents=True)
            for rel, data in good.items():
                (d.memdir / rel).parent.mkdir(parents=True, exist_ok=True)
                (d.memdir / rel).write_bytes(data)
            (d.memdir / name).write_bytes(raw)
            running.append((d, name, raw, files(d.memdir)))
            d.start(wait=False)
        for d, name, raw, before in running:
            code = d.proc.wait(60)
            err = d.stderr()
            case = f"{name} = {raw[:60]!r}…"
            assert code == 1, f"{case}: exit {code}\n{err}"
            assert name in err, f"{case}: the message does not name the file:\n{err}"
            assert "Traceback" not in err, f"{case}:\n{err}"
            assert not any("READY=1" in m for m in notifications(d)), case
            assert files(d.memdir) == before, f"{case}: a file was changed"
            assert not d.sock.exists()
            d.cleanup()
    print(f"\n{len(cases)} broken files refused")


def test_broken_hand_edits_while_running_are_never_overwritten(make_daemon, good):
    d = make_daemon()
    d.memdir.mkdir(parents=True)
    for rel, data in good.items():
        (d.memdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (d.memdir / rel).write_bytes(data)
    d.start()
    with d.client("operator") as op, d.client() as bot:
        assert op.synonym_groups() == [["猫", "猫咪"], ["狗", "狗狗"]]
        broken_syn = good["synonyms.json"][:-10]
        (d.memdir / "synonyms.json").write_bytes(broken_syn)
        # the operator's synonym panel, and the model's tool: both refused, the file kept
        with pytest.raises(ToolError) as refused:
            op.synonyms_set(None, ["鸟", "小鸟"])
        assert refused.value.code == "state_file_invalid" and "synonyms.json" in refused.value.message
        with pytest.raises(ToolError) as refused:
            op.synonyms_set(0, ["猫", "喵"])
        assert "synonyms.json" in refused.value.message
        with pytest.raises(ToolError) as refused:
            bot.call_tool("zcor_synonyms_add", {"terms": ["鸟", "小鸟"]})
        assert refused.value.code == "state_file_invalid" and "synonyms.json" in refused.value.message
        assert (d.memdir / "synonyms.json").read_bytes() == broken_syn
        # the last good groups stay in use for recall
        assert op.synonym_groups() == [["猫", "猫咪"], ["狗", "狗狗"]]
        # the same for config.json: a reload keeps the old values, a config change is refused
        broken_cfg = b'{"recallBudget": 7'
        (d.memdir / "config.json").write_bytes(broken_cfg)
        with pytest.raises(ToolError) as refused:
            op.reload()
        assert "config.json" in refused.value.message
        with pytest.raises(ToolError) as refused:
            op.config_set({"relationshipMemory": False})
        assert refused.value.code == "state_file_invalid" and "config.json" in refused.value.message
        assert (d.memdir / "config.json").read_bytes() == broken_cfg
        assert op.config_get()["recallBudget"] == 500
        # fixed by hand: picked up, and edits work again
        (d.memdir / "synonyms.json").write_bytes(good["synonyms.json"])
        (d.memdir / "config.json").write_bytes(good["config.json"])
        op.synonyms_set(None, ["鸟", "小鸟"])
        assert op.config_set({"relationshipMemory": False})["relationshipMemory"] is False
        assert op.synonym_groups()[-1] == ["鸟", "小鸟"]
    # a broken state file appearing under a running daemon is not its input: it keeps its
    # own state in memory, and its next save replaces the file atomically as always
    assert d.stop() == 0
    assert os.path.exists(d.memdir / "memory-state.json")
