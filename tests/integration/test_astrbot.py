"""The AstrBot plugin (contrib/astrbot/astrbot_plugin_zcor) with the real `astrbot` package.

AstrBot pins versions that clash with ours, so it lives in a venv of its own (.venv-astrbot,
made by `make astrbot-env`, which `make test` runs); $ZCOR_ASTRBOT_PYTHON names its Python.
tests/astrbot/drive_plugin.py runs there: AstrBot's core starts and loads the plugin, and QQ
group messages go through AstrBot's whole message pipeline (the LLM-request hook, the agent
runner, whose OpenAI provider talks to the scripted fake LLM below, so the model's tool call
runs through AstrBot's tool machinery into the real daemon, and AstrBot saving the
conversation). This side checks what the model was sent, what AstrBot saved, the usage
reports and the Memory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, openai_text, openai_tools

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "contrib" / "astrbot" / "astrbot_plugin_zcor"
DRIVER = ROOT / "tests" / "astrbot" / "drive_plugin.py"
ASTRBOT_PYTHON = os.environ.get("ZCOR_ASTRBOT_PYTHON") or str(ROOT / ".venv-astrbot" / "bin" / "python")
# AstrBot's newest release needs Python 3.12+; its venv is made where such a Python exists
ASTRBOT_LATEST_PYTHON = (os.environ.get("ZCOR_ASTRBOT_LATEST_PYTHON")
                         or str(ROOT / ".venv-astrbot-latest" / "bin" / "python"))
ASTRBOTS = {  # which AstrBot: (its venv's Python, why it may be missing)
    "astrbot-4.14": (ASTRBOT_PYTHON, "the AstrBot test venv is missing: run `make astrbot-env` (make test does)"),
    "astrbot-newest": (ASTRBOT_LATEST_PYTHON, "the newest AstrBot's venv is missing: it needs Python 3.12+ "
                       "(python3.13, python3.12 or pyenv's 3.12/3.13) and `make astrbot-latest-env` (make test "
                       "makes it where such a Python exists)"),
}
MESSAGE = "我这周末又要去香山爬山了，上次那双登山鞋还挺好穿"
SECOND = "对了，小王那双登山鞋防水吗？"
ASTRBOT_PROMPT = "你是群里的聊天机器人。"  # the persona's prompt the driver gives AstrBot
PROMPT_START, PROMPT_END = "<!-- zcor memory -->", "<!-- /zcor memory -->"
PERSONA = "你是小雪，群里温柔的猫娘，说话句尾带“喵”。"
REL_TOOLS = {"zcor_relationship_read", "zcor_relationship_query", "zcor_relationship_write",
             "zcor_relationship_delete"}

pytestmark = [pytest.mark.astrbot]


def drive(llm_url: str, steps: list[dict], python: str = ASTRBOT_PYTHON) -> tuple[list[dict], str]:
    """Run the driver in an AstrBot venv; its transcript (one entry per step) and AstrBot's log."""
    root = Path(tempfile.mkdtemp(prefix="zab", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCOR_", "PYTHON", "VIRTUAL_ENV"))}
    # the plugin runs with this checkout's zcord client (not whichever the AstrBot venv has installed)
    (root / "lib").mkdir()
    (root / "lib" / "zcord").symlink_to(ROOT / "zcord")
    env["PYTHONPATH"] = str(root / "lib")
    out = subprocess.run([python, str(DRIVER), str(root), str(PLUGIN), llm_url,
                          json.dumps(steps, ensure_ascii=False)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=root)
    shutil.rmtree(root, ignore_errors=True)
    log = out.stdout + out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("TRANSCRIPT ")]
    assert out.returncode == 0 and lines, log[-6000:]
    return json.loads(lines[-1].removeprefix("TRANSCRIPT ")), log


def astrbot_version(python: str) -> tuple[str, tuple[int, int]]:
    """The astrbot package's version in that venv, and its Python's (major, minor)."""
    out = subprocess.run([python, "-c", "import importlib.metadata as m, sys; "
                          "print(m.version('astrbot'), *sys.version_info[:2])"],
                         capture_output=True, text=True, timeout=60, check=True)
    version, major, minor = out.stdout.split()
    return version, (int(major), int(minor))


def cached_reply(text: str) -> dict:
    """An OpenAI answer whose usage says part of the prompt came from the provider's cache."""
    return {**openai_text(text), "usage": {"prompt_tokens": 1800, "completion_tokens": 12, "total_tokens": 1812,
                                           "prompt_tokens_details": {"cached_tokens": 1536}}}


def version_of(python: str) -> tuple[int, int]:
    """AstrBot's (major, minor) in that venv."""
    return tuple(map(int, astrbot_version(python)[0].split(".")[:2]))  # type: ignore[return-value]


@pytest.fixture(scope="module", params=list(ASTRBOTS))
def run(request, tmp_path_factory):
    """One AstrBot process (its start-up is slow) through five group messages, each through
    AstrBot's whole pipeline: two on a daemon with relationship memory on (the model writes a
    memory in the first, the second recalls it again); one on a daemon with it off; one after
    that daemon stopped under the connected plugin; one with the setting pointing at no
    daemon at all. Once with AstrBot 4.14 (the last for Python 3.11), once with the newest."""
    from tests.integration.conftest import Factory

    python, missing = ASTRBOTS[request.param]
    if not Path(python).exists():
        pytest.skip(missing)
    version, py = astrbot_version(python)
    if request.param == "astrbot-newest":  # really a release past 4.14, on the Python it needs
        assert tuple(map(int, version.split(".")[:2])) > (4, 14) and py >= (3, 12), (version, py)

    factory = Factory()
    on, off = factory().start(), factory().start()
    with on.client("operator") as op:
        op.persona_set(PERSONA)
        shoes = op.call_tool("zcor_memory_write", {"title": "小王的登山鞋", "content": "小王买了一双防水登山鞋，很喜欢。",
                                                   "keywords": ["登山鞋", "小王"]})["id"]
        op.call_tool("zcor_memory_write", {"title": "周五的会议", "content": "和工作有关。"})
    with off.client("operator") as op:
        op.config_set({"relationshipMemory": False})
    write_args = {"title": "小王周末去香山爬山", "content": "小王这周末去香山爬山，穿那双登山鞋。",
                  "parentId": shoes, "sourceMessage": MESSAGE}
    nobody = str(tmp_path_factory.mktemp("down") / "nobody.sock")
    with FakeLLM() as llm:
        llm.script += [openai_tools(("zcor_memory_write", write_args)), cached_reply("好呀，注意安全喵～"),
                       cached_reply("防水的喵"), openai_text("嗯嗯"), openai_text("刚才走神了"), openai_text("我在呢")]
        transcript, log = drive(llm.url, [{"socket": str(on.sock), "message": MESSAGE},
                                          {"socket": str(on.sock), "message": SECOND, "retries": 2},
                                          {"socket": str(off.sock), "message": "你还记得我吗"},
                                          {"socket": str(off.sock), "message": "登山鞋呢", "kill": off.proc.pid},
                                          {"socket": nobody, "message": "在吗"}], python)
    yield {"on": on, "off": off, "shoes": shoes, "write_args": write_args, "llm": llm, "version": version,
           "temp_parts": tuple(map(int, version.split(".")[:2])) > (4, 14),
           "transcript": transcript, "log": log, "nobody": nobody}
    problems = factory.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


def block_of(system: str) -> str:
    """zcor's part of a system prompt: from its start marker to its end marker."""
    assert system.startswith(PROMPT_START + "\n"), system[:200]
    end = system.index(PROMPT_END) + len(PROMPT_END)
    return system[:end]


def header_sent(messages: list[dict], temp_parts: bool) -> tuple[str, list[dict]]:
    """The context header in what AstrBot sent, and the messages without it (as the next
    request repeats them). Newest AstrBot: the last text part of the newest user message;
    4.14: a user message of its own just before the newest one."""
    if temp_parts:
        *rest, last = messages
        assert last["role"] == "user" and isinstance(last["content"], list), last
        *parts, header = last["content"]
        assert header["type"] == "text" and header["text"].startswith("[Auto-recall"), last
        return header["text"], [*rest, {**last, "content": parts}]
    *rest, header, last = messages
    assert header["role"] == "user" and header["content"].startswith("[Auto-recall"), header
    assert last["role"] == "user", last
    return header["content"], [*rest, last]


def test_a_group_message_gets_memory_and_the_model_writes_through_astrbot(run):
    on, shoes, write_args, llm = run["on"], run["shoes"], run["write_args"], run["llm"]
    step = run["transcript"][0]

    # the plugin was registered and configured by AstrBot itself
    assert step["plugin"]["class"] == "ZcorMemory" and step["plugin"]["name"] == "astrbot_plugin_zcor"
    assert step["plugin"]["config"]["socket"] == str(on.sock)

    # the hook put zcor's prefix first in the system prompt, AstrBot's own prompt after it
    system = step["hook"]["systemPrompt"]
    block = block_of(system)
    assert block.index(PERSONA) < block.index("external_event_frame") and block.endswith(PROMPT_END)
    assert system.startswith(block + "\n\n") and ASTRBOT_PROMPT in system[len(block):]
    assert "小王的登山鞋" not in system and "Auto-recall" not in system  # the header is not in it
    assert {"zcor_memory_write", "zcor_memory_search"} | REL_TOOLS <= set(step["hook"]["tools"])
    assert "external_event_frame" not in step["hook"]["tools"]

    # what AstrBot's OpenAI provider sent to the model: the header with the newest message
    first = llm.requests[0]["json"]
    assert first["messages"][0] == {"role": "system", "content": system}
    header, _ = header_sent(first["messages"], run["temp_parts"])
    assert "[" + shoes + "] 小王的登山鞋" in header and "周五的会议" not in header  # recalled for this message only
    sent = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert sent["zcor_memory_write"]["parameters"]["required"] == ["title", "content"]

    # AstrBot's tool machinery ran the call through zcord as the bot
    assert step["reply"] == "好呀，注意安全喵～"
    (result,) = [json.loads(r) for r in step["toolResults"]]
    assert result["title"] == write_args["title"] and result["parentId"] == shoes
    with on.client("operator") as op:
        node = op.call_tool("zcor_memory_read", {"id": result["id"]})
        assert node["sourceMessage"] == MESSAGE and node["content"] == write_args["content"]
        history = op.call_tool("zcor_memory_history", {"keywords": ["zcor_memory_write", result["id"]]})["items"]
        assert [(h["tool"], h["actor"], h["status"]) for h in history] == [("zcor_memory_write", "model", "ok")]
        # the plugin told the call's origin: the request's session and sender, not inferred
        origin = history[0]["origin"]
        assert origin["session"] == "qq:group:123456" and len(origin["senders"]) == 1 and "inferred" not in origin
        assert op.context("qq:group:123456")["ids"][0] == shoes  # the session is the QQ group

    print(f"\n--- AstrBot {run['version']} transcript ---")
    print("system prompt:\n" + system[:300] + "\n…\n" + system[-300:])
    print("newest messages sent:", json.dumps(first["messages"][-2:], ensure_ascii=False)[:800])
    print("tool result:", step["toolResults"][0])
    print("saved history:", json.dumps(step["history"], ensure_ascii=False)[:800])


def test_the_layout_keeps_the_prompt_cache_and_astrbot_never_saves_the_header(run):
    """Consecutive messages of one group: the system prompt is the same bytes; the header
    is the last thing sent, with the newest message, and changes with it; AstrBot's saved
    history never holds it; each request repeats the one before it, header left out, byte
    for byte (what a provider's prompt cache serves)."""
    llm, temp_parts = run["llm"], run["temp_parts"]
    one, two = run["transcript"][0], run["transcript"][1]
    tool_round, answered, second = (llm.requests[i]["json"]["messages"] for i in range(3))

    assert tool_round[0] == answered[0] == second[0], "the system prompt changed between requests"
    assert one["hook"]["systemPrompt"] == two["hook"]["systemPrompt"]

    header1, stable1 = header_sent(tool_round, temp_parts)
    header2, stable2 = header_sent(second, temp_parts)
    assert header1 != header2 and "小王周末去香山爬山" in header2  # re-rendered: the memory the model wrote
    # within the first turn the tool round only appends (AstrBot runs the hook once a turn)
    assert answered[:len(tool_round)] == tool_round
    assert [m["role"] for m in answered[len(tool_round):]] == ["assistant", "tool"]
    # the second turn repeats the first one, header left out, then the answer and the new message
    _, stable_answered = header_sent(answered[:len(tool_round)], temp_parts)
    stable_answered += answered[len(tool_round):]
    assert second[:len(stable_answered)] == stable_answered
    assert second[len(stable_answered)] == {"role": "assistant", "content": [{"type": "text", "text": one["reply"]}]}
    assert SECOND in json.dumps(second[-1], ensure_ascii=False)
    assert len(second) == len(stable_answered) + 2 + (0 if temp_parts else 1)

    # what AstrBot saved, read back from its conversation manager: never the header
    for step, header in ((one, header1), (two, header2)):
        saved = json.dumps(step["history"], ensure_ascii=False)
        assert "Auto-recall" not in saved and header not in saved and PROMPT_START not in saved
    assert [m["role"] for m in two["history"]] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert MESSAGE in json.dumps(two["history"][0], ensure_ascii=False)
    assert SECOND in json.dumps(two["history"][4], ensure_ascii=False)

    # the hook run again on the same request (a retry) leaves it as it was: one prefix, one header
    for again in two["hook"]["retried"]:
        assert again["systemPrompt"] == two["hook"]["systemPrompt"]
        assert again["contexts"] == two["hook"]["contexts"] and again["extraParts"] == two["hook"]["extraParts"]
    where = two["hook"]["extraParts"] if temp_parts else two["hook"]["contexts"]
    assert sum("Auto-recall" in json.dumps(x, ensure_ascii=False) for x in where) == 1


def test_usage_is_reported_to_zcord_after_each_answer(run):
    """After each answer the plugin sends `zcor/usage/report` with the provider's counts and
    what zcor added; zcord records it (a refusal would be ignored by the plugin: the driver
    counts the calls and keeps each answer)."""
    one, two = run["transcript"][0], run["transcript"][1]
    for step in (one, two):
        (report,) = step["usageReports"]  # one per answer AstrBot hands to plugins
        params = report["params"]
        header, _ = header_sent(run["llm"].requests[2 if step is two else 0]["json"]["messages"], run["temp_parts"])
        assert params == {"session": "qq:group:123456", "frontEnd": "astrbot", "model": "fake", "protocol": "openai",
                          "inputTokens": 1800, "cachedTokens": 1536, "cacheWriteTokens": 0, "outputTokens": 12,
                          "prefixChars": len(block_of(step["hook"]["systemPrompt"])), "headerChars": len(header)}
        assert report.get("result") == {"recorded": True}, report
    assert two["reply"] == "防水的喵"  # the report, taken or refused, cost the conversation nothing
    for step in run["transcript"][3:]:
        assert step["usageReports"] == []  # zcord down: nothing to report to


def test_relationship_tools_follow_the_daemon_switch(run):
    step, llm = run["transcript"][2], run["llm"]
    assert step["plugin"]["config"]["socket"] == str(run["off"].sock)  # reloaded with the new setting
    assert not REL_TOOLS & set(step["hook"]["tools"]) and "zcor_memory_write" in step["hook"]["tools"]
    sent = {t["function"]["name"] for t in llm.requests[3]["json"]["tools"]}
    assert not REL_TOOLS & sent and "zcor_memory_write" in sent
    assert "zcor_relationship" not in step["hook"]["systemPrompt"]  # nor their guidance
    assert step["reply"] == "嗯嗯"


def test_a_daemon_that_is_down_leaves_the_bot_answering_without_memory(run):
    log, llm = run["log"], run["llm"]
    stopped, nowhere = run["transcript"][3], run["transcript"][4]
    assert len(llm.requests) == 6
    for step, request in ((stopped, llm.requests[4]), (nowhere, llm.requests[5])):
        system = step["hook"]["systemPrompt"]
        assert PROMPT_START not in system and ASTRBOT_PROMPT in system
        assert not any(t.startswith("zcor_") for t in step["hook"]["tools"])
        assert request["json"]["messages"][0] == {"role": "system", "content": system}
        assert "Auto-recall" not in json.dumps(request["json"]["messages"], ensure_ascii=False)
    assert stopped["reply"] == "刚才走神了" and nowhere["reply"] == "我在呢"
    assert f"zcor: zcord at {run['off'].sock} is unavailable" in log  # the connection it had broke
    assert f"zcor: zcord at {run['nobody']} is unavailable" in log and "answering without memory" in log
    # no traceback through the plugin or zcord's client; AstrBot's own shutdown may print one
    # that is not (4.29.3: SQLAlchemy's pool finalizing an aiosqlite connection cancelled
    # under it, "Exception ignored in ... _finalize_fairy")
    assert not [t for t in tracebacks(log) if "zcor" in t]
    assert tracebacks("x\nTraceback (most recent call last):\n  File \"/p/astrbot_plugin_zcor/main.py\"\nE: y\nz") \
        == ['Traceback (most recent call last):\n  File "/p/astrbot_plugin_zcor/main.py"\nE: y']


def tracebacks(log: str) -> list[str]:
    """Each traceback the log holds, from its first line to its exception's line (the first
    line after it that is not indented)."""
    lines = log.splitlines()
    out = []
    for k, line in enumerate(lines):
        if "Traceback (most recent call last):" in line:
            end = next((j for j in range(k + 1, len(lines)) if lines[j] and not lines[j][0].isspace()), len(lines) - 1)
            out.append("\n".join(lines[k:end + 1]))
    return out
