"""How much of each model request a provider's prompt cache can serve (issue 32). Prints a
table; never asserts.

A 30-turn role-play (a ~1,500-word character card, the whole history resent each turn as
SillyTavern does, 200 memories the turns keep touching) goes through each front end against
a scripted provider on 127.0.0.1 (tests/fakellm.py) that records every request:

- passthrough: the same conversation sent straight to the provider, no memory at all;
- zcor chat:   zcord.bot.Conversation, the card as PERSONA.md;
- endpoint:    `zcor serve-openai`, the card as the client's leading system message
               (bench/bench_cache_endpoint.py, when present);
- astrbot:     the AstrBot plugin in a real AstrBot (bench/bench_cache_astrbot.py, when
               present and an AstrBot venv exists).

For every request after the first it measures the longest prefix shared with any earlier
request, in characters of the request as the provider reads it (tools, then the system
text, then the messages in order, each as compact JSON): the part a prompt cache can serve.
It prints the median share, the median uncached characters a turn and an estimate in tokens
(English text, about 4 characters a token), and the same for the second request of a turn
whose first request made a tool call that updated a memory shown in the header.

Usage: python bench/bench_cache.py [--turns 30] [--protocol openai|anthropic] [--budget CHARS]
                                   [--front-ends passthrough,chat,endpoint,astrbot]
                                   [--against DIR]   # measure another checkout's zcord
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent

TOOL_TURN = 20
"""The turn (1-based) whose first model request calls zcor_memory_write on a recalled memory."""

# -- the role-play ----------------------------------------------------------------------------

PEOPLE = ["Mira", "Tobin", "Elowen", "Garrick", "Sable", "Ronan", "Isolde", "Fenwick", "Brannoc", "Lysa",
          "Corwin", "Adela", "Hale", "Neve", "Osric", "Petra", "Quill", "Rowan", "Sorrel", "Thane"]
PLACES = ["Ashford", "the Gilded Stag", "Wyrmwood", "Saltmarsh", "the Old Mill", "Ironhold", "Mossgate",
          "the Sunken Chapel", "Brightwater", "Crowfall", "the Lantern Market", "Hollowmere", "Stonebridge",
          "the Ember Forge", "Willowby", "Frostpeak", "the Amber Library", "Duskvale", "Greywatch", "Kingsreach"]
THINGS = ["silver sword", "blue cloak", "healing salve", "old map", "brass compass", "wolf pelt", "oak bow",
          "sealed letter", "iron key", "lucky coin", "copper kettle", "hunting horn", "glass vial",
          "leather journal", "ruby ring", "woven basket", "fishing net", "clay pipe", "star chart", "bone flute"]
DEEDS = ["forged", "lost", "traded", "mended", "hid", "found", "stole", "gifted", "sold", "painted"]
CARD_LINES = [
    "{char} is a wandering bard who travels the northern roads with a battered lute and a quick tongue.",
    "She grew up in {place}, where her mother kept an inn and her father mended nets for the fishing boats.",
    "{char} speaks warmly to strangers but guards her own past, changing the subject with a joke or a song.",
    "She keeps a {thing} in her pack and will not say where she got it, only that it is worth more than gold.",
    "When she is nervous she hums old ballads under her breath and turns the ring on her left hand.",
    "{char} has a rivalry with {person}, a minstrel who once stole her best verse at the fair in {place}.",
    "She distrusts soldiers, loves honey cakes, and can name every star in the winter sky.",
    "In conversation she is playful, curious about the traveller's life, and loyal once trust is earned.",
    "{char} never breaks character, describes her surroundings vividly, and remembers what she is told.",
    "She writes her replies in the first person, with actions between asterisks and speech in quotes.",
]


@dataclass
class Scenario:
    card: str
    memories: list[dict[str, Any]]
    turns: list[str]
    replies: list[str]
    tool_target: int
    """Index in `memories` of the memory the tool round updates (one the tool turn recalls)."""


def scenario(turns: int, seed: int = 5) -> Scenario:
    rng = random.Random(seed)
    card_lines = []
    while len(" ".join(card_lines).split()) < 1500:
        card_lines.append(rng.choice(CARD_LINES).format(char="Wren", place=rng.choice(PLACES),
                                                        thing=rng.choice(THINGS), person=rng.choice(PEOPLE)))
    card = "Character: Wren\n\n" + "\n".join(card_lines)
    memories = []
    for i in range(200):
        who, where, what = PEOPLE[i % 20], PLACES[(i * 7) % 20], THINGS[(i * 3) % 20]
        deed = DEEDS[i % 10]
        memories.append({"title": f"{who} {deed} the {what} in {where}",
                         "content": f"{who} told Wren that they {deed} the {what} near {where} "
                                    f"after the {rng.choice(['spring', 'harvest', 'winter', 'summer'])} festival; "
                                    f"Wren promised to keep it quiet.",
                         "keywords": [who, what, where.removeprefix("the ")]})
    lines, replies = [], []
    for t in range(turns):
        m = memories[(t * 13) % 200]
        who, what = m["keywords"][0], m["keywords"][1]
        lines.append(rng.choice([
            f"*leans closer* Did you ever hear what {who} did with the {what}?",
            f"I ran into {who} on the road today. They asked about the {what}, strangely enough.",
            f"Tell me a story about {who}, and maybe the {what} too.",
            f"*sits by the fire* Where do you think the {what} ended up? {who} seemed worried.",
        ]))
        replies.append(f"*Wren tilts her head, fingers resting on the lute strings* \"Ah, {who}...\" "
                       + " ".join(rng.choice(CARD_LINES).format(char="Wren", place=rng.choice(PLACES),
                                                                thing=rng.choice(THINGS), person=who)
                                  for _ in range(3)))
    return Scenario(card, memories, lines, replies, tool_target=((TOOL_TURN - 1) * 13) % 200)


# -- measuring --------------------------------------------------------------------------------


def rendered(body: dict[str, Any]) -> str:
    """A request as the provider reads it: tools, system, messages, each as compact JSON."""
    parts = [json.dumps(body.get("tools") or [], ensure_ascii=False, separators=(",", ":"))]
    if "system" in body:
        parts.append(json.dumps(body["system"], ensure_ascii=False, separators=(",", ":")))
    parts += [json.dumps(m, ensure_ascii=False, separators=(",", ":")) for m in body.get("messages") or []]
    return "\n".join(parts)


def common_prefix(a: str, b: str) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest n with a[:n] == b[:n]
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass
class Run:
    """What one front end sent upstream: one body per turn (the turn's first request), and the
    two requests of the tool turn."""

    name: str
    turns: list[dict[str, Any]] = field(default_factory=list)
    tool_pair: tuple[dict[str, Any], dict[str, Any]] | None = None
    note: str = ""


def turn_figures(run: Run) -> tuple[list[float], list[int]]:
    texts = [rendered(b) for b in run.turns]
    shares, uncached = [], []
    for i in range(1, len(texts)):
        best = max(common_prefix(texts[i], texts[j]) for j in range(i))
        shares.append(best / len(texts[i]))
        uncached.append(len(texts[i]) - best)
    return shares, uncached


def row(run: Run) -> list[str]:
    shares, uncached = turn_figures(run)
    if not shares:
        return [run.name, "-", "-", "-", "-", "-", run.note]
    med_share = statistics.median(shares)
    med_unc = statistics.median(uncached)
    if run.tool_pair:
        first, second = (rendered(b) for b in run.tool_pair)
        shared = common_prefix(first, second)
        tool = f"{shared / len(second):.1%} / {len(second) - shared:,}"
    else:
        tool = "n/a"
    size = statistics.median(len(rendered(b)) for b in run.turns)
    return [run.name, f"{med_share:.1%}", f"{min(shares):.1%}", f"{med_unc:,.0f}", f"{med_unc / 4:,.0f}",
            tool, f"{size:,.0f}"] + ([run.note] if run.note else [""])


# -- the front ends ---------------------------------------------------------------------------


def fake_reply(protocol: str, text: str) -> dict[str, Any]:
    from tests.fakellm import anthropic_text, openai_text

    return openai_text(text) if protocol == "openai" else anthropic_text(text)


def fake_tools(protocol: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    from tests.fakellm import anthropic_tools, openai_tools

    return openai_tools(*calls) if protocol == "openai" else anthropic_tools(*calls)


def passthrough(scn: Scenario, protocol: str) -> Run:
    """No memory: the client's messages straight to the provider."""
    import httpx

    from tests.fakellm import FakeLLM

    run = Run("passthrough (no memory)")
    with FakeLLM(keep_alive=True) as llm, httpx.Client() as http:
        llm.default = fake_reply(protocol, "")
        history: list[dict[str, Any]] = []
        for user, reply in zip(scn.turns, scn.replies, strict=True):
            history.append({"role": "user", "content": user})
            if protocol == "openai":
                body = {"model": "m", "messages": [{"role": "system", "content": scn.card}, *history],
                        "max_tokens": 512}
                http.post(llm.url + "/chat/completions", json=body)
            else:
                body = {"model": "m", "system": scn.card, "messages": list(history), "max_tokens": 512}
                http.post(llm.url + "/messages", json=body)
            run.turns.append(llm.requests[-1]["json"])
            history.append({"role": "assistant", "content": reply})
    return run


class Daemon:
    """zcord on a fresh Memory holding the scenario's memories."""

    budget: int | None = None
    """recallBudget to set (--budget); None keeps the default."""

    def __init__(self, scn: Scenario, persona: str):
        from bench_daemon import start_daemon

        from zcord.client import Client

        self.dir = Path(tempfile.mkdtemp(prefix="zbc", dir="/tmp"))
        self.memdir, self.sock = self.dir / "mem", self.dir / "s.sock"
        self.memdir.mkdir()
        (self.memdir / "PERSONA.md").write_text(persona, encoding="utf-8")
        self.proc, _ = start_daemon(self.memdir, self.sock, self.dir / "notify")
        self.ids: list[str] = []
        with Client(str(self.sock), role="operator", timeout=60) as op:
            if self.budget is not None:
                op.config_set({"recallBudget": self.budget})
            for m in scn.memories:
                self.ids.append(op.call_tool("zcor_memory_write", m)["id"])
            for m in scn.memories[:3]:  # a few important memories in the prefix
                op.call_tool("zcor_memory_important", {"id": self.ids[scn.memories.index(m)], "important": True})

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        shutil.rmtree(self.dir, ignore_errors=True)


def chat(scn: Scenario, protocol: str) -> Run:
    """zcor chat's Conversation, the card as the persona."""
    from tests.fakellm import FakeLLM
    from zcord.bot import Conversation, MemoryBot, Provider
    from zcord.core.config import LlmConfig

    run = Run("zcor chat")
    daemon = Daemon(scn, scn.card)
    try:
        with FakeLLM(keep_alive=True) as llm, MemoryBot.connect("console", str(daemon.sock)) as bot:
            conv = Conversation(bot, Provider(LlmConfig(protocol=protocol, base_url=llm.url, model="m",
                                                        timeout_seconds=30), "sk"))
            for n, (user, reply) in enumerate(zip(scn.turns, scn.replies, strict=True), 1):
                before = len(llm.requests)
                if n == TOOL_TURN:
                    target = daemon.ids[scn.tool_target]
                    llm.script.append(fake_tools(protocol, ("zcor_memory_write", {
                        "id": target, "title": scn.memories[scn.tool_target]["title"],
                        "content": scn.memories[scn.tool_target]["content"] + " (Wren wrote it down.)"})))
                llm.script.append(fake_reply(protocol, reply))
                conv.handle([{"text": user, "senderKey": "console:traveller"}])
                run.turns.append(llm.requests[before]["json"])
                if n == TOOL_TURN:
                    run.tool_pair = (llm.requests[before]["json"], llm.requests[before + 1]["json"])
    finally:
        daemon.close()
    return run


def endpoint(scn: Scenario, protocol: str) -> Run:
    try:
        import bench_cache_endpoint
    except ImportError:
        return Run("endpoint", note="bench/bench_cache_endpoint.py is missing")
    return bench_cache_endpoint.run(scn, protocol, Daemon, fake_reply, fake_tools, TOOL_TURN)


def astrbot(scn: Scenario, protocol: str) -> Run:
    try:
        import bench_cache_astrbot
    except ImportError:
        return Run("astrbot", note="bench/bench_cache_astrbot.py is missing")
    return bench_cache_astrbot.run(scn, protocol, Daemon, fake_reply, fake_tools, TOOL_TURN)


FRONT_ENDS: dict[str, Callable[[Scenario, str], Run]] = {
    "passthrough": passthrough, "chat": chat, "endpoint": endpoint, "astrbot": astrbot}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--protocol", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--front-ends", default="passthrough,chat,endpoint,astrbot")
    ap.add_argument("--budget", type=int, help="the Memory's recallBudget (default: zcord's, 6,000)")
    ap.add_argument("--against", help="another checkout whose zcord to measure (e.g. an older commit's)")
    args = ap.parse_args()
    code = Path(args.against).resolve() if args.against else ROOT
    os.environ["PYTHONPATH"] = str(code) + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path[:0] = [str(code), str(BENCH), str(ROOT)]
    scn = scenario(args.turns)
    Daemon.budget = args.budget
    print(f"card: {len(scn.card.split()):,} words ({len(scn.card):,} chars); {len(scn.memories)} memories; "
          f"{args.turns} turns; protocol {args.protocol}; zcord from {code}")
    rows = []
    for name in args.front_ends.split(","):
        rows.append(row(FRONT_ENDS[name](scn, args.protocol)))
        print(f"  {name}: done", file=sys.stderr)
    from common import table

    print(table(rows, ["front end", "median share", "lowest", "uncached chars/turn", "≈ tokens",
                       f"tool round (turn {TOOL_TURN}): share / uncached", "request chars", "note"]))


if __name__ == "__main__":
    main()
