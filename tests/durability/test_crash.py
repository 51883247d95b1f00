"""SIGKILL at random instants while writing: every restart loads a valid state that holds
every acknowledged write, and the operation log accounts for every committed change."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from zcord.service import Service

WRITER = Path(__file__).with_name("writer.py")
TRIALS = int(os.environ.get("ZCOR_CRASH_TRIALS", "30"))


def run_and_kill(memdir: Path, seed: int, rng: random.Random) -> list[tuple[str, dict]]:
    """Start the writer, let it acknowledge a random number of calls, SIGKILL it mid-stream."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(memdir), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    acked = []
    wanted = rng.randint(1, 40)
    try:
        for line in proc.stdout:
            op, _, payload = line.partition(" ")
            acked.append((op, json.loads(payload)))
            if len(acked) >= wanted:
                break
        # the writer keeps going: kill it after a random extra delay, mid-write with luck
        time.sleep(rng.random() * 0.02)
        proc.send_signal(signal.SIGKILL)
        rest, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert acked, f"writer acknowledged nothing: {err}"
    # lines flushed before the kill are acknowledged too
    for line in rest.splitlines():
        if line.endswith("}"):
            op, _, payload = line.partition(" ")
            acked.append((op, json.loads(payload)))
    return acked


def test_sigkill_during_writes_loses_no_acknowledged_write(tmp_path):
    memdir = tmp_path / "memory"
    rng = random.Random(1234)
    expected_nodes: dict[str, tuple[str, str]] = {}
    expected_rels: dict[str, dict] = {}
    for trial in range(TRIALS):
        for op, res in run_and_kill(memdir, trial, rng):
            if op in ("create", "update"):
                expected_nodes[res["id"]] = (res["title"], res["content"])
            elif op == "relationship":
                expected_rels[res["personId"]] = res
        # a restart must load a valid state holding every acknowledged write
        with Service(memdir) as svc:
            st = svc.state
            for node_id, (title, content) in expected_nodes.items():
                assert node_id in st.nodes, f"trial {trial}: acknowledged {node_id} lost"
                node = st.nodes[node_id]
                # an unacknowledged update may have landed after it: then the acknowledged
                # version must be in the node's history, before the current one
                if (node.title, node.content) != (title, content):
                    versions = [(c.after["title"], c.after["content"]) for c in svc.store.iter_history(st)
                                if c.target == node_id and c.kind in ("node.create", "node.update")]
                    assert (title, content) in versions[:-1], f"trial {trial}: {node_id} lost a write"
                    assert versions[-1] == (node.title, node.content)
            for pid, _rel in expected_rels.items():
                assert pid in st.relationships
            assert len(st.important) <= 5
            # every committed change is in the operation log (recovered if the crash hit between)
            logged = set()
            for line in (memdir / "operations.jsonl").read_text().splitlines():
                rec = json.loads(line)
                logged.update(c["changeId"] for c in rec["changes"] if c.get("changeId"))
            committed = {c.change_id for c in svc.store.iter_history(st)}
            assert logged == committed, f"trial {trial}: log and state disagree"
            expected_nodes = {k: (n.title, n.content) for k, n in st.nodes.items()}
    # nothing but the state, the log and their companions is left behind: no temp files
    leftovers = [p.name for p in memdir.iterdir() if p.name.endswith(".tmp")]
    assert len(leftovers) <= TRIALS  # a kill mid-save may leave one orphan temp file per trial
