"""Latency `zcor serve-openai` adds in front of a provider (issue 26). Prints a table; never asserts.

Builds a Memory of 10,000 memories (bench/common.build_memory), starts zcord on it, the
scripted provider (tests/fakellm.py) and `zcor serve-openai` each as their own process, and
times, from one keep-alive HTTP client, the same chat request sent to the provider directly
and through the endpoint, alternately: the whole answer (non-streaming) and the time to the
first text piece (streaming). The difference is what the endpoint adds: auto-recall on the
new message, the prefix, the context header and the tool list from zcord, and one more HTTP
hop. The model is the fake one, so the upstream's own time is a fraction of a millisecond.

Usage: python bench/bench_proxy.py [--nodes 10000] [--samples 300]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT))
import httpx  # noqa: E402
from bench_daemon import cpu_seconds, start_daemon  # noqa: E402
from common import build_memory, pct, table  # noqa: E402

from zcord.client import Client  # noqa: E402

TOKEN = "bench-token"
TARGET = "added p50 ≤ 5 ms"
UPSTREAM = ("import sys; sys.path.insert(0, %r); from tests.fakellm import FakeLLM, openai_text; "
            "llm = FakeLLM(keep_alive=True); llm.default = openai_text('小王上周说他最喜欢的奶茶是芋泥波波，下次一起去喝。'); "
            "llm.__enter__(); print(llm.url, flush=True); sys.stdin.read()")
PROXY = [sys.executable, "-c", "import sys; from zcord.cli import main; sys.exit(main())", "serve-openai"]

SYSTEM = "你是小助手，一个温柔、细心、记性很好的朋友。" * 20
MESSAGES = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "早上好"},
            {"role": "assistant", "content": "早上好呀，今天有什么安排？"},
            {"role": "user", "content": "王明喜欢奶茶吗？他上次说想去旅行"}]


def first_line(stream, marker: str) -> str:
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit(f"a helper process exited before printing {marker!r}")
        if marker in line:
            return line


def quiet(pid: int, limit: float = 120.0) -> float:
    """Wait until the process uses under 5 % of a CPU for half a second (zcord's warm-up
    builds its indexes in the background after READY); returns the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        before = cpu_seconds(pid)
        time.sleep(0.5)
        if cpu_seconds(pid) - before < 0.025:
            break
    return time.monotonic() - start


def one(client: httpx.Client, url: str, headers: dict[str, str], stream: bool) -> float:
    """Seconds to the whole answer, or (streaming) to the first text piece."""
    body = {"model": "bench", "messages": MESSAGES, "stream": stream}
    t = time.perf_counter()
    if not stream:
        resp = client.post(url + "/chat/completions", json=body, headers=headers)
        assert resp.status_code == 200, resp.text
        resp.json()
        return time.perf_counter() - t
    with client.stream("POST", url + "/chat/completions", json=body, headers=headers) as resp:
        assert resp.status_code == 200, resp.read()
        first = None
        for line in resp.iter_lines():
            if first is None and line.startswith("data: {") and json.loads(line[6:])["choices"][0]["delta"].get(
                    "content"):
                first = time.perf_counter() - t
        assert first is not None
        return first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=300)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(dir="/tmp", prefix="zbp"))
    procs: list[subprocess.Popen] = []
    try:
        memdir = root / "mem"
        t = time.perf_counter()
        build_memory(memdir, args.nodes, args.nodes, args.nodes)
        print(f"Memory of {args.nodes:,} memories built in {time.perf_counter() - t:.1f} s")
        daemon, ready = start_daemon(memdir, root / "zcord.sock", root / "notify")
        procs.append(daemon)
        settled = quiet(daemon.pid)
        upstream = subprocess.Popen([sys.executable, "-c", UPSTREAM % str(ROOT)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
        procs.append(upstream)
        upstream_url = first_line(upstream.stdout, "http").strip()
        env = {**os.environ, "ZCOR_PROXY_TOKEN": TOKEN, "ZCOR_LLM_BASE_URL": upstream_url,
               "ZCOR_LLM_MODEL": "fake", "ZCOR_LLM_API_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        proxy = subprocess.Popen(PROXY + ["--socket", str(root / "zcord.sock"), "--port", "0", "--log-level",
                                          "warning"], env=env, stderr=subprocess.PIPE, text=True)
        procs.append(proxy)
        proxy_url = first_line(proxy.stderr, "listening on").split("listening on ")[1].strip()
        with Client(root / "zcord.sock", role="bot") as bot:
            recalled = bot.recall("bench:probe", [{"text": MESSAGES[-1]["content"], "origin": "external"}])
            header = bot.context("bench:probe")["text"]
            prefix = bot.prefix()
        print(f"zcord ready in {ready:.2f} s, its warm-up done {settled:.1f} s later; the question recalls {len(recalled)} memories "
              f"(context header {len(header):,} chars, prefix {len(prefix):,} chars)")

        direct_h = {"Authorization": "Bearer sk-bench"}
        proxy_h = {"Authorization": f"Bearer {TOKEN}", "X-Zcor-Session": "bench:chat"}
        rows = []
        cpu_rows = []
        with httpx.Client(timeout=30) as client:
            for stream in (False, True):
                for _ in range(20):  # warm both paths (connections, caches)
                    one(client, upstream_url, direct_h, stream)
                    one(client, proxy_url, proxy_h, stream)
                direct, via = [], []
                cpu = [cpu_seconds(p.pid) for p in (proxy, daemon, upstream)]
                for _ in range(args.samples):
                    direct.append(one(client, upstream_url, direct_h, stream))
                    via.append(one(client, proxy_url, proxy_h, stream))
                cpu = [cpu_seconds(p.pid) - c for p, c in zip((proxy, daemon, upstream), cpu)]
                added = [v - d for v, d in zip(via, direct)]
                kind = "time to first token (stream)" if stream else "whole answer (no stream)"
                # the upstream served both paths: half its CPU is the direct requests'
                cpu_rows.append([kind, f"{cpu[0] / args.samples * 1000:.2f}", f"{cpu[1] / args.samples * 1000:.2f}",
                                 f"{cpu[2] / (2 * args.samples) * 1000:.2f}"])
                rows.append([kind, f"{pct(direct, 50) * 1000:.2f} / {pct(direct, 99) * 1000:.2f}",
                             f"{pct(via, 50) * 1000:.2f} / {pct(via, 99) * 1000:.2f}",
                             f"{(pct(via, 50) - pct(direct, 50)) * 1000:.2f}",
                             f"{pct(added, 99) * 1000:.2f}"])
        print(f"{args.samples} requests each way, alternating; ms as p50 / p99; target: {TARGET}")
        print(table(rows, ["request", "direct to the provider", "through serve-openai", "added p50",
                           "added p99 (paired)"]))
        print(f"CPU per request, ms (user + system, /proc; load average now {os.getloadavg()[0]:.1f} "
              f"on {os.cpu_count()} cores)")
        print(table(cpu_rows, ["request", "serve-openai", "zcord", "fake provider"]))
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
