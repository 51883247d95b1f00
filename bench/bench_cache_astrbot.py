"""How much of each model request a provider's prompt cache can serve through the AstrBot
plugin (issue 32), in a real AstrBot. Prints a table; never asserts.

bench/bench_cache.py's 30-turn role-play (a ~1,500-word character card, 200 memories the
turns keep touching; bench_cache.scenario) as one QQ group chat through AstrBot's whole
message pipeline (tests/astrbot/drive_plugin.py: AstrBot's core, its LLM-request hook, agent
runner and OpenAI provider, and AstrBot saving the conversation, which it resends each
turn), against the scripted provider of tests/fakellm.py. The card is the AstrBot persona's
prompt; zcor's PERSONA.md is one line. Turn 20's first answer is a tool call that updates a
recalled memory (zcor_memory_write by id), answered in the turn's second request.

Measured as in bench_cache (tools, system, messages as the provider reads them; the longest
prefix shared with any earlier request): per AstrBot version, AstrBot alone (no memory: the
ceiling AstrBot's own layout allows), the plugin as of main@8ab1135 ("before": prefix and
header in one `<!-- zcor memory N -->` block at the top of the system prompt) and this
checkout's plugin ("after").

`run(...)` is bench_cache.py's hook for its astrbot row (this checkout's plugin, the first
AstrBot venv found).

Usage: python bench/bench_cache_astrbot.py [--turns 30] [--versions 4.14,newest]
                                           [--plugins none,before,after]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = Path(__file__).resolve().parent
DRIVER = ROOT / "tests" / "astrbot" / "drive_plugin.py"
PLUGIN = ROOT / "contrib" / "astrbot" / "astrbot_plugin_zcor"
BEFORE = "8ab1135"
"""The commit whose plugin is "before" (the header in the system prompt's top block)."""
PYTHONS = {  # which AstrBot: its venv's Python (as tests/integration/test_astrbot.py finds them)
    "4.14": os.environ.get("ZCOR_ASTRBOT_PYTHON") or str(ROOT / ".venv-astrbot" / "bin" / "python"),
    "newest": os.environ.get("ZCOR_ASTRBOT_LATEST_PYTHON") or str(ROOT / ".venv-astrbot-latest" / "bin" / "python"),
}
ZCOR_PERSONA = "You keep Wren's long-term memory of the people she meets."


def drive(python: str, plugin: Path | None, llm_url: str, steps: list[dict]) -> list[dict]:
    """Run the driver in an AstrBot venv (plugin None: AstrBot alone); its transcript."""
    import zcord

    root = Path(tempfile.mkdtemp(prefix="zabc", dir="/tmp"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCOR_", "PYTHON", "VIRTUAL_ENV"))}
        (root / "lib").mkdir()
        (root / "lib" / "zcord").symlink_to(Path(zcord.__file__).resolve().parent)  # the zcord measured
        env["PYTHONPATH"] = str(root / "lib")
        out = subprocess.run([python, str(DRIVER), str(root), str(plugin) if plugin else "-", llm_url,
                              json.dumps(steps, ensure_ascii=False)],
                             capture_output=True, text=True, timeout=1800, env=env, cwd=root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("TRANSCRIPT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError("the AstrBot driver failed:\n" + (out.stdout + out.stderr)[-4000:])
    return json.loads(lines[-1].removeprefix("TRANSCRIPT "))


def before_plugin(into: Path) -> Path:
    """The plugin as of BEFORE, copied out of git into a directory of the same name."""
    dest = into / PLUGIN.name
    dest.mkdir(parents=True)
    for name in ("main.py", "metadata.yaml", "_conf_schema.json"):
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{BEFORE}:contrib/astrbot/{PLUGIN.name}/{name}"],
                              capture_output=True, text=True, check=True).stdout
        (dest / name).write_text(text, encoding="utf-8")
    return dest


def run(scn: Any, protocol: str, daemon_cls: Any, fake_reply: Any, fake_tools: Any, tool_turn: int, *,
        python: str | None = None, plugin: Path | None = PLUGIN, name: str | None = None) -> Any:
    """The scenario through AstrBot (bench_cache.py's astrbot row): one Run of bench_cache."""
    from bench_cache import Run

    from tests.fakellm import FakeLLM

    if python is None:
        python = next((p for p in PYTHONS.values() if Path(p).exists()), "")
    label = name or "astrbot"
    if not python or not Path(python).exists():
        return Run(label, note="no AstrBot venv (make astrbot-env)")
    if protocol != "openai":
        return Run(label, note="the driver speaks to the provider through AstrBot's OpenAI source only")
    daemon = daemon_cls(scn, ZCOR_PERSONA) if plugin is not None else None
    sock = str(daemon.sock) if daemon else "/nonexistent/zcord.sock"
    try:
        with FakeLLM(keep_alive=True) as llm:
            starts = []
            for n, reply in enumerate(scn.replies, 1):
                starts.append(n)
                if n == tool_turn and daemon is not None:
                    m = scn.memories[scn.tool_target]
                    llm.script.append(fake_tools(protocol, ("zcor_memory_write", {
                        "id": daemon.ids[scn.tool_target], "title": m["title"],
                        "content": m["content"] + " (Wren wrote it down.)"})))
                llm.script.append(fake_reply(protocol, reply))
            steps = [{"socket": sock, "message": text, "sender": "7", "nickname": "traveller"}
                     for text in scn.turns]
            steps[0]["systemPrompt"] = scn.card
            drive(python, plugin, llm.url, steps)
            bodies = [r["json"] for r in llm.requests]
    finally:
        if daemon is not None:
            daemon.close()
    out = Run(label)
    i = 0
    for n in range(1, len(scn.turns) + 1):
        out.turns.append(bodies[i])
        if n == tool_turn and daemon is not None:
            out.tool_pair = (bodies[i], bodies[i + 1])
            i += 1
        i += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--versions", default="4.14,newest")
    ap.add_argument("--plugins", default="none,before,after")
    args = ap.parse_args()
    sys.path[:0] = [str(BENCH), str(ROOT)]
    import bench_cache
    from common import table

    scn = bench_cache.scenario(args.turns)
    print(f"card: {len(scn.card.split()):,} words ({len(scn.card):,} chars), the AstrBot persona's prompt; "
          f"{len(scn.memories)} memories; {args.turns} turns in one QQ group; protocol openai")
    rows = []
    with tempfile.TemporaryDirectory(prefix="zabp") as tmp:
        plugins = {"none": None, "before": before_plugin(Path(tmp)), "after": PLUGIN}
        for version in args.versions.split(","):
            python = PYTHONS[version]
            if not Path(python).exists():
                rows.append([f"AstrBot {version}", "-", "-", "-", "-", "-", "-", "venv missing"])
                continue
            release = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('astrbot'))"],
                                     capture_output=True, text=True).stdout.strip()
            for which in args.plugins.split(","):
                label = {"none": "no memory", "before": f"plugin {BEFORE} (before)", "after": "plugin (after)"}[which]
                result = run(scn, "openai", bench_cache.Daemon, bench_cache.fake_reply, bench_cache.fake_tools,
                             bench_cache.TOOL_TURN, python=python, plugin=plugins[which],
                             name=f"AstrBot {release}, {label}")
                rows.append(bench_cache.row(result))
                print(f"  AstrBot {release} {which}: done", file=sys.stderr)
    print(table(rows, ["AstrBot, plugin", "median share", "lowest", "uncached chars/turn", "≈ tokens",
                       f"tool round (turn {bench_cache.TOOL_TURN}): share / uncached", "request chars", "note"]))


if __name__ == "__main__":
    main()
