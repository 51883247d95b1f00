"""`zcor chat`: the console World. A terminal chat with the persona, through the daemon.

Each line the person types is one batch of external events, delivered to the model as a
synthesized external_event_frame call/result pair; auto-recall runs on it and the context
header is put in front of the request (never stored). The model's memory tool calls run
through zcord and are shown to the person. Commands: /recall, /prefix, /tools, /help, /quit.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TextIO

from .bot import Conversation, MemoryBot, ToolUse
from ..transport.client import ClientError, RpcError
from ..transport.shown import shown
from ..core.config import Config, ConfigFile, LlmConfig, api_key_for
from ..core.errors import ZcorError
from ..retrieval.llm import Provider

HELP = """Type a message and press Enter. Commands:
  /recall   the auto-recall header the model gets with the next request
  /prefix   the system prefix (persona, rules, important memories)
  /tools    the tools declared to the model
  /quit     leave (Ctrl-D works too)"""

NOT_CONFIGURED = """No LLM provider is configured for zcor chat. Set, for example:
  export ZCOR_LLM_PROTOCOL=openai            # or anthropic
  export ZCOR_LLM_BASE_URL=http://127.0.0.1:8080/v1
  export ZCOR_LLM_MODEL=your-model-name
  export ZCOR_LLM_API_KEY=...                # if the provider needs one
or set llm.protocol / llm.baseUrl / llm.model in the Memory's config.json (zcor-tui → Config)."""


def provider_config(bot: MemoryBot) -> LlmConfig:
    """The deployment's provider (the daemon's setting), with this process's ZCOR_LLM_*
    environment variables on top."""
    try:
        llm = LlmConfig.model_validate(bot.client.request("zcor/llm"))
    except (RpcError, ValueError):
        llm = LlmConfig()
    return ConfigFile._with_env(Config(llm=llm)).llm


def run(bot: MemoryBot, provider: Provider | None, out: TextIO, inp: TextIO, sender: str,
        streaming: bool = True) -> int:
    conv = Conversation(bot, provider) if provider else None
    out.write(f"zcor chat — session {bot.session}. /help for commands.\n")
    if conv is None:
        out.write(NOT_CONFIGURED + "\n")
    out.flush()
    while True:
        out.write("> ")
        out.flush()
        line = inp.readline()
        if not line:
            out.write("\n")
            return 0
        text = line.rstrip("\n")
        if not text.strip():
            continue
        try:
            if text.strip() == "/quit":
                return 0
            if text.strip() == "/help":
                out.write(HELP + "\n")
            elif text.strip() == "/prefix":
                out.write(shown(bot.prefix()) + "\n")
            elif text.strip() == "/recall":
                out.write(shown(bot.context_header() or "(nothing recalled for this session yet)") + "\n")
            elif text.strip() == "/tools":
                for tool in bot.tools():
                    out.write(shown(f"  {tool['name']}: {tool['description']}") + "\n")
            elif conv is None:
                out.write(NOT_CONFIGURED + "\n")
            else:
                midline = [False]

                def show(use: ToolUse) -> None:
                    mark = "·" if use.ok else "✗"
                    out.write(("\n" if midline[0] else "") + shown(f"  {mark} {use.name}: {use.summary}") + "\n")
                    midline[0] = False
                    out.flush()

                def stream(piece: str) -> None:
                    out.write(shown(piece))
                    midline[0] = not piece.endswith("\n")
                    out.flush()

                answer = conv.handle([{"text": text, "origin": "external", "senderKey": sender,
                                       "source": bot.session}], on_tool=show,
                                     on_text=stream if streaming else None)
                out.write(("" if streaming else shown(answer)) + "\n")
        except ZcorError as e:
            out.write(shown(f"[error] {e.message}") + "\n")
        except ClientError as e:
            out.write(shown(f"[error] {e}") + "\n")
        out.flush()


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, inp: TextIO = sys.stdin) -> int:
    ap = argparse.ArgumentParser(prog="zcor chat", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--socket", help="zcord socket (default: $ZCOR_SOCKET or the daemon's default)")
    ap.add_argument("--session", default="console", help="session key (default: console)")
    ap.add_argument("--sender", default=f"console:{getpass.getuser()}", help="the sender key of your lines")
    ap.add_argument("--no-stream", action="store_true", help="wait for whole replies instead of streaming")
    args = ap.parse_args(argv)
    try:
        bot = MemoryBot.connect(args.session, args.socket)
    except ClientError as e:
        print(f"zcor chat: {e}", file=sys.stderr)
        return 2
    with bot:
        cfg = provider_config(bot)
        try:
            provider = Provider(cfg, api_key_for(cfg.base_url))
        except ZcorError:
            provider = None
        return run(bot, provider, out, inp, args.sender, streaming=not args.no_stream)


if __name__ == "__main__":
    raise SystemExit(main())
