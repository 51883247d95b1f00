"""The AstrBot plugin (contrib/astrbot/astrbot_plugin_zcor) with the real `astrbot` package.

AstrBot pins versions that clash with ours, so it lives in a venv of its own (.venv-astrbot,
made by `make astrbot-env`, which `make test` runs); $ZCOR_ASTRBOT_PYTHON names its Python.
tests/astrbot/drive_plugin.py runs there: AstrBot loads the plugin, a QQ group message goes
through AstrBot's LLM-request hook and then AstrBot's agent runner, whose OpenAI provider
talks to the scripted fake LLM below, so the model's tool call runs through AstrBot's tool
machinery into the real daemon. This side checks what the model was sent and the Memory.
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


@pytest.fixture(scope="module", params=list(ASTRBOTS))
def run(request, tmp_path_factory):
    """One AstrBot process (its start-up is slow) through four steps: a group message on a
    daemon with relationship memory on; one on a daemon with it off; one after that daemon
    stopped under the connected plugin; one with the setting pointing at no daemon at all.
    Once with AstrBot 4.14 (the last for Python 3.11), once with the newest."""
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
        llm.script += [openai_tools(("zcor_memory_write", write_args)), openai_text("好呀，注意安全喵～"),
                       openai_text("嗯嗯"), openai_text("刚才走神了"), openai_text("我在呢")]
        transcript, log = drive(llm.url, [{"socket": str(on.sock), "message": MESSAGE},
                                          {"socket": str(off.sock), "message": "你还记得我吗"},
                                          {"socket": str(off.sock), "message": "登山鞋呢", "kill": off.proc.pid},
                                          {"socket": nobody, "message": "在吗"}], python)
    yield {"on": on, "off": off, "shoes": shoes, "write_args": write_args, "llm": llm,
           "transcript": transcript, "log": log, "nobody": nobody}
    problems = factory.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


def test_a_group_message_gets_memory_and_the_model_writes_through_astrbot(run):
    on, shoes, write_args, llm = run["on"], run["shoes"], run["write_args"], run["llm"]
    step = run["transcript"][0]

    # the plugin was registered and configured by AstrBot itself
    assert step["plugin"]["class"] == "ZcorMemory" and step["plugin"]["name"] == "astrbot_plugin_zcor"
    assert step["plugin"]["config"]["socket"] == str(on.sock)

    # the hook put prefix and context header into the system prompt, and the tools into the request
    system = step["hook"]["systemPrompt"]
    assert step["hook"]["stopped"] is False
    assert system.index(PERSONA) < system.index("external_event_frame") < system.index("[" + shoes + "]")
    assert "小王的登山鞋" in system and "周五的会议" not in system  # recalled for this message only
    assert system.rstrip().endswith("你是群里的聊天机器人。")  # AstrBot's own prompt is kept, after zcor's
    assert {"zcor_memory_write", "zcor_memory_search"} | REL_TOOLS <= set(step["hook"]["tools"])
    assert "external_event_frame" not in step["hook"]["tools"]

    # what AstrBot's OpenAI provider sent to the model
    first = llm.requests[0]["json"]
    assert first["messages"][0] == {"role": "system", "content": system}
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

    print("\n--- AstrBot transcript ---")
    print("system prompt:\n" + system[:300] + "\n…\n" + system[-700:])
    print("tool call: zcor_memory_write", json.dumps(write_args, ensure_ascii=False))
    print("tool result:", step["toolResults"][0])
    print("memory:", json.dumps(node, ensure_ascii=False))
    print("reply:", step["reply"])


def test_relationship_tools_follow_the_daemon_switch(run):
    step, llm = run["transcript"][1], run["llm"]
    assert step["plugin"]["config"]["socket"] == str(run["off"].sock)  # reloaded with the new setting
    assert not REL_TOOLS & set(step["hook"]["tools"]) and "zcor_memory_write" in step["hook"]["tools"]
    sent = {t["function"]["name"] for t in llm.requests[2]["json"]["tools"]}
    assert not REL_TOOLS & sent and "zcor_memory_write" in sent
    assert "zcor_relationship" not in step["hook"]["systemPrompt"]  # nor their guidance
    assert step["reply"] == "嗯嗯"


def test_a_daemon_that_is_down_leaves_the_bot_answering_without_memory(run):
    log, llm = run["log"], run["llm"]
    stopped, nowhere = run["transcript"][2], run["transcript"][3]
    assert len(llm.requests) == 5
    for step, request in ((stopped, llm.requests[3]), (nowhere, llm.requests[4])):
        assert step["hook"]["systemPrompt"] == "你是群里的聊天机器人。"
        assert not any(t.startswith("zcor_") for t in step["hook"]["tools"])
        assert request["json"]["messages"][0] == {"role": "system", "content": "你是群里的聊天机器人。"}
    assert stopped["reply"] == "刚才走神了" and nowhere["reply"] == "我在呢"
    assert f"zcor: zcord at {run['off'].sock} is unavailable" in log  # the connection it had broke
    assert f"zcor: zcord at {run['nobody']} is unavailable" in log and "answering without memory" in log
    assert "Traceback" not in log
