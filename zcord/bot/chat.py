"""`zcor chat`: the console World. A terminal chat with the persona, through the daemon.

Each line the person types is one batch of external events, delivered to the model as a
synthesized external_event_frame call/result pair; auto-recall runs on it and the context
header is put in front of the request (never stored). The model's memory tool calls run
through zcord and are shown to the person. Commands: /recall, /prefix, /tools, /help, /quit.

At a terminal the line is read with the standard library's readline where it exists
(arrow keys edit, up recalls earlier lines, kept in $XDG_STATE_HOME/zcor/chat_history);
elsewhere lines are read plainly. Ctrl-C leaves with exit code 130.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TextIO

from ..core.config import Config, ConfigFile, LlmConfig, api_key_for
from ..core.errors import ZcorError
from ..retrieval.llm import Provider
from ..transport.client import ClientError, RpcError
from ..transport.shown import shown
from .bot import Conversation, MemoryBot, ToolUse

HELP = """Type a message and press Enter. Commands:
  /recall   the auto-recall header the model gets with the next request
  /prefix   the system prefix (persona, rules, important memories)
  /tools    the tools declared to the model
  /quit     leave (Ctrl-D works too)
Arrow keys edit the line; up and down go through earlier lines."""

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


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
HISTORY_LENGTH = 1000


def history_path(env: Mapping[str, str] = os.environ) -> Path:
    """Where typed lines are kept between runs: $XDG_STATE_HOME/zcor/chat_history."""
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "zcor" / "chat_history"


class LineReader:
    """Reads the person's lines: with readline's editing and history when both ends are a
    terminal and the module exists, else plainly from `inp` (pipes, tests, no readline)."""

    def __init__(self, out: TextIO, inp: TextIO, history_file: Path | None = None):
        self.out, self.inp = out, inp
        self.history_file = history_file
        self.readline: ModuleType | None = None
        if inp is sys.stdin and out is sys.stdout and inp.isatty() and out.isatty():
            try:
                import readline  # only at a terminal; some builds have none
            except ImportError:
                pass
            else:
                self.readline = readline
        if self.readline is not None and history_file is not None:
            self.readline.set_history_length(HISTORY_LENGTH)
            try:
                self.readline.read_history_file(history_file)
            except OSError:
                pass  # none yet, or unreadable: start with the lines of this run only

    def read(self, prompt: str) -> str | None:
        """One line without its newline; None at the end of input (Ctrl-D)."""
        if self.readline is not None:
            try:
                return input(prompt)
            except EOFError:
                return None
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        return line.rstrip("\n") if line else None

    def save(self) -> None:
        """Keep this run's lines for the next (a file only its owner can read)."""
        if self.readline is None or self.history_file is None:
            return
        try:
            self.history_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.history_file, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            self.readline.write_history_file(self.history_file)
        except OSError as e:
            print(f"zcor chat: could not keep the line history in {self.history_file}: {e.strerror or e}",
                  file=sys.stderr)


def run(bot: MemoryBot, provider: Provider | None, out: TextIO, inp: TextIO, sender: str,
        streaming: bool = True, reader: LineReader | None = None,
        waiting: Callable[[bool], None] = lambda _: None) -> int:
    """The chat loop; `waiting(True)` while a reply is being fetched, `waiting(False)` after."""
    reader = reader or LineReader(out, inp)
    conv = Conversation(bot, provider) if provider else None
    turns = 0  # messages delivered: /recall tells "nothing yet" from "the last one recalled nothing"
    out.write(f"zcor chat — session {bot.session}{' (private)' if bot.private else ''}. /help for commands.\n")
    if conv is None:
        out.write(NOT_CONFIGURED + "\n")
    out.flush()
    while True:
        line = reader.read("> ")
        if line is None:
            out.write("\n")
            return 0
        text = line
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
                out.write(shown(bot.context_header() or (
                    "(the last message recalled nothing: the model's next request gets no auto-recall header)"
                    if turns else "(nothing recalled for this session yet: send a message first)")) + "\n")
            elif text.strip() == "/tools":
                for tool in bot.tools():
                    out.write(shown(f"  {tool['name']}: {tool['description']}") + "\n")
            elif conv is None:
                out.write(NOT_CONFIGURED + "\n")
            else:
                midline = [False]

                def show(use: ToolUse, midline: list[bool] = midline) -> None:
                    mark = "·" if use.ok else "✗"
                    out.write(("\n" if midline[0] else "") + shown(f"  {mark} {use.name}: {use.summary}") + "\n")
                    midline[0] = False
                    out.flush()

                def stream(piece: str, midline: list[bool] = midline) -> None:
                    out.write(shown(piece))
                    midline[0] = not piece.endswith("\n")
                    out.flush()

                waiting(True)
                turns += 1
                answer = conv.handle([{"text": text, "origin": "external", "senderKey": sender,
                                       "source": bot.session}], on_tool=show,
                                     on_text=stream if streaming else None)
                waiting(False)
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
    ap.add_argument("--private", action="store_true",
                    help="a one-to-one conversation: what it creates stays in this session (privateScope)")
    ap.add_argument("--no-stream", action="store_true", help="wait for whole replies instead of streaming")
    ap.add_argument("--no-history-file", action="store_true",
                    help=f"keep typed lines in memory only, not in {history_path()}")
    args = ap.parse_args(argv)
    reader = LineReader(out, inp, None if args.no_history_file else history_path())
    in_reply = [False]
    try:
        try:
            bot = MemoryBot.connect(args.session, args.socket, private=args.private)
        except ClientError as e:
            print(f"zcor chat: {e}", file=sys.stderr)
            return 2
        with bot:
            cfg = provider_config(bot)
            try:
                provider = Provider(cfg, api_key_for(cfg.base_url))
            except ZcorError:
                provider = None
            return run(bot, provider, out, inp, args.sender, streaming=not args.no_stream, reader=reader,
                       waiting=lambda now: in_reply.__setitem__(0, now))
    except KeyboardInterrupt:
        what = "the reply that was coming is dropped" if in_reply[0] else "bye"
        out.write("\n")
        out.flush()
        print(f"zcor chat: interrupted (Ctrl-C); {what}.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        reader.save()


if __name__ == "__main__":
    raise SystemExit(main())
