"""Drive contrib/astrbot/astrbot_plugin_zcor with the real `astrbot` package.

Run by tests/integration/test_astrbot.py (and bench/bench_cache_astrbot.py) with the Python of
an AstrBot venv (.venv-astrbot, .venv-astrbot-latest: AstrBot's pins clash with ours).
Everything AstrBot-side is AstrBot's own: the plugin is copied into an AstrBot data directory
and AstrBot's core lifecycle starts (its databases, persona, provider, conversation and plugin
managers, the built-in plugins, the message pipeline; not the WebUI nor any platform
connection). Its one chat provider is AstrBot's OpenAI provider, whose API base is the
scripted fake LLM of the outer test. Each step is a QQ group message (@ the bot) that goes
through AstrBot's whole pipeline: waking, the LLM-request hook, the agent runner with its
tool executor (so the model's tool calls run through AstrBot's tool machinery), the reply,
and AstrBot saving the conversation history, which the driver reads back from AstrBot's
conversation manager after each step.

A step naming another socket first changes the plugin's setting and has AstrBot reload the
plugin, as saving its settings in the WebUI does; a step with "kill": PID first stops that
zcord (SIGTERM) and waits for its socket to go; a step with "retries": N then runs the
LLM-request hook N more times on the step's request, as a retried request does (what each run
leaves is in the transcript); a step with "private": true is a QQ private (friend) message from
its sender instead of a group message. The plugin's client calls of `zcor/usage/report` are counted
(method, params, and whether zcord answered or refused).
Prints one JSON line: what each step saw (the transcript the outer test checks).

Usage: python drive_plugin.py ROOT PLUGIN_DIR|- LLM_BASE_URL '[{"socket": ..., "message": ...}, ...]'
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

SYSTEM_PROMPT = "你是群里的聊天机器人。"
"""The persona's prompt, set in AstrBot (its default persona), after zcor's prefix; the first
step's "systemPrompt" replaces it."""


def settings(root: Path, plugin: str, sock: str) -> None:
    """The plugin's settings as AstrBot's WebUI saves them."""
    (root / "data" / "config" / f"{plugin}_config.json").write_text(json.dumps({
        "socket": sock, "session_template": "{platform}:{chat}:{chat_id}",
        "sender_template": "qq:{sender_id}", "timeout_seconds": 10.0}), encoding="utf-8-sig")


def dump(value: object) -> object:
    """A ProviderRequest field as JSON (AstrBot's pydantic parts and messages as dicts)."""
    if isinstance(value, list):
        return [dump(v) for v in value]
    if hasattr(value, "model_dump"):
        out = value.model_dump()
        if getattr(value, "_no_save", False):
            out["_no_save"] = True
        return out
    return value


async def main(root: Path, plugin_src: Path, llm_url: str, steps: list[dict]) -> list[dict]:
    os.environ["ASTRBOT_ROOT"] = str(root)
    os.environ["ASTRBOT_DISABLE_METRICS"] = "1"  # AstrBot would post usage ticks to its own server
    os.chdir(root)
    sys.path.insert(0, str(root))  # AstrBot imports plugins as data.plugins.<dir>.main
    (root / "data" / "plugins").mkdir(parents=True, exist_ok=True)
    (root / "data" / "config").mkdir(parents=True, exist_ok=True)
    plugged = plugin_src.name != "-"  # "-": AstrBot without the plugin (bench_cache_astrbot's ceiling)
    if plugged:
        shutil.copytree(plugin_src, root / "data" / "plugins" / plugin_src.name)
        settings(root, plugin_src.name, steps[0]["socket"])

    import astrbot.core.core_lifecycle as lifecycle  # AstrBot's own import order: some modules are circular
    from astrbot.core import LogBroker, astrbot_config, db_helper
    from astrbot.core.message.components import At, Plain
    from astrbot.core.pipeline.context_utils import call_event_hook
    from astrbot.core.platform import AstrBotMessage, MessageMember, MessageType
    from astrbot.core.platform.astrbot_message import Group
    from astrbot.core.platform.platform_metadata import PlatformMetadata
    from astrbot.core.provider.sources.openai_source import ProviderOpenAIOfficial
    from astrbot.core.star.star import star_map
    from astrbot.core.star.star_handler import EventType

    astrbot_config["provider_settings"]["datetime_system_prompt"] = False  # a clock in every message: not ours to test
    async def offline() -> None:  # AstrBot would fetch model metadata from the internet at start
        pass

    lifecycle.update_llm_metadata = offline
    core = lifecycle.AstrBotCoreLifecycle(LogBroker(), db_helper)
    await core.initialize()  # loads the plugin (and AstrBot's built-in ones) with AstrBot's PluginManager
    provider = ProviderOpenAIOfficial({"id": "fake", "type": "openai_chat_completion", "key": ["sk-test"],
                                       "api_base": llm_url, "model": "fake-model", "timeout": 30}, {})
    core.provider_manager.inst_map["fake"] = provider
    core.provider_manager.provider_insts.append(provider)
    prompt = steps[0].get("systemPrompt", SYSTEM_PROMPT)
    if any(p.persona_id == "default" for p in core.persona_mgr.personas):  # newer: the default persona is stored
        await core.persona_mgr.update_persona(persona_id="default", system_prompt=prompt)
    else:  # 4.14: a persona of its own, made the default in the settings
        persona = await core.persona_mgr.create_persona(persona_id="group-bot", system_prompt=prompt)
        astrbot_config["provider_settings"]["default_personality"] = persona.persona_id
        core.persona_mgr.default_persona = persona.persona_id
    scheduler = core.pipeline_scheduler_mapping["default"]
    conversations = core.conversation_manager

    reports: list[dict] = []
    sock = steps[0]["socket"]
    transcript = []
    for n, step in enumerate(steps):
        if step.get("kill"):  # zcord goes away under a connected plugin
            os.kill(step["kill"], signal.SIGTERM)
            deadline = time.monotonic() + 40
            while os.path.exists(step["socket"]) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        if step["socket"] != sock and plugged:
            sock = step["socket"]
            settings(root, plugin_src.name, sock)
            ok, error = await core.plugin_manager.reload(specified_plugin_name=plugin_name(star_map, plugin_src.name))
            assert ok is not False, f"AstrBot did not reload the plugin: {error}"
        out: dict = {"plugin": None}
        if plugged:
            metadata = next(m for m in star_map.values() if m.root_dir_name == plugin_src.name)
            count_usage_reports(metadata.star_cls, reports)
            out["plugin"] = {"name": metadata.name, "class": type(metadata.star_cls).__name__,
                             "config": dict(metadata.config or {})}
        message = step["message"]
        # a QQ group message that @s the bot, as AstrBot's aiocqhttp adapter builds it
        msg = AstrBotMessage()
        sender = step.get("sender", "42")
        if step.get("private"):  # a QQ private (friend) message, as the adapter builds it: no group
            msg.type = MessageType.FRIEND_MESSAGE
            msg.self_id, msg.session_id, msg.message_id = "10000", sender, str(n + 1)
        else:
            msg.type = MessageType.GROUP_MESSAGE
            msg.self_id, msg.session_id, msg.message_id = "10000", "123456", str(n + 1)
            msg.group = Group(group_id="123456", group_name="周末爬山")
        msg.sender = MessageMember(user_id=sender, nickname=step.get("nickname", "小王"))
        msg.message = [Plain(message)] if step.get("private") else [At(qq="10000"), Plain(message)]
        msg.message_str = message
        msg.raw_message = None
        msg.timestamp = int(time.time())
        meta = PlatformMetadata(name="aiocqhttp", description="QQ (OneBot v11)", id="qq")
        event = Sent(message, msg, meta, session_id=msg.session_id)

        before = len(reports)
        await scheduler.execute(event)
        req = event.get_extra("provider_request")
        out["hook"] = {"systemPrompt": req.system_prompt if req else None,
                       "tools": req.func_tool.names() if req and req.func_tool else [],
                       "contexts": dump(list(req.contexts)) if req else [],
                       "extraParts": dump(list(req.extra_user_content_parts)) if req else []}
        retried = []
        for _ in range(step.get("retries", 0)):  # AstrBot retrying the request: the hook runs again on it
            await call_event_hook(event, EventType.OnLLMRequestEvent, req)
            retried.append({"systemPrompt": req.system_prompt, "contexts": dump(list(req.contexts)),
                            "extraParts": dump(list(req.extra_user_content_parts))})
        out["hook"]["retried"] = retried
        out["replies"] = event.replies
        out["reply"] = event.replies[-1] if event.replies else None
        # what AstrBot saved: the conversation's history, read back from its conversation manager
        umo = event.unified_msg_origin
        cid = await conversations.get_curr_conversation_id(umo)
        conv = await conversations.get_conversation(umo, cid) if cid else None
        history = conv.history if conv else []
        out["history"] = json.loads(history) if isinstance(history, str) else history
        done = transcript[-1]["history"] if transcript else []
        out["toolResults"] = [m.get("content") for m in out["history"][len(done):] if m.get("role") == "tool"]
        out["usageReports"] = reports[before:]
        transcript.append(out)
    if plugged:
        metadata = next(m for m in star_map.values() if m.root_dir_name == plugin_src.name)
        await metadata.star_cls.terminate()
    return transcript


class _SentMixin:
    """An event that keeps what AstrBot sends back (the platform adapter's part)."""

    replies: list[str]

    async def send(self, message) -> None:  # type: ignore[no-untyped-def]
        text = "".join(getattr(c, "text", "") for c in message.chain)
        if text:
            self.replies.append(text)
        await super().send(message)  # type: ignore[misc]


def _event_class():
    from astrbot.core.platform import AstrMessageEvent

    class SentEvent(_SentMixin, AstrMessageEvent):
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)
            self.replies = []

    return SentEvent


def Sent(*args, **kwargs):  # type: ignore[no-untyped-def]
    return _event_class()(*args, **kwargs)


def count_usage_reports(plugin: object, reports: list[dict]) -> None:
    """Record the plugin's `zcor/usage/report` requests (zcord may not know the method yet)."""
    c = getattr(sys.modules[type(plugin).__module__], "AsyncClient", None)
    if c is not None and not getattr(c, "_zcor_counted", False):
        original = c.request

        async def request(self, method, params=None, *args, _original=original, **kwargs):  # type: ignore[no-untyped-def]
            if method != "zcor/usage/report":
                return await _original(self, method, params, *args, **kwargs)
            entry = {"method": method, "params": params}
            reports.append(entry)
            try:
                result = await _original(self, method, params, *args, **kwargs)
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {e}"
                raise
            entry["result"] = result
            return result

        c.request = request
        c._zcor_counted = True


def plugin_name(star_map: dict, root_dir: str) -> str:
    return next(m.name for m in star_map.values() if m.root_dir_name == root_dir)


if __name__ == "__main__":
    root, plugin, url, spec = sys.argv[1:5]
    result = asyncio.run(main(Path(root), Path(plugin), url, json.loads(spec)))
    print("TRANSCRIPT " + json.dumps(result, ensure_ascii=False, default=str))
