"""Drive contrib/astrbot/astrbot_plugin_zcor with the real `astrbot` package.

Run by tests/integration/test_astrbot.py with the Python of the AstrBot test venv
(.venv-astrbot: AstrBot's pins clash with ours). Everything AstrBot-side is AstrBot's own:
the plugin is copied into an AstrBot data directory and loaded by AstrBot's PluginManager
(its registration, config schema and handler binding); a group message is an
AstrMessageEvent from an AstrBotMessage; the LLM-request hook runs through AstrBot's
call_event_hook; the request then goes through AstrBot's ToolLoopAgentRunner with its
FunctionToolExecutor and its OpenAI provider, whose API base is the scripted fake LLM of
the outer test, so the model's tool call is executed by AstrBot's tool machinery.

Each step of the spec is one message; a step naming another socket first changes the
plugin's setting and has AstrBot reload the plugin, as saving its settings in the WebUI does;
a step with "kill": PID first stops that zcord (SIGTERM) and waits for its socket to go; a
step with "retries": N runs the LLM-request hook N more times on the same request, as a
retried request does (each system prompt it leaves is in the transcript).
Prints one JSON line: what each step saw (the transcript the outer test checks).

Usage: python drive_plugin.py ROOT PLUGIN_DIR LLM_BASE_URL '[{"socket": ..., "message": ...}, ...]'
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path


def settings(root: Path, plugin: str, sock: str) -> None:
    """The plugin's settings as AstrBot's WebUI saves them."""
    (root / "data" / "config" / f"{plugin}_config.json").write_text(json.dumps({
        "socket": sock, "session_template": "{platform}:{chat}:{chat_id}",
        "sender_template": "qq:{sender_id}", "timeout_seconds": 10.0}), encoding="utf-8-sig")


async def main(root: Path, plugin_src: Path, llm_url: str, steps: list[dict]) -> list[dict]:
    os.environ["ASTRBOT_ROOT"] = str(root)
    os.chdir(root)
    sys.path.insert(0, str(root))  # AstrBot imports plugins as data.plugins.<dir>.main
    (root / "data" / "plugins").mkdir(parents=True, exist_ok=True)
    (root / "data" / "config").mkdir(parents=True, exist_ok=True)
    shutil.copytree(plugin_src, root / "data" / "plugins" / plugin_src.name)
    settings(root, plugin_src.name, steps[0]["socket"])

    import astrbot.core.core_lifecycle  # noqa: F401  (AstrBot's own import order: some modules are circular)
    from astrbot.core import astrbot_config, db_helper
    from astrbot.core.agent.runners.tool_loop_agent_runner import ToolLoopAgentRunner
    from astrbot.core.astr_agent_context import AgentContextWrapper, AstrAgentContext
    from astrbot.core.astr_agent_hooks import MAIN_AGENT_HOOKS
    from astrbot.core.astr_agent_tool_exec import FunctionToolExecutor
    from astrbot.core.message.components import Plain
    from astrbot.core.pipeline.context_utils import call_event_hook
    from astrbot.core.platform import AstrBotMessage, AstrMessageEvent, MessageMember, MessageType
    from astrbot.core.platform.astrbot_message import Group
    from astrbot.core.platform.platform_metadata import PlatformMetadata
    from astrbot.core.provider.entities import ProviderRequest
    from astrbot.core.provider.sources.openai_source import ProviderOpenAIOfficial
    from astrbot.core.star.context import Context
    from astrbot.core.star.star import star_map
    from astrbot.core.star.star_handler import EventType
    from astrbot.core.star.star_manager import PluginManager

    await db_helper.initialize()
    context = Context(asyncio.Queue(), astrbot_config, db_helper, None, None, None, None, None, None, None, None)
    manager = PluginManager(context, astrbot_config)
    ok, error = await manager.load(specified_dir_name=plugin_src.name)
    assert ok, f"AstrBot did not load the plugin: {error}"
    sock = steps[0]["socket"]
    provider = ProviderOpenAIOfficial({"id": "fake", "type": "openai_chat_completion", "key": ["sk-test"],
                                       "api_base": llm_url, "model": "fake-model", "timeout": 30}, {})
    transcript = []
    for step in steps:
        if step.get("kill"):  # zcord goes away under a connected plugin
            os.kill(step["kill"], signal.SIGTERM)
            deadline = time.monotonic() + 40
            while os.path.exists(step["socket"]) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        if step["socket"] != sock:
            sock = step["socket"]
            settings(root, plugin_src.name, sock)
            ok, error = await manager.reload(specified_plugin_name=plugin_name(star_map, plugin_src.name))
            assert ok, f"AstrBot did not reload the plugin: {error}"
        metadata = next(m for m in star_map.values() if m.root_dir_name == plugin_src.name)
        out: dict = {"plugin": {"name": metadata.name, "class": type(metadata.star_cls).__name__,
                                "config": dict(metadata.config or {})}}
        message = step["message"]
        # a QQ group message, as AstrBot's aiocqhttp adapter builds it
        msg = AstrBotMessage()
        msg.type = MessageType.GROUP_MESSAGE
        msg.self_id, msg.session_id, msg.message_id = "10000", "123456", "1"
        msg.group = Group(group_id="123456", group_name="周末爬山")
        msg.sender = MessageMember(user_id="42", nickname="小王")
        msg.message = [Plain(message)]
        msg.message_str = message
        msg.raw_message = None
        meta = PlatformMetadata(name="aiocqhttp", description="QQ (OneBot v11)", id="qq")
        event = AstrMessageEvent(message, msg, meta, session_id="123456")

        req = ProviderRequest(prompt=message, system_prompt="你是群里的聊天机器人。", contexts=[])
        stopped = await call_event_hook(event, EventType.OnLLMRequestEvent, req)
        out["hook"] = {"stopped": stopped, "systemPrompt": req.system_prompt,
                       "tools": req.func_tool.names() if req.func_tool else []}
        retried = []
        for _ in range(step.get("retries", 0)):  # AstrBot retrying the request: the hook runs again on it
            await call_event_hook(event, EventType.OnLLMRequestEvent, req)
            retried.append(req.system_prompt)
        out["hook"]["retried"] = retried

        runner = ToolLoopAgentRunner()
        await runner.reset(provider=provider, request=req,
                           run_context=AgentContextWrapper(context=AstrAgentContext(context=context, event=event),
                                                           tool_call_timeout=30),
                           tool_executor=FunctionToolExecutor(), agent_hooks=MAIN_AGENT_HOOKS, streaming=False)
        async for _ in runner.step_until_done(5):
            pass
        final = runner.get_final_llm_resp()
        out["reply"] = final.completion_text if final else None
        out["toolResults"] = [m.content for m in runner.run_context.messages if m.role == "tool"]
        transcript.append(out)
    metadata = next(m for m in star_map.values() if m.root_dir_name == plugin_src.name)
    await metadata.star_cls.terminate()
    return transcript


def plugin_name(star_map: dict, root_dir: str) -> str:
    return next(m.name for m in star_map.values() if m.root_dir_name == root_dir)


if __name__ == "__main__":
    root, plugin, url, spec = sys.argv[1:5]
    result = asyncio.run(main(Path(root), Path(plugin), url, json.loads(spec)))
    print("TRANSCRIPT " + json.dumps(result, ensure_ascii=False, default=str))
