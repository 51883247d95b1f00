"""The wire, scripted: about 75 exchanges (every method, good and bad params, raw malformed
lines) against a daemon run from one zcor tree; prints each reply line normalized (times,
backup names, paths, sizes and timings replaced), one per exchange. A refactor that must keep
the wire byte-for-byte the same diffs two trees:

    python tools/wire_compare.py /path/to/old-checkout > old.txt
    python tools/wire_compare.py . > new.txt
    diff old.txt new.txt

(`git worktree add /tmp/old <commit>` makes the old checkout.)"""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

tree = sys.argv[1]
root = tempfile.mkdtemp(dir="/tmp", prefix="owc")
mem, sock = os.path.join(root, "mem"), os.path.join(root, "s.sock")
env = {**os.environ, "PYTHONPATH": tree, "ZCOR_LLM_API_KEY": "", "HOME": root}
proc = subprocess.Popen(
    [
        sys.executable,
        "-c",
        "import sys; from zcord.cli import daemon_main; sys.exit(daemon_main())",
        "--memory-dir",
        mem,
        "--socket",
        sock,
    ],
    env=env,
    stderr=subprocess.DEVNULL,
    cwd=root,
)
for _ in range(300):
    if os.path.exists(sock):
        try:
            s = socket.socket(socket.AF_UNIX)
            s.connect(sock)
            s.close()
            break
        except OSError:
            pass
    time.sleep(0.05)


class W:
    def __init__(self, role):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(sock)
        self.buf = b""
        self.i = 0

    def raw(self, line: bytes):
        self.s.sendall(line + b"\n")
        while b"\n" not in self.buf:
            self.buf += self.s.recv(1 << 20)
        while True:
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            if "id" in m:
                return line
            while b"\n" not in self.buf:
                self.buf += self.s.recv(1 << 20)

    def call(self, method, params=None):
        self.i += 1
        msg = {"jsonrpc": "2.0", "id": self.i, "method": method}
        if params is not None:
            msg["params"] = params
        return self.raw(json.dumps(msg, ensure_ascii=False).encode())


def init(w, role):
    caps = {"experimental": {"zcor": {"role": "operator"}}} if role == "operator" else {}
    return w.call(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": caps,
            "clientInfo": {"name": "x", "version": "1"},
        },
    )


out = []


def rec(tag, line):
    t = line.decode()
    t = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d", "<T>", t)
    t = re.sub(r"memory-state-[^\"\\]*?\.json", "<B>", t)
    t = t.replace(root, "<ROOT>")
    t = re.sub(
        r'"(pid|uptimeSeconds|size|rssKiB|rss\w*|\w*Ms|\w*Seconds|\w*Bytes)":\s*[\d.]+',
        r'"\1":0',
        t,
    )
    out.append(f"{tag}\t{t}")


op, bot = W("operator"), W("bot")
rec("op", init(op, "operator"))
rec("bot", init(bot, "bot"))
def T(n, a=None, **kw):
    return ("tools/call", {"name": n, "arguments": a or {}, **kw})
script = [
    (
        "op",
        *T(
            "zcor_memory_write",
            {"title": "生日 party", "content": "三月三日", "keywords": ["生日"]},
        ),
    ),
    ("op", *T("zcor_memory_write", {"title": "火锅聚会", "content": "x", "keywords": ["火锅"]})),
    ("op", *T("zcor_memory_write", {"id": "m1", "title": "生日 party", "content": "三月四日"})),
    (
        "op",
        *T(
            "zcor_relationship_write",
            {
                "personId": "qq:1",
                "name": "Mike",
                "relationship": "friend",
                "affinity": 3,
                "reason": "r",
                "memoryNodeId": "m2",
            },
        ),
    ),
    ("op", *T("zcor_memory_read", {"id": "m999"})),
    ("op", *T("zcor_relationship_read", {"personId": "qq:404"})),
    ("op", *T("zcor_memory_delete", {"id": "m2"})),
    ("bot", *T("zcor_memory_nope", {})),
    ("bot", *T("zcor_memory_read", {"id": "m1"})),
    ("bot", *T("zcor_memory_query", {"limit": 0})),
    ("bot", "zcor/prefix", {}),
    ("bot", "zcor/recall", {"session": "s", "events": [{"text": "吃火锅", "origin": "external"}]}),
    ("bot", "zcor/context", {"session": "s"}),
    ("bot", "zcor/recall", {"session": "s"}),
    ("bot", "zcor/context", {}),
    ("bot", "zcor/status", {}),
    ("bot", "zcor/config/set", {"patch": {}}),
    ("bot", "zcor/llm", {}),
    ("bot", "tools/list", {}),
    ("op", "tools/list", {}),
    ("bot", "ping", None),
    ("bot", "prompts/list", {}),
    ("bot", "resources/list", {}),
    ("bot", "resources/templates/list", {}),
    ("bot", "resources/read", {"uri": "zcor://prefix"}),
    ("bot", "resources/read", {"uri": 7}),
    ("bot", "prompts/get", {"name": "zcor_context", "arguments": {"message": "火锅"}}),
    ("op", "zcor/status", {}),
    ("op", "zcor/config/get", {}),
    ("op", "zcor/config/set", {"patch": {"recallBudget": 5000}}),
    ("op", "zcor/config/set", {"patch": {"recallBudget": -1}}),
    ("op", "zcor/synonyms/list", {}),
    ("op", "zcor/synonyms/set", {"index": None, "terms": ["甲乙", "丙丁"]}),
    ("op", "zcor/synonyms/held", {"action": "nope"}),
    ("op", "zcor/recall/explain", {"text": "吃火锅"}),
    ("op", "zcor/persona/get", {}),
    ("op", "zcor/persona/set", {"text": "# hi\n"}),
    ("op", "zcor/history/query", {"limit": 3}),
    ("op", "zcor/history/query", {"limit": "x"}),
    ("op", "zcor/history/versions", {"id": "m1"}),
    ("op", "zcor/history/at", {"time": "2999-01-01T00:00:00+00:00"}),
    ("op", "zcor/history/at", {"time": "yesterday"}),
    ("op", "zcor/history/revert", {"seq": 1}),
    ("op", "zcor/history/revert", {"seq": 3, "preview": True}),
    ("op", "zcor/history/reinstate", {"id": "m1", "changeId": 1}),
    ("op", "zcor/trust/get", {}),
    ("op", "zcor/trust/set", {"sender": "qq:9", "level": "trusted"}),
    ("op", "zcor/review/list", {}),
    ("op", "zcor/review/approve", {"ids": [999]}),
    ("op", "zcor/review/reject", {"ids": [999]}),
    ("op", "zcor/history/revertOrigin", {"sender": "qq:9", "preview": True}),
    ("op", *T("zcor_memory_backup")),
    ("op", "zcor/backups/list", {}),
    ("op", "zcor/backups/preview", {"backupFile": "memory-state-none.json"}),
    ("op", "zcor/backups/preview", {"backupFile": "../x"}),
    ("op", "zcor/snapshot", {}),
    ("op", "zcor/reload", {}),
    ("op", "zcor/subscribe", {}),
    ("op", "zcor/unsubscribe", {}),
    ("op", "no/such", {}),
    ("op", "zcor/status", "x"),
    ("op", *T("zcor_memory_read", {"id": "m1"}, _meta={"zcor/view": True})),
    ("op", "zcor/backups/preview", {}),
    ("op", "zcor/recall/explain", {}),
    ("op", "zcor/config/set", {"patch": 5}),
    ("op", "zcor/history/versions", {"id": "m1", "x": 1}),
    ("op", "zcor/trust/get", {"x": 1}),
    ("op", "zcor/history/at", {"time": 5}),
    ("op", "zcor/history/at", {}),
    ("op", "zcor/status", {"junk": 1}),
    ("op", "zcor/recall/explain", {"text": "x", "senderKey": 5}),
]
ws = {"op": op, "bot": bot}
for who, method, params in script:
    rec(f"{who} {method}", ws[who].call(method, params))
for line in [
    b'{"jsonrpc":"2.0","id":"a","method":"ping","params":"x"}',
    b"[]",
    b'{"jsonrpc":"2.0","id":5}',
    b"nope",
]:
    rec("raw", ws["bot"].raw(line))
proc.terminate()
proc.wait(30)
print("\n".join(out))
print(len(script) + len(out) - len(script), "exchanges", file=sys.stderr)
