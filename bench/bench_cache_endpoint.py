"""The provider's prompt cache through `zcor serve-openai` (issue 32). Prints a table; never asserts.

A 30-turn SillyTavern-style role-play: every turn the client resends the whole history with a
~1,500-word character card as its leading system message (and, as SillyTavern does, the
scene note it inserts mid-conversation), against a Memory of 200 memories (5 important),
with a fake upstream (tests/fakellm.py) recording every request. For each request it
measures the share that is a prefix of the request before (what a provider's prompt cache
can bill at the cached price) and the characters that are not.

`run_endpoint(turns)` returns the JSON body of each upstream request (bench/bench_cache.py
calls it); `layout="8ab1135"` runs the endpoint as it was at main@8ab1135 (its proxy.py, loaded
from git), for the figure before.

Usage: python bench/bench_cache_endpoint.py [--turns 30] [--before]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.machinery
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(Path(__file__).parent), str(ROOT)):
    if _path not in sys.path:  # bench_cache.py --against puts another checkout's zcord first
        sys.path.insert(0, _path)
import httpx  # noqa: E402
from bench_daemon import start_daemon  # noqa: E402
from common import build_memory, table  # noqa: E402

from tests.fakellm import FakeLLM, openai_text, openai_tools  # noqa: E402
from zcord.client import Client  # noqa: E402
from zcord.core.config import LlmConfig  # noqa: E402

BEFORE = "8ab1135"
CARD = ("{{char}} is 小满, a cheerful bookshop owner in 杭州 who remembers every regular customer. "
        "She speaks warmly, teases gently, recommends books by mood, keeps a cat named 团子, and never "
        "breaks character. ") * 50  # about 1,500 words
NOTE = "[Scene note: it is raining; the shop is quiet.]"
NAMES = ["王明", "李红", "张华", "刘丽", "陈强", "杨军"]
THINGS = ["奶茶", "篮球", "电影", "火锅", "旅行", "咖啡", "音乐会", "钢琴", "小说", "搬家"]


def user_turn(i: int) -> str:
    return f"{NAMES[i % len(NAMES)]}昨天说他{['喜欢', '想去', '推荐'][i % 3]}{THINGS[i % len(THINGS)]}，你还记得吗？"


def reply(i: int) -> str:
    return f"当然记得！第{i}次聊到这个啦，" + "我给你推荐一本书吧。" * 8


def _old_proxy() -> Any:
    """zcord.bot.proxy as it was at main@8ab1135 (loaded from git, next to today's modules)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:zcord/bot/proxy.py"], capture_output=True,
                            text=True, check=True).stdout
    name = "zcord.bot._proxy_before"
    module = importlib.util.module_from_spec(importlib.machinery.ModuleSpec(name, None))
    module.__package__ = "zcord.bot"
    sys.modules[name] = module
    exec(compile(source, f"{BEFORE}:zcord/bot/proxy.py", "exec"), module.__dict__)
    return module


def run_endpoint(turns: int = 30, layout: str = "after", memories: int = 200,
                 tool_round: bool = False) -> list[dict[str, Any]]:
    """The 30-turn role-play through the endpoint; the JSON body of each upstream request.
    With tool_round, the last turn's model first rewrites the memory its header shows (one
    more upstream request in that turn)."""
    tmp = Path(tempfile.mkdtemp(dir="/tmp", prefix="zcb"))
    proc = None
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        memdir, sock = tmp / "mem", tmp / "s.sock"
        build_memory(memdir, memories, memories, 0)
        proc, _ = start_daemon(memdir, sock, tmp / "notify")
        with Client(str(sock), role="operator", timeout=30) as op:
            for i in range(1, 6):
                op.call_tool("zcor_memory_important", {"id": f"m{i}", "important": True})
            cat = op.call_tool("zcor_memory_write", {"title": "小满的猫团子", "content": "橘猫，怕下雨"})["id"]
        module = _old_proxy() if layout == BEFORE else __import__("zcord.bot.proxy", fromlist=["ProxyServer"])
        with FakeLLM(keep_alive=True) as llm:
            llm.script = [openai_text(reply(i)) for i in range(turns)]
            if tool_round:
                llm.script.insert(turns - 1, openai_tools(("zcor_memory_write", {
                    "id": cat, "title": "小满的猫团子", "content": "橘猫，怕下雨，也怕打雷"})))
            cfg = LlmConfig(base_url=llm.url, model="bench", timeout_seconds=30)

            async def make() -> Any:
                server = module.ProxyServer(module.Settings(port=0, socket=str(sock), token="t"), cfg, None)
                await server.start()
                return server

            server = asyncio.run_coroutine_threadsafe(make(), loop).result(60)
            messages: list[dict[str, Any]] = [{"role": "system", "content": CARD}]
            with httpx.Client(base_url=f"http://127.0.0.1:{server.port}/v1", timeout=60,
                              headers={"Authorization": "Bearer t", "X-Zcor-Session": "st:bench"}) as http:
                for i in range(turns):
                    if i == 3:
                        messages.append({"role": "system", "content": NOTE})
                    messages.append({"role": "user", "content": user_turn(i) + ("团子今天怕打雷吗？" if tool_round
                                                                                     and i == turns - 1 else "")})
                    resp = http.post("/chat/completions", json={"model": "bench", "messages": messages})
                    resp.raise_for_status()
                    messages.append({"role": "assistant", "content": resp.json()["choices"][0]["message"]["content"]})
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(60)
            return [r["json"] for r in llm.requests]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)


def canonical(body: dict[str, Any]) -> str:
    """A request as the provider reads (and caches) it, in order: tools, system, messages."""
    return json.dumps([body.get("tools"), body.get("system"), body["messages"]], ensure_ascii=False)


def shares(bodies: list[dict[str, Any]]) -> tuple[list[float], list[int]]:
    """Per request after the first: the share that is a prefix of the request before, and the
    characters that are not."""
    out, uncached = [], []
    for before, now in zip(bodies, bodies[1:], strict=False):
        a, b = canonical(before), canonical(now)
        n = 0
        limit = min(len(a), len(b))
        while n < limit and a[n] == b[n]:
            n += 1
        out.append(n / len(b))
        uncached.append(len(b) - n)
    return out, uncached


def passthrough(turns: int) -> list[dict[str, Any]]:
    """The same conversation sent straight to the provider (no memory)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": CARD}]
    bodies = []
    for i in range(turns):
        if i == 3:
            messages.append({"role": "system", "content": NOTE})
        messages.append({"role": "user", "content": user_turn(i)})
        bodies.append({"messages": list(messages)})
        messages.append({"role": "assistant", "content": reply(i)})
    return bodies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--before", action="store_true", help=f"also run main@{BEFORE}'s endpoint")
    args = ap.parse_args()
    runs = [("passthrough (no memory)", passthrough(args.turns))]
    if args.before:
        runs.append((f"endpoint, main@{BEFORE}", run_endpoint(args.turns, BEFORE)))
    runs.append(("endpoint, now", run_endpoint(args.turns)))
    rows = []
    for label, bodies in runs:
        share, uncached = shares(bodies)
        rows.append([label, str(len(bodies)), f"{statistics.median(share) * 100:.1f} %",
                     f"{min(share) * 100:.1f} %", f"{statistics.median(uncached):,.0f}",
                     f"{statistics.median(uncached) / 3:,.0f}", f"{len(canonical(bodies[-1])):,}"])
    print(table(rows, ["layout", "requests", "prefix share p50", "min", "uncached chars p50",
                       "≈ tokens", "last request chars"]))
    print("\nA tool round that rewrites a memory shown in the header: the turn's second upstream request")
    rows = []
    for label, layout in ([(f"endpoint, main@{BEFORE}", BEFORE)] if args.before else []) + [("endpoint, now", "after")]:
        bodies = run_endpoint(min(args.turns, 10), layout, tool_round=True)
        share, uncached = shares(bodies[-2:])
        rows.append([label, f"{share[0] * 100:.1f} %", f"{uncached[0]:,}", f"{len(canonical(bodies[-1])):,}"])
    print(table(rows, ["layout", "prefix share of the first", "uncached chars", "request chars"]))


if __name__ == "__main__":
    main()


def run(scn: Any, protocol: str, daemon_cls: Any, fake_reply: Any, fake_tools: Any, tool_turn: int) -> Any:
    """bench/bench_cache.py's role-play through the endpoint: the card as the client's leading
    system message, the whole history resent each turn; returns bench_cache's Run."""
    from bench_cache import Run

    import zcord.bot.proxy as module

    out = Run("endpoint (zcor serve-openai)")
    daemon = daemon_cls(scn, "You are Wren's voice; the character card comes from the front end.")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with FakeLLM(keep_alive=True) as llm:
            cfg = LlmConfig(protocol=protocol, base_url=llm.url, model="bench", timeout_seconds=30)

            async def make() -> Any:
                server = module.ProxyServer(module.Settings(port=0, socket=str(daemon.sock), token="t"), cfg, None)
                await server.start()
                return server

            server = asyncio.run_coroutine_threadsafe(make(), loop).result(60)
            messages: list[dict[str, Any]] = [{"role": "system", "content": scn.card}]
            with httpx.Client(base_url=f"http://127.0.0.1:{server.port}/v1", timeout=60,
                              headers={"Authorization": "Bearer t", "X-Zcor-Session": "st:bench"}) as http:
                for n, (user, answer) in enumerate(zip(scn.turns, scn.replies, strict=True), 1):
                    before = len(llm.requests)
                    if n == tool_turn:
                        target = scn.memories[scn.tool_target]
                        llm.script.append(fake_tools(protocol, ("zcor_memory_write", {
                            "id": daemon.ids[scn.tool_target], "title": target["title"],
                            "content": target["content"] + " (Wren wrote it down.)"})))
                    llm.script.append(fake_reply(protocol, answer))
                    messages.append({"role": "user", "content": user})
                    resp = http.post("/chat/completions", json={"model": "bench", "messages": messages})
                    resp.raise_for_status()
                    messages.append({"role": "assistant", "content": resp.json()["choices"][0]["message"]["content"]})
                    out.turns.append(llm.requests[before]["json"])
                    if n == tool_turn:
                        out.tool_pair = (llm.requests[before]["json"], llm.requests[before + 1]["json"])
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(60)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        daemon.close()
    return out
