"""SIGKILL of the real daemon at random instants during mixed writes over the socket.

One Memory directory lives through every trial. A trial starts zcord (ready at READY=1),
sends a random mix of calls one at a time over two connections — the bot's and an
operator's: creates, updates, merges, supersedes, deletes, important marks, relationship
writes and deletes, backups, restores, synonym edits (`zcor_synonyms_add` and
`zcor/synonyms/set`) and a few reads — and SIGKILLs the process at a random instant,
usually with a call in flight. A reply that arrived before the kill is an acknowledgement.
The next start must then load a state that

- parses and validates (zcord's own parser, invariants included),
- holds the change of every acknowledged call in its change history,
- equals its change history folded from the start (a restore replays its backup file),
- agrees with the operation log: every changeId of the state's history (sealed segments
  under history/ included) is logged exactly once, nothing else is;

and synonyms.json must hold every acknowledged synonym edit.

The state is memory-state.json (a snapshot) plus the changes journaled in operations.jsonl
after it. The daemon runs with a snapshot every 3 changes, so kills also land while a
snapshot is being written in the background (their temporary files are counted).

ZCOR_FAULT_TRIALS overrides the number of trials (default 100).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.fault.wire import Wire
from tests.persisted import read_persisted
from zcord.core import protocol as P
from zcord.core.layout import default_synonyms_bytes
from zcord.core.parsing import parse_state
from zcord.retrieval.synonyms import parse_groups

pytestmark = pytest.mark.fault

TRIALS = int(os.environ.get("ZCOR_FAULT_TRIALS", "100"))
PERSONS = [f"qq:{n}" for n in range(1, 13)]
WORDS = ["猫咪", "火锅", "电影", "篮球", "生日", "考试", "旅行", "咖啡"]


def canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


# -- the Memory on disk ---------------------------------------------------------------------------


class Disk:
    """What a check reads from the Memory directory (the daemon may be running: it only
    ever replaces files by rename and appends whole lines to the log)."""

    def __init__(self, memdir: Path):
        raw = (memdir / "memory-state.json").read_bytes()
        parse_state(raw, "memory-state.json", memdir / "history")  # zcord's validation, invariants
        snapshot = json.loads(raw)
        self.changes: list[dict] = []
        for seg in snapshot["historySegments"]:
            for line in (memdir / "history" / seg).read_bytes().splitlines():
                self.changes.append(json.loads(line))
        self.changes += snapshot["history"]
        self.log = [json.loads(line) for line in (memdir / "operations.jsonl").read_bytes().splitlines()]
        # the journal: every change logged after the snapshot's last one, in log order
        last = self.changes[-1]["changeId"] if self.changes else 0
        self.changes += [c for rec in self.log for c in rec["changes"] if c.get("changeId", 0) > last]
        # what zcord itself loads: the snapshot with the journal replayed
        st = read_persisted(memdir)
        self.state = {"nodes": [n.dump() for n in st.nodes.values()], "important": list(st.important),
                      "relationships": [r.dump() for r in st.relationships.values()],
                      "historySegments": snapshot["historySegments"]}
        self.synonyms = parse_groups((memdir / "synonyms.json").read_bytes(), "synonyms.json")


def fold(changes: list[dict], backups: Path) -> tuple[dict, dict, list]:
    """Nodes, relationships and the important list that the change history adds up to."""
    nodes: dict[str, dict] = {}
    rels: dict[str, dict] = {}
    important: list[str] = []
    for c in changes:
        kind, target = c["kind"], c.get("target")
        if kind in ("node.create", "node.update", "node.supersede"):
            assert (kind == "node.create") == (target not in nodes), f"change {c['changeId']}: {kind} of {target}"
            nodes[target] = c["after"]
        elif kind == "node.delete":
            assert nodes.pop(target) == c["before"], f"change {c['changeId']} deletes another {target}"
        elif kind in ("relationship.create", "relationship.update"):
            rels[target] = c["after"]
        elif kind == "relationship.delete":
            assert rels.pop(target) == c["before"]
        elif kind.startswith("important."):
            assert c["before"] == important, f"change {c['changeId']}: important list out of step"
            important = c["after"]
        elif kind == "state.restore":
            b = json.loads((backups / c["after"]["restoredFrom"]).read_bytes())
            nodes = {n["id"]: n for n in b["nodes"]}
            rels = {r["personId"]: r for r in b["relationships"]}
            important = b["important"]
        else:
            raise AssertionError(f"change {c['changeId']} has an unexpected kind {kind}")
    return nodes, rels, important


def apply_synonym_change(groups: list[list[str]], record: dict) -> None:
    for c in record["changes"]:
        if c["kind"] == "synonyms.add":
            groups.append(c["after"])
        elif c["kind"] == "synonyms.update":
            i = record["params"]["index"]
            assert groups[i] == c["before"]
            groups[i] = c["after"]
        elif c["kind"] == "synonyms.remove":
            i = record["params"]["index"]
            assert groups[i] == c["before"]
            del groups[i]


# -- the workload ---------------------------------------------------------------------------------


class Workload:
    """Random calls that mostly make sense for the Memory as the client last saw it."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.n = 0
        self.current: list[str] = []
        self.important: list[str] = []
        self.persons: list[str] = []
        self.backups: list[str] = []
        self.syn_count = 0

    def see(self, disk: Disk, memdir: Path) -> None:
        st = disk.state
        self.current = [n["id"] for n in st["nodes"] if n["supersededBy"] is None]
        self.important = list(st["important"])
        self.persons = [r["personId"] for r in st["relationships"]]
        self.backups = sorted(p.name for p in (memdir / "backups").iterdir())
        self.syn_count = len(disk.synonyms)

    def some(self, k: int) -> list[str]:
        return self.rng.sample(self.current, k)

    def next(self) -> tuple[str, str, dict]:
        """(connection, method, params); connection is "bot" or "op"."""
        r = self.rng
        self.n += 1
        n = self.n
        who = r.choice(["bot", "bot", "op"])

        def tool(name: str, args: dict) -> tuple[str, str, dict]:
            return who, "tools/call", {"name": name, "arguments": args}

        roll = r.random()
        cur = self.current
        if roll < 0.22 or len(cur) < 4:
            args = {"title": f"{r.choice(WORDS)}记忆{n}", "content": f"内容{n} " + "文" * r.randint(0, 1500)}
            if r.random() < 0.95:  # derived keywords wait for jieba, which loads after READY
                args["keywords"] = [r.choice(WORDS), f"k{n}"]
            if cur and r.random() < 0.4:
                args["parentId"] = r.choice(cur)
            if r.random() < 0.3:
                args["sourceMessage"] = f"原话{n}"
            return tool("zcor_memory_write", args)
        if roll < 0.36:
            args = {"id": r.choice(cur), "title": f"更新{n}", "content": f"新内容{n} " + "字" * r.randint(0, 1500)}
            if r.random() < 0.2:
                args["parentId"] = None
            return tool("zcor_memory_write", args)
        if roll < 0.43:
            args = {"ids": self.some(r.choice([2, 2, 3])), "title": f"合并{n}", "content": f"合并内容{n}",
                    "reason": f"重复{n}"}
            if r.random() < 0.9:
                args["keywords"] = [f"合并{n}"]
            return tool("zcor_memory_merge", args)
        if roll < 0.49:
            ids = self.some(r.choice([2, 3]))
            return tool("zcor_memory_supersede", {"ids": ids[1:], "replacementId": ids[0], "reason": f"过时{n}"})
        if roll < 0.53:
            return tool("zcor_memory_delete", {"id": r.choice(cur)})
        if roll < 0.62:
            if self.important and r.random() < 0.3:
                return tool("zcor_memory_important", {"id": r.choice(self.important), "important": False})
            return tool("zcor_memory_important", {"id": r.choice(cur), "important": True})
        if roll < 0.71:
            args = {"personId": r.choice(PERSONS), "name": f"人{n}", "relationship": "朋友",
                    "affinity": r.randint(-100, 100), "reason": f"证据{n}"}
            if r.random() < 0.5:
                args["memoryNodeId"] = r.choice(cur) if r.random() < 0.8 else None
            if r.random() < 0.3:
                args["aliases"] = [f"别名{n}"]
            return tool("zcor_relationship_write", args)
        if roll < 0.74 and self.persons:
            return tool("zcor_relationship_delete", {"personId": r.choice(self.persons)})
        if roll < 0.76:
            return tool("zcor_memory_backup", {})
        if roll < 0.785 and self.backups:
            return tool("zcor_memory_restore", {"backupFile": r.choice(self.backups[-6:])})
        if roll < 0.815:
            return tool("zcor_synonyms_add", {"terms": [f"同义{n}甲", f"同义{n}乙", f"同义{n}丙"][:r.choice([2, 3])]})
        if roll < 0.86:
            which = r.random()
            if which < 0.5 or self.syn_count < 2:
                params = {"index": None, "terms": [f"组{n}甲", f"组{n}乙"]}
            elif which < 0.8:
                params = {"index": self.syn_count - 1, "terms": [f"换{n}甲", f"换{n}乙"]}
            else:
                params = {"index": self.syn_count - 1, "terms": None}
            return "op", "zcor/synonyms/set", params
        reads = [("zcor_memory_query", {"keywords": [r.choice(WORDS)], "limit": 5}),
                 ("zcor_memory_history", {"keywords": ["记忆"], "limit": 5}),
                 ("zcor_memory_read", {"id": r.choice(cur)}),
                 ("zcor_memory_children", {})]
        return tool(*r.choice(reads))

    def refresh(self, op: Wire) -> None:
        """After a restore the client no longer knows which nodes exist: ask."""
        res = tool_result(op.call("tools/call", {"name": "zcor_memory_query", "arguments": {"limit": 100}}))
        self.current = [n["id"] for n in res["items"]]
        res = tool_result(op.call("tools/call", {"name": "zcor_relationship_query", "arguments": {"limit": 100}}))
        self.persons = [r["personId"] for r in res["items"]]
        self.important = []


def tool_result(reply: dict | None) -> dict:
    assert reply is not None and "result" in reply, reply
    assert not reply["result"]["isError"], reply
    return reply["result"]["structuredContent"]


# -- expectations from acknowledged replies ----------------------------------------------------------


class Acked:
    """Expectations collected from acknowledged replies, checked against the next start."""

    def __init__(self) -> None:
        self.changes: list[tuple[str, str | None, str]] = []  # (kind, target, canonical after)
        self.supersedes: list[tuple[str, str]] = []  # (node, by)
        self.deletes: list[tuple[str, str]] = []  # (kind, target)
        self.restores: list[tuple[str, str]] = []  # (restoredFrom, automatic backup)
        self.files: list[str] = []  # backups
        self.synonyms: list[tuple[str, str]] = []  # (kind, canonical terms) in the log
        self.count = Counter()

    def take(self, method: str, params: dict, reply: dict, work: Workload) -> None:
        """Record what an acknowledged reply promises; update the client's view."""
        if "error" in reply:
            err = reply["error"]
            assert err["code"] != P.INTERNAL_ERROR, reply
            assert err["code"] == P.ZCOR_ERROR and err["data"]["code"] != "internal_error", reply
            self.count["refused"] += 1
            return
        result = reply["result"]
        if method == "zcor/synonyms/set":
            kind = ("synonyms.add" if params["index"] is None else
                    "synonyms.remove" if params["terms"] is None else "synonyms.update")
            self.synonyms.append((kind, canon(params["terms"])))
            work.syn_count = result["groups"]
            self.count["zcor/synonyms/set"] += 1
            return
        name, args = params["name"], params["arguments"]
        if result["isError"]:
            assert result["structuredContent"]["code"] != "internal_error", result
            self.count["refused"] += 1
            return
        res = result["structuredContent"]
        self.count[name] += 1
        if name == "zcor_memory_write":
            # the result is the node, with `created` and, for a near-repeat, `similar` and `note`
            node = {k: v for k, v in res.items() if k not in ("created", "similar", "note")}
            self.changes.append(("node.create" if res["created"] else "node.update", res["id"], canon(node)))
            if res["created"]:
                work.current.append(res["id"])
        elif name == "zcor_memory_merge":
            self.changes.append(("node.create", res["id"], canon(res["node"])))
            self.supersedes += [(i, res["id"]) for i in res["superseded"]]
            work.current = [i for i in work.current if i not in res["superseded"]] + [res["id"]]
            work.important = res["importantIds"]
        elif name == "zcor_memory_supersede":
            self.supersedes += [(i, res["replacementId"]) for i in res["superseded"]]
            work.current = [i for i in work.current if i not in res["superseded"]]
            work.important = res["importantIds"]
        elif name == "zcor_memory_delete":
            self.deletes.append(("node.delete", res["id"]))
            work.current = [i for i in work.current if i != res["id"]]
            work.important = [i for i in work.important if i != res["id"]]
        elif name == "zcor_memory_important":
            if res["changed"]:
                kind = "important.mark" if args["important"] else "important.unmark"
                self.changes.append((kind, res["id"], canon(res["importantIds"])))
            work.important = res["importantIds"]
        elif name == "zcor_relationship_write":
            rel = {k: v for k, v in res.items() if k != "created"}
            kind = "relationship.create" if res["created"] else "relationship.update"
            self.changes.append((kind, res["personId"], canon(rel)))
            if res["personId"] not in work.persons:
                work.persons.append(res["personId"])
        elif name == "zcor_relationship_delete":
            self.deletes.append(("relationship.delete", res["personId"]))
            work.persons = [p for p in work.persons if p != res["personId"]]
        elif name == "zcor_memory_backup":
            self.files.append(res["backupFile"])
            work.backups.append(res["backupFile"])
        elif name == "zcor_memory_restore":
            self.restores.append((res["restoredFrom"], res["backupFile"]))
            self.files.append(res["backupFile"])
            work.backups.append(res["backupFile"])
        elif name == "zcor_synonyms_add":
            if res["added"]:
                self.synonyms.append(("synonyms.add", canon(res["terms"])))
                work.syn_count += 1

    def check(self, disk: Disk, memdir: Path) -> None:
        changes = {(c["kind"], c.get("target"), canon(c["after"])) for c in disk.changes}
        for exp in self.changes:
            assert exp in changes, f"acknowledged change lost: {exp}"
        supersedes = {(c["target"], c["after"]["supersededBy"]) for c in disk.changes if c["kind"] == "node.supersede"}
        for exp in self.supersedes:
            assert exp in supersedes, f"acknowledged supersede lost: {exp}"
        deletes = {(c["kind"], c["target"]) for c in disk.changes}
        for exp in self.deletes:
            assert exp in deletes, f"acknowledged delete lost: {exp}"
        restores = {(c["after"]["restoredFrom"], c["before"]["backupFile"]) for c in disk.changes
                    if c["kind"] == "state.restore"}
        for exp in self.restores:
            assert exp in restores, f"acknowledged restore lost: {exp}"
        for name in self.files:
            parse_state((memdir / "backups" / name).read_bytes(), name)
        logged = {(c["kind"], canon(c["after"])) for rec in disk.log for c in rec["changes"]
                  if c["kind"].startswith("synonyms.")}
        for exp in self.synonyms:
            assert exp in logged, f"acknowledged synonym edit not logged: {exp}"


# -- the trials -----------------------------------------------------------------------------------


class Checker:
    """Verifies the Memory after every start; synonym edits are checked since the last check."""

    def __init__(self, memdir: Path):
        self.memdir = memdir
        self.synonyms = parse_groups(default_synonyms_bytes(), "synonyms.json")
        self.log_records_seen = 0
        self.unlogged_synonym_edits = 0
        self.segments = 0

    def check(self, trial: int, acked: Acked, inflight: tuple[str, str, dict] | None) -> Disk:
        memdir = self.memdir
        disk = Disk(memdir)
        where = f"after trial {trial}"
        # the state is its history, folded
        nodes, rels, important = fold(disk.changes, memdir / "backups")
        state_nodes = {n["id"]: n for n in disk.state["nodes"]}
        if state_nodes != nodes:
            diff = sorted(i for i in set(nodes) | set(state_nodes) if nodes.get(i) != state_nodes.get(i))
            raise AssertionError(f"{where}: nodes differ from their history at {diff[:5]}")
        assert {r["personId"]: r for r in disk.state["relationships"]} == rels, f"{where}: relationships"
        assert disk.state["important"] == important, f"{where}: important list"
        creates = [c["target"] for c in disk.changes if c["kind"] == "node.create"]
        assert len(creates) == len(set(creates)), f"{where}: a node id was used twice"
        # the log accounts for every change exactly once, and for nothing else
        ids = [c["changeId"] for c in disk.changes]
        assert ids == list(range(1, len(ids) + 1)), f"{where}: change ids are not 1..n"
        logged = Counter(c["changeId"] for rec in disk.log for c in rec["changes"] if c.get("changeId"))
        twice = [i for i, k in logged.items() if k > 1]
        assert not twice, f"{where}: changes logged twice: {twice[:5]}"
        missing = sorted(set(ids) - set(logged))
        assert not missing, f"{where}: changes missing from operations.jsonl: {missing[:10]}"
        extra = sorted(set(logged) - set(ids))
        assert not extra, f"{where}: operations.jsonl logs changes the state does not have: {extra[:10]}"
        by_id = {c["changeId"]: c for c in disk.changes}
        for rec in disk.log:
            for c in rec["changes"]:
                if c.get("changeId"):
                    mine = by_id[c["changeId"]]
                    assert (c["kind"], c.get("target")) == (mine["kind"], mine.get("target")), where
        seqs = [rec["seq"] for rec in disk.log]
        assert len(seqs) == len(set(seqs)), f"{where}: an operation seq was used twice"
        acked.check(disk, memdir)
        # synonyms.json: the groups as of the last check plus the logged edits since
        expected = [list(g) for g in self.synonyms]
        for rec in disk.log[self.log_records_seen:]:
            if rec["status"] == "ok":
                apply_synonym_change(expected, rec)
        if disk.synonyms != expected:
            # the call in flight may have saved synonyms.json and died before its log record
            assert inflight is not None and inflight[1] in ("zcor/synonyms/set", "tools/call") and (
                inflight[1] == "zcor/synonyms/set" or inflight[2]["name"] == "zcor_synonyms_add"), \
                f"{where}: synonyms.json differs from its logged edits"
            self.unlogged_synonym_edits += 1
        self.synonyms = disk.synonyms
        self.log_records_seen = len(disk.log)
        self.segments = len(disk.state["historySegments"])
        return disk


def test_sigkill_at_random_instants_loses_nothing_acknowledged(make_daemon):
    d = make_daemon()
    rng = random.Random(int(os.environ.get("ZCOR_FAULT_SEED", "20261130")))
    snap_env = {"ZCOR_SNAPSHOT_CHANGES": "3", "ZCOR_NODE_CACHE_NODES": "0"}  # every snapshot writes the cache
    tmp_cleaned = 0
    work = Workload(rng)
    acked = Acked()
    checker = Checker(d.memdir)
    inflight = None
    kills_in_flight = 0
    for trial in range(TRIALS + 1):
        d.start(env=snap_env)  # READY=1: loaded, validated, journal replayed and reconciled
        tmp_cleaned = d.stderr().count("temporary file(s) left by an interrupted write")
        if trial:
            disk = checker.check(trial - 1, acked, inflight)
            work.see(disk, d.memdir)
        if trial == TRIALS:
            break
        bot, op = Wire(d.sock, "bot"), Wire(d.sock, "operator")
        conns = {"bot": bot, "op": op}
        for _ in range(rng.randint(0, 10)):
            who, method, params = work.next()
            if method == "zcor/synonyms/set":
                who = "op"
            reply = conns[who].call(method, params)
            acked.take(method, params, reply, work)
            if method == "tools/call" and params["name"] == "zcor_memory_restore" and \
                    not reply["result"]["isError"]:
                work.refresh(op)
        # the fatal call: SIGKILL at a random instant after sending it
        who, method, params = work.next()
        if method == "zcor/synonyms/set":
            who = "op"
        msg_id = conns[who].send(method, params)
        delay = rng.choice([0.0, rng.uniform(0, 0.004), rng.uniform(0, 0.004), rng.uniform(0, 0.04)])
        if delay:
            time.sleep(delay)
        d.proc.kill()
        d.proc.wait(10)
        reply = conns[who].reply(msg_id, timeout=10)
        if reply is None:
            inflight = (who, method, params)
            kills_in_flight += 1
        else:
            inflight = None
            acked.take(method, params, reply, work)
        bot.close()
        op.close()
    assert d.stop() == 0
    print(f"\n{TRIALS} SIGKILL trials, {kills_in_flight} with a call in flight; acknowledged: "
          f"{dict(sorted(acked.count.items()))}; history segments sealed: {checker.segments}; "
          f"synonym edits saved but unlogged at the kill: {checker.unlogged_synonym_edits}; "
          f"starts that cleaned a killed write's temporary file (a snapshot, backup or restore): {tmp_cleaned}")
    assert kills_in_flight >= TRIALS // 5, "the kills should mostly land with a call in flight"
