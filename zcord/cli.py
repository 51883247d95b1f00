"""Command lines: `zcord` (the daemon) and `zcor` (the client).

`zcor` talks to the daemon as an operator (actor `operator`), except `zcor mcp`, which
passes an MCP host's messages through and is always the bot (a role the host asks for at
initialize is removed), `zcor call --bot`, and `zcor chat` (zcord.bot.chat, the console bot).

Exit codes of `zcor`: 0 success, 1 the daemon refused (tool error, bad request),
2 usage error, 3 the daemon cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import threading
from typing import Any

from . import __version__
from .core import protocol as P
from .core.fence import fence_reply_line
from .transport.affinity import affinity_series, sparkline, sparkline_scale
from .transport.client import (
    Client,
    ClientError,
    ConnectionLost,
    DaemonUnavailable,
    RequestTimeout,
    RpcError,
    ToolError,
)
from .transport.paths import (
    UnsafeSocket,
    check_client_socket,
    check_peer,
    client_socket,
    daemon_socket,
    memory_dir,
)
from .transport.shown import json_shown, shown
from .transport.timeforms import parse_instant, parse_local
from .transport.wording import change_targets, for_operator, human_size

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


# -- zcord ------------------------------------------------------------------------------------


def daemon_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="zcord", description="The zcor memory daemon: owns one Memory directory and serves it "
                                  "over a Unix socket (JSON-RPC 2.0 / MCP, one message per line).")
    parser.add_argument("--memory-dir", metavar="DIR",
                        help="the Memory directory (default: $STATE_DIRECTORY, else "
                             "$XDG_DATA_HOME/zcor/memory or ~/.local/share/zcor/memory)")
    parser.add_argument("--socket", metavar="PATH",
                        help="the socket to listen on (default: $RUNTIME_DIRECTORY/zcord.sock, else "
                             "$XDG_RUNTIME_DIR/zcor/zcord.sock, else /tmp/zcor-$UID/zcord.sock)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--version", action="version", version=f"zcord {__version__}")
    args = parser.parse_args(argv)
    from .transport.server import run  # keeps `zcor` start-up free of the service imports

    return run(memory_dir(args.memory_dir), daemon_socket(args.socket), args.log_level)


# -- zcor ----------------------------------------------------------------------------------------


def _print_json(value: Any) -> None:
    print(json_shown(json.dumps(value, ensure_ascii=False, indent=2)))


def _usage(message: str) -> SystemExit:
    print(f"zcor: {message}", file=sys.stderr)
    return SystemExit(EXIT_USAGE)


def _json_arg(text: str, what: str) -> Any:
    """`text` parsed as JSON; `what` names it with its verb ("the arguments are")."""
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _usage(f"{what} not valid JSON (at column {e.colno}: {e.msg[:1].lower()}{e.msg[1:]})") from None
    except ValueError as e:
        raise _usage(f"{what} not valid JSON ({e})") from None


def _client(args: argparse.Namespace, role: str = P.OPERATOR) -> Client:
    return Client(args.socket, role=role, timeout=args.timeout, client_name="zcor-cli").connect()


def cmd_status(args: argparse.Namespace) -> int:
    with _client(args) as c:
        status = c.status()
    _print_json(status)
    if sys.stdout.isatty():  # a person reading: one line of today's usage under the JSON (scripts get JSON alone)
        print(f"{usage_line(status.get('usageToday'))} (zcor usage for more)")
    if status.get("personaEmpty"):
        print(f"zcor: warning: PERSONA.md in {status.get('memoryDir')} is empty (only comments): the bot "
              f"gets a default identity. Write the persona there, or in zcor-tui (Config).", file=sys.stderr)
    return EXIT_OK


def usage_line(today: dict[str, Any] | None) -> str:
    """`zcor status`'s line: today's provider calls, input tokens and cache-hit share."""
    if not today or not today.get("requests"):
        return "usage today: no provider calls reported"
    share = today.get("hitShare")
    hit = f", {share:.0%} from the provider's cache" if share is not None else ""
    return (f"usage today: {_plural(today['requests'], 'provider call')}, {today['inputTokens']:,} input "
            f"tokens{hit}, {today['outputTokens']:,} output")


def cmd_usage(args: argparse.Namespace) -> int:
    with _client(args) as c:
        usage = c.usage(args.session, args.days)
    if args.json:
        _print_json(usage)
        return EXIT_OK
    t = usage["totals"]
    who = f"session {args.session}" if args.session else "all sessions"
    _say(f"Token usage of {who}, the last {_plural(args.days, 'day')} (since {t['since']}):")
    if not t["requests"]:
        _say("  no provider calls reported. Front ends report after each call (zcor chat, zcor serve-openai, "
             "the AstrBot plugin).")
        return EXIT_OK
    share = "—" if t["hitShare"] is None else f"{t['hitShare']:.0%}"
    _say(f"  {_plural(t['requests'], 'provider call')} · {t['inputTokens']:,} input tokens, {share} read from the "
         f"provider's cache, {t['cacheWriteTokens']:,} written to it · {t['outputTokens']:,} output tokens")
    _say(f"  zcor added about {t['prefixTokens']:,} tokens of system prefix and {t['headerTokens']:,} of recall "
         f"header (estimated at {usage['charsPerToken']:g} characters a token)")

    def cells(row: dict[str, Any]) -> list[str]:
        hit = "—" if row["hitShare"] is None else f"{row['hitShare']:.0%}"
        return [f"{row['requests']:,}", f"{row['inputTokens']:,}", f"{row['cachedTokens']:,}", hit,
                f"{row['cacheWriteTokens']:,}", f"{row['outputTokens']:,}", f"{row['prefixTokens']:,}",
                f"{row['headerTokens']:,}"]

    numbers = ["Calls", "Input", "Cached", "Hit", "Written", "Output", "~Prefix", "~Header"]
    right = tuple(range(1, 9))
    if not args.session:
        _say()
        rows = [["Session", *numbers, "Front end"]]
        rows += [[_line(s["session"], 40), *cells(s), s.get("frontEnd") or ""] for s in usage["sessions"]]
        _table(rows, right)
    _say()
    rows = [["Day", *numbers, ""]]
    rows += [[d["day"], *cells(d), ""] for d in usage["days"]]
    _table(rows, right)
    return EXIT_OK


def cmd_metrics(args: argparse.Namespace) -> int:
    # as the bot: metrics are read-only, and a cron job or node_exporter's user need not be an operator
    with _client(args, P.BOT) as c:
        sys.stdout.write(c.metrics())
    return EXIT_OK


def cmd_tools(args: argparse.Namespace) -> int:
    with _client(args, P.OPERATOR if args.operator else P.BOT) as c:
        tools = c.list_tools()
    if args.json:
        _print_json(tools)
    else:
        width = max((len(t["name"]) for t in tools), default=0)
        for t in tools:
            first = re.split(r"(?<!e\.g)(?<!i\.e)\. ", t.get("description", ""))[0].rstrip(".")
            print(shown(f"{t['name']:<{width}}  {first}"))
    return EXIT_OK


def cmd_call(args: argparse.Namespace) -> int:
    arguments = _json_arg(args.arguments, "the arguments are") if args.arguments else {}
    if not isinstance(arguments, dict):
        raise _usage("the arguments must be a JSON object, e.g. '{\"id\": \"m1\"}'")
    with _client(args, P.BOT if args.bot else P.OPERATOR) as c:
        # tools are zcor_…; a name with a slash is a method (zcor/trust/set, zcor/status), sent as itself
        _print_json(c.request(args.tool, arguments) if "/" in args.tool else c.call_tool(args.tool, arguments))
    return EXIT_OK


TRUST_LEVELS = ("trusted", "normal", "untrusted", "blocked")


def cmd_trust(args: argparse.Namespace) -> int:
    """`zcor trust [list]`, `zcor trust set SENDER LEVEL`, `zcor trust reset SENDER`."""
    with _client(args) as c:
        listing = c.trust_get()
        default = listing.get("default", "normal")
        if args.action in (None, "list"):
            if args.json:
                _print_json(listing)
                return EXIT_OK
            senders = listing.get("senders") or []
            _say(f"Default level: {default} (config defaultTrust; every sender not listed here)")
            if senders:
                _table([["sender", "level"]] + [[s["sender"], s["level"]] for s in senders])
            else:
                _say("No sender has a level of its own; `zcor trust set SENDER LEVEL` gives one.")
            return EXIT_OK
        before = next((s["level"] for s in listing.get("senders") or [] if s["sender"] == args.sender), None)
        answer = c.trust_set(args.sender, args.level if args.action == "set" else None)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    was = f"{before}" if before else f"{default}, the default"
    if answer.get("explicit"):
        now = f"{args.sender} is {answer.get('level')}"
    else:
        now = f"{args.sender} has the default level, {answer.get('level')}"
    _say(f"{now} (was {was})." if before != (args.level if args.action == "set" else None)
         else f"{now}; nothing changed.")
    return EXIT_OK


def cmd_prefix(args: argparse.Namespace) -> int:
    with _client(args) as c:
        print(shown(c.prefix()))
    return EXIT_OK


def cmd_recall(args: argparse.Namespace) -> int:
    text = " ".join(args.text)
    with _client(args) as c:
        ids = c.recall(args.session, [{"text": text, "origin": "external"}])
        if args.context:
            print(shown(c.context(args.session)["text"]))
        else:
            _print_json({"ids": ids})
    return EXIT_OK


def cmd_context(args: argparse.Namespace) -> int:
    with _client(args) as c:
        print(shown(c.context(args.session)["text"]))
    return EXIT_OK


def cmd_relationship_history(args: argparse.Namespace) -> int:
    """A person's affinity over time with the reason at each change (from the history)."""
    with _client(args) as c:
        points = affinity_series(c.history_versions(args.person_id))
    if args.json:
        _print_json({"personId": args.person_id, "items": points})
        return EXIT_OK
    values = [p["affinity"] for p in points]
    print(shown(f"{args.person_id}  {sparkline(values)}  ({sparkline_scale(values)})"))
    for p in points:
        value = "deleted" if p["deleted"] else f"{p['affinity']:+d}" if p["affinity"] else "0"
        print(shown(f"{local_time(p['at'])}  {value:>7}  {p.get('actor') or '':<8}  {p.get('reason') or ''}",
                    lines=False))
    return EXIT_OK


def cmd_recall_log(args: argparse.Namespace) -> int:
    """A session's latest recall batches: what the bot was shown and why (issue 38)."""
    with _client(args) as c:
        answer = c.recall_log(args.session, limit=args.limit)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    items = answer.get("items") or []
    total = answer.get("total", 0)
    print(shown(f"{total:,} recall batch{'' if total == 1 else 'es'} kept for session {args.session}"
                f" (at most {answer.get('kept')}), newest first:", lines=False))
    for e in items:
        senders = ", ".join(e.get("senders") or []) or "no sender key"
        cut = f", cut {e['fullChars'] - e['headerChars']} of {e['fullChars']}" if e.get("truncated") else ""
        print()
        print(shown(f"{local_time(e.get('at'))}  from {senders}  header {e.get('headerChars')} characters "
                    f"(budget {e.get('budget')}{cut})", lines=False))
        if not e.get("hits"):
            print("  nothing recalled")
        for h in e.get("hits") or []:
            why = "; ".join(f"{r['term']}" + (f" (from {r['from']})" if r.get("from") != r.get("term") else "")
                            + (f" in {r['where']}" if r.get("where") else "")
                            + (f" {r['weight']:g}" if r.get("weight") is not None else "")
                            for r in h.get("reasons") or [])
            print(shown(f"  {h['id']:<8} {h.get('score', 0):>7.3f}  {h.get('title', '')}  ← {why}", lines=False))
        if e.get("notShown"):
            print(shown(f"  not in the header (deleted, superseded or held): {', '.join(e['notShown'])}",
                        lines=False))
    return EXIT_OK


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Consolidation proposals (issue 38): list them, merge a cluster, fold a chain, dismiss one."""
    ids = list(args.ids)
    if args.action == "list":
        if ids:
            raise _usage("zcor consolidate [list] takes no ids; use merge, fold or dismiss with ids")
        with _client(args) as c:
            answer = c.consolidate_list(limit=args.limit, offset=args.offset, kind=args.kind)
        if args.json:
            _print_json(answer)
            return EXIT_OK
        scan = answer.get("scan") or {}
        _say(f"{_plural(answer.get('total', 0), 'proposal')}"
             + ("" if scan.get("complete") else f" so far (still scanning: {scan.get('pending', 0):,} memories left)"))
        for n, item in enumerate(answer.get("items") or [], args.offset + 1):
            _say()
            if item["kind"] == "twins":
                _say(f"{n}. near-duplicates {' '.join(item['ids'])} (best pair {item.get('score')}); "
                     f"zcor consolidate merge {' '.join(item['ids'])}")
            else:
                _say(f"{n}. superseded chain to {item['newest']}: {' ← '.join(item['ids'])}; "
                     f"zcor consolidate fold {item['newest']}")
            for m in item.get("members") or []:
                _say(shown(f"   {m['id']:<8} {local_time(m.get('updatedAt'))}  {m.get('title', '')} — "
                           f"{m.get('content', '')[:60]}", lines=False))
        return EXIT_OK
    if args.action == "dismiss":
        if len(ids) < 2:
            raise _usage("zcor consolidate dismiss needs the proposal's ids (two or more)")
        with _client(args) as c:
            _print_json(c.consolidate_dismiss(ids))
        return EXIT_OK
    with _client(args) as c:
        if args.action == "fold":
            if len(ids) != 1:
                raise _usage("zcor consolidate fold takes the current memory a chain leads to (one id)")
            chains = [i for i in _all_proposals(c, "chain") if i["newest"] == ids[0]]
            if not chains:
                raise _usage(f"no superseded chain to fold leads to {ids[0]} (zcor consolidate --kind chain)")
            for old in chains[0]["fold"]:
                c.zcor_memory_delete({"id": old})
                _say(f"deleted {old} (its versions stay in the history; zcor revert undoes it)")
            return EXIT_OK
        if len(ids) < 2:
            raise _usage("zcor consolidate merge needs two or more memory ids")
        members = {i: c.zcor_memory_read({"id": i}, view=True) for i in ids}
        newest = max(members.values(), key=lambda m: (m["updatedAt"], m["id"]))
        result = c.zcor_memory_merge({
            "ids": ids, "title": args.title if args.title is not None else newest["title"],
            "content": args.content if args.content is not None else newest["content"],
            "reason": args.reason})
    _print_json(result)
    return EXIT_OK


def _all_proposals(c: Client, kind: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = c.consolidate_list(limit=100, offset=offset, kind=kind)
        out += page["items"]
        offset = page.get("nextOffset")
    return out


def cmd_backup(args: argparse.Namespace) -> int:
    with _client(args) as c:
        if args.list:  # newest first, as the TUI's Backups screen lists them
            for item in sorted(c.backups(), key=lambda b: (b.get("modifiedAt") or "", b["backupFile"]), reverse=True):
                who = "  (the bot's)" if item.get("bot") else ""
                print(f"{item['backupFile']}  {human_size(item.get('size', 0)):>9}  "
                      f"{local_time(item.get('modifiedAt'))}{who}")
        else:
            print(c.zcor_memory_backup({})["backupFile"])
    return EXIT_OK


def local_time(iso: str | None) -> str:
    """An ISO time as `2026-01-31 20:00:05` in this machine's time zone."""
    from datetime import datetime

    try:
        return f"{datetime.fromisoformat(iso or '').astimezone():%Y-%m-%d %H:%M:%S}"
    except ValueError:
        return iso or "—"


def cmd_config(args: argparse.Namespace) -> int:
    with _client(args) as c:
        if args.patch:
            patch = _json_arg(args.patch, "the config patch is")
            _print_json(c.config_set(patch))
        else:
            _print_json(c.config_get())
    return EXIT_OK


def cmd_reload(args: argparse.Namespace) -> int:
    with _client(args) as c:
        _print_json(c.reload())
    return EXIT_OK


# -- history: query, revert, versions, time travel (the TUI's History, Versions and Past screens) --


def _when_arg(text: str, what: str, end: bool = False) -> str:
    try:
        value = parse_instant(text) if what == "TIME" else parse_local(text, end=end)
    except ValueError as e:
        raise _usage(f"{what}: {e}") from None
    if value is None:
        raise _usage(f"{what} is empty; write 2026-01-31 or 2026-01-31 20:00")
    return value


def _say(text: str = "") -> None:
    """Print a line of the history commands: memory text and names come from the model, so
    terminal controls and bidi overrides are made visible (`shown`), never sent raw."""
    print(shown(text))


def _table(rows: list[list[str]], right: tuple[int, ...] = ()) -> None:
    """Rows as columns two spaces apart (the last column unpadded); `right` columns right-aligned."""
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [c.rjust(width[i]) if i in right else c.ljust(width[i]) for i, c in enumerate(row[:-1])]
        _say("  ".join([*cells, row[-1]]).rstrip())


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _status(record: dict[str, Any]) -> str:
    text = "ok" if record.get("status") == "ok" else f"error {(record.get('error') or {}).get('code', '')}".rstrip()
    changes = len(record.get("changes") or [])
    return f"{text} · {_plural(changes, 'change')}" if changes else text


def _summary(record: dict[str, Any] | None) -> str:
    """One line for a memory or relationship version: its title or name and what it says."""
    if record is None:
        return "(deleted)"
    if "personId" in record:
        linked = f", memory {record['memoryNodeId']}" if record.get("memoryNodeId") else ", no memory"
        return (f"{record.get('name', '')} — {record.get('relationship', '')}, affinity {record.get('affinity')}"
                f"{linked}: {_line(record.get('reason'))}")
    mark = "⊘ " if record.get("supersededBy") else ""
    return f"{mark}{record.get('title', '')}: {_line(record.get('content'))}"


def _line(text: Any, limit: int = 60) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def cmd_history(args: argparse.Namespace) -> int:
    filters: dict[str, Any] = {"limit": args.limit, "offset": args.offset}
    if args.keywords:
        filters["keywords"] = args.keywords
    if args.since:
        filters["from"] = _when_arg(args.since, "--from")
    if args.until:
        filters["to"] = _when_arg(args.until, "--to", end=True)
    for name in ("actor", "tool", "target"):
        if getattr(args, name):
            filters[name] = getattr(args, name)
    if args.changes_only:
        filters["changesOnly"] = True
    with _client(args) as c:
        page = c.history_query(filters)
    if args.json:
        _print_json(page)
        return EXIT_OK
    items, total = page.get("items") or [], page.get("total", 0)
    if items:
        _table([["seq", "time", "actor", "tool", "targets", "status"]]
               + [[str(r.get("seq")), local_time(r.get("at")), r.get("actor", ""), r.get("tool", ""),
                   change_targets(r) or "—", _status(r)] for r in items], right=(0,))
    more = f"; older: --offset {page['nextOffset']}" if page.get("nextOffset") is not None else ""
    if items:
        _say(f"{args.offset + 1:,}–{args.offset + len(items):,} of {_plural(total, 'record')}, newest first{more}")
    elif total:
        _say(f"No records from --offset {args.offset:,} on; {_plural(total, 'record')} match")
    else:
        _say("No records match." if len(filters) > 2 else "No records yet.")
    return EXIT_OK


def cmd_revert(args: argparse.Namespace) -> int:
    with _client(args) as c:
        answer = c.history_revert(args.seq, force=args.force, preview=args.preview)
    if args.json:
        _print_json(answer)
    elif args.preview:
        changes = answer.get("changes") or []
        if answer.get("ok"):
            _say(f"Reverting operation {args.seq} would make {_plural(len(changes), 'change')}"
                  f"{' (forced over the conflicts below)' if answer.get('forced') else ''}:")
        else:
            _say(f"Operation {args.seq} cannot be reverted as it stands:")
        for ch in changes:
            _say(f"  {ch.get('kind')}  {ch.get('target') or ''}")
            _say(f"    before: {_summary(ch.get('before'))}")
            _say(f"    after:  {_summary(ch.get('after'))}")
        for x in answer.get("conflicts") or []:
            fields = f" ({', '.join(x['fields'])})" if x.get("fields") else ""
            _say(f"  conflict: {x.get('target') or 'the Memory'}: {x.get('problem')}{fields}")
        if not answer.get("ok"):
            forceable = all(x.get("forceable") is not False for x in answer.get("conflicts") or [])
            print("zcor: " + ("--force writes the old values anyway, as a new change." if forceable
                              else "--force cannot override these conflicts."), file=sys.stderr)
    else:
        changes = answer.get("changes") or []
        _say(f"Reverted operation {answer.get('reverted')} as operation {answer.get('seq')}"
              f"{' (forced)' if answer.get('forced') else ''}: {_plural(len(changes), 'change')}")
        for ch in changes:
            _say(f"  {ch.get('kind')}  {ch.get('target') or ''}")
    return EXIT_OK if not args.preview or answer.get("ok") else EXIT_REFUSED


def cmd_versions(args: argparse.Namespace) -> int:
    with _client(args) as c:
        answer = c.history_versions(args.id)
    if args.json:
        _print_json(answer)
        return EXIT_OK
    items = answer.get("items") or []
    _say(f"{_plural(len(items), 'version')} of {answer.get('id', args.id)}, oldest first "
          f"(`zcor revert SEQ` undoes the operation that wrote one):")
    if items:
        _table([["change", "seq", "time", "actor", "kind", "record"]]
               + [[str(v.get("changeId")), str(v.get("seq")), local_time(v.get("at")), v.get("actor", ""),
                   v.get("kind", ""), _summary(v.get("record"))] for v in items], right=(0, 1))
    return EXIT_OK


AGO = re.compile(r"^\s*\d+\s*[smhdw]\b", re.I)


def cmd_at(args: argparse.Namespace) -> int:
    # `2h ago` or `2h` as well as `-2h`, which argparse would take for an option unless after `--`
    text = " ".join(args.time)
    instant = _when_arg("-" + text.strip() if AGO.match(text) else text, "TIME")
    with _client(args) as c:
        past = c.history_at(instant)
    if args.json:
        _print_json(past)
        return EXIT_OK
    nodes = {n["id"]: n for n in past.get("nodes") or []}
    important = list(past.get("important") or [])
    children: dict[str | None, list[str]] = {}
    for node_id in sorted(nodes, key=lambda i: (int(i[1:]) if i[1:].isdigit() else 0, i)):
        parent = nodes[node_id].get("parentId")
        children.setdefault(parent if parent in nodes else None, []).append(node_id)
    undone = int(past.get("undoneChanges") or 0)
    _say(f"The Memory at {local_time(past.get('at'))} ({_plural(undone, 'later change')} undone; read-only)")
    _say(f"{len(nodes):,} {'memory' if len(nodes) == 1 else 'memories'}:")

    def tree(parent: str | None, depth: int) -> None:
        for node_id in children.get(parent, []):
            n = nodes[node_id]
            marks = ("★ " if node_id in important else "") + ("⊘ " if n.get("supersededBy") else "")
            _say(f"{'  ' * (depth + 1)}{node_id}  {marks}{_line(n.get('title'), 80)}")
            tree(node_id, depth + 1)

    tree(None, 0)
    rels = past.get("relationships") or []
    _say(f"{_plural(len(rels), 'relationship')}:")
    for r in rels:
        _say(f"  {r.get('personId')}  {_summary(r)}")
    return EXIT_OK


def as_bot(line: bytes) -> bytes:
    """One line from the MCP host, with any role request taken out of an initialize: hosts
    are the bot, whoever runs `zcor mcp` (SPEC §5). Other lines pass unchanged."""
    if not line.strip():
        return line
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return line  # zcord answers it with a parse error
    if not isinstance(msg, dict) or msg.get("method") != "initialize":
        return line
    caps = (msg.get("params") or {}).get("capabilities") if isinstance(msg.get("params"), dict) else None
    exp = caps.get("experimental") if isinstance(caps, dict) else None
    if isinstance(exp, dict) and "zcor" in exp:
        del exp["zcor"]
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"
    return line


class BotLines:
    """Split the host's byte stream into lines for as_bot; an over-long line is passed on raw
    (zcord refuses it as too large, so it can never be an initialize)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.raw = False  # inside an over-long line: forward until its newline

    def feed(self, data: bytes) -> bytes:
        out = bytearray()
        self.buf += data
        while True:
            nl = self.buf.find(b"\n")
            if nl < 0:
                if self.raw or len(self.buf) > P.MAX_LINE + 1:
                    out += self.buf
                    self.buf.clear()
                    self.raw = True
                return bytes(out)
            line = bytes(self.buf[:nl + 1])
            del self.buf[:nl + 1]
            out += line if self.raw else as_bot(line)
            self.raw = False

    def flush(self) -> bytes:
        rest, self.buf = bytes(self.buf), bytearray()
        return rest if self.raw else as_bot(rest)


def cmd_mcp(args: argparse.Namespace) -> int:
    """Bridge stdin/stdout to the socket line by line: the MCP host is the bot."""
    path = client_socket(args.socket)
    try:
        owner = check_client_socket(path)
    except UnsafeSocket as e:
        print(f"zcor mcp: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
        check_peer(sock, owner, path)
    except OSError as e:
        print(f"zcor mcp: cannot reach zcord at {path}: {e.strerror or e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except UnsafeSocket as e:
        sock.close()
        print(f"zcor mcp: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    stdin_done = threading.Event()
    lines = BotLines()

    def pump_in() -> None:
        try:
            while True:
                data = os.read(0, 1 << 16)
                if not data:
                    sock.sendall(lines.flush())
                    break
                sock.sendall(lines.feed(data))
        except OSError:
            pass
        finally:
            stdin_done.set()
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    threading.Thread(target=pump_in, name="stdin", daemon=True).start()
    pending = bytearray()  # zcord's replies, a line at a time: tool results go to the host fenced

    def emit(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                if pending:
                    emit(fence_reply_line(bytes(pending)))
                break
            pending += data
            end = pending.rfind(b"\n")
            if end < 0:
                continue
            whole, pending = bytes(pending[:end + 1]), pending[end + 1:]
            emit(b"".join(fence_reply_line(line + b"\n") for line in whole[:-1].split(b"\n")))
    except BrokenPipeError:
        return EXIT_OK  # the host went away
    except OSError as e:
        print(f"zcor mcp: connection to zcord failed: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        sock.close()
    if not stdin_done.is_set():
        print("zcor mcp: zcord closed the connection", file=sys.stderr)
        return EXIT_UNREACHABLE
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zcor", description="Talk to the zcor memory daemon (zcord).")
    parser.add_argument("--version", action="version", version=f"zcor {__version__}")
    # --socket and --timeout work before or after the subcommand
    for target, default in ((parser, None), (common := argparse.ArgumentParser(add_help=False), argparse.SUPPRESS)):
        target.add_argument("--socket", metavar="PATH", default=default,
                            help="zcord's socket (default: $ZCOR_SOCKET, else the zcord default)")
        target.add_argument("--timeout", type=float, metavar="SECONDS",
                            default=60.0 if default is None else default,
                            help="how long to wait for an answer (default 60)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("status", parents=[common], help="daemon and Memory status")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("usage", parents=[common],
                       help="token usage the front ends reported: per session and per day, and zcor's share")
    p.add_argument("--session", metavar="S", help="one session only (e.g. qq:group:123)")
    p.add_argument("--days", type=int, default=30, metavar="N", help="the last N days, today included (1..90, default 30)")
    p.add_argument("--json", action="store_true", help="print zcord's answer {sessions, days, totals}")
    p.set_defaults(func=cmd_usage)

    p = sub.add_parser("metrics", parents=[common],
                       help="zcord's metrics in the Prometheus text format (for node_exporter's textfile collector)")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("tools", parents=[common], help="the tools the bot is offered now")
    p.add_argument("--operator", action="store_true", help="list every tool (what operators may call)")
    p.add_argument("--json", action="store_true", help="print the full tools/list entries with schemas")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("call", parents=[common], help="call a tool and print its JSON result")
    p.add_argument("tool", help="tool name, e.g. zcor_memory_read")
    p.add_argument("arguments", nargs="?", help="arguments as a JSON object ('-' reads stdin)")
    p.add_argument("--bot", action="store_true", help="call as the bot (actor model) instead of operator")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("trust", parents=[common], help="per-sender trust levels: list, set, reset",
                       description="Each chat sender has a trust level: trusted, normal (as without "
                                   "levels), untrusted (the changes they cause are held for review) or "
                                   "blocked (refused). Senders without a level of their own have the "
                                   "config's defaultTrust.")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON")
    p.set_defaults(func=cmd_trust, action=None)
    trust = p.add_subparsers(dest="action", metavar="ACTION")
    t = trust.add_parser("list", parents=[common], help="every sender's own level and the default (the default action)")
    t.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print zcord's answer {default, senders} as JSON")
    t = trust.add_parser("set", parents=[common], help="give a sender a level")
    t.add_argument("sender", metavar="SENDER", help="a sender key, as History and Review show it: qq:42")
    t.add_argument("level", metavar="LEVEL", choices=TRUST_LEVELS, help=", ".join(TRUST_LEVELS))
    t.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print zcord's answer {sender, level, explicit} as JSON")
    t = trust.add_parser("reset", parents=[common], help="give a sender back the default level")
    t.add_argument("sender", metavar="SENDER")
    t.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print zcord's answer {sender, level, explicit} as JSON")

    p = sub.add_parser("prefix", parents=[common], help="print the system prefix")
    p.set_defaults(func=cmd_prefix)

    p = sub.add_parser("recall", parents=[common], help="run auto-recall for a session on some text")
    p.add_argument("session", help="session key, e.g. console or qq:group:123")
    p.add_argument("text", nargs="+", help="the external message text")
    p.add_argument("--context", action="store_true", help="print the context header instead of the ids")
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("context", parents=[common], help="print a session's context header")
    p.add_argument("session")
    p.set_defaults(func=cmd_context)

    p = sub.add_parser("relationship-history", parents=[common],
                       help="a person's affinity over time, with the reason at each change")
    p.add_argument("person_id", metavar="PERSONID")
    p.add_argument("--json", action="store_true", help="print the series as JSON")
    p.set_defaults(func=cmd_relationship_history)

    p = sub.add_parser("recall-log", parents=[common],
                       help="a session's latest auto-recall batches: what the bot was shown and why")
    p.add_argument("session", metavar="SESSION")
    p.add_argument("--limit", type=int, default=20, help="batches to print, newest first (1..200, default 20)")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON")
    p.set_defaults(func=cmd_recall_log)

    p = sub.add_parser("consolidate", parents=[common],
                       help="near-duplicate memories and superseded chains: list, merge, fold, dismiss")
    p.add_argument("action", nargs="?", default="list", choices=["list", "merge", "fold", "dismiss"],
                   help="list (default) the proposals; merge IDS; fold ID (a chain's current memory); "
                        "dismiss IDS (not proposed again)")
    p.add_argument("ids", nargs="*", metavar="ID")
    p.add_argument("--kind", choices=["twins", "chain"], help="list only near-duplicates or only chains")
    p.add_argument("--limit", type=int, default=20, help="proposals to list (1..100, default 20)")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--title", help="merge: the merged memory's title (default: the newest member's)")
    p.add_argument("--content", help="merge: its content (default: the newest member's)")
    p.add_argument("--reason", default="merged near-duplicates (zcor consolidate)",
                   help="merge: the reason recorded on the merged memories")
    p.add_argument("--json", action="store_true", help="list: print zcord's answer as JSON")
    p.set_defaults(func=cmd_consolidate)

    p = sub.add_parser("backup", parents=[common], help="write a backup and print its file name")
    p.add_argument("--list", action="store_true", help="list the backups (name, size, time) instead")
    p.set_defaults(func=cmd_backup)

    p = sub.add_parser("config", parents=[common], help="show the config, or change it with a JSON patch")
    p.add_argument("patch", nargs="?", help='e.g. \'{"relationshipMemory": false}\'')
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("reload", parents=[common], help="re-read config.json and synonyms.json")
    p.set_defaults(func=cmd_reload)

    p = sub.add_parser("history", parents=[common], help="search the operation history, newest first")
    p.add_argument("keywords", nargs="*", metavar="KEYWORD", help="words that must all occur in a record")
    p.add_argument("--from", dest="since", metavar="WHEN", help="records at or after (2026-01-31, '2026-01-31 20:00')")
    p.add_argument("--to", dest="until", metavar="WHEN", help="records at or before (a date alone: its whole day)")
    p.add_argument("--actor", choices=["model", "operator", "system"], help="only this actor's records")
    p.add_argument("--tool", metavar="NAME", help="only calls of this tool or method (exact name)")
    p.add_argument("--target", metavar="ID", help="only records about this memory id or personId")
    p.add_argument("--changes-only", action="store_true", help="only records that changed the Memory")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="records per page, 1..100 (default 20)")
    p.add_argument("--offset", type=int, default=0, metavar="N", help="skip this many (the next page's is printed)")
    p.add_argument("--json", action="store_true", help="print zcord's answer {items, total, nextOffset}")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("revert", parents=[common], help="undo one logged operation, as a new operation")
    p.add_argument("seq", type=int, metavar="SEQ", help="the operation's number (`zcor history` shows it)")
    p.add_argument("--preview", action="store_true", help="show what would change and any conflicts; change nothing")
    p.add_argument("--force", action="store_true", help="write the old values even over later changes")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON")
    p.set_defaults(func=cmd_revert)

    p = sub.add_parser("versions", parents=[common], help="every version of a memory or relationship")
    p.add_argument("id", metavar="ID", help="a memory id (m17) or a personId")
    p.add_argument("--json", action="store_true", help="print zcord's answer with the full records")
    p.set_defaults(func=cmd_versions)

    p = sub.add_parser("at", parents=[common], help="the whole Memory as it was at a past instant (read-only)")
    p.add_argument("time", metavar="TIME", nargs="+",
                   help="2026-01-31 20:00 (local time), 2026-01-31T20:00:00+08:00, or how long ago: 2h, 3d, "
                        "1d 6h, '90m ago'")
    p.add_argument("--json", action="store_true", help="print zcord's answer with every record")
    p.set_defaults(func=cmd_at)

    from .interop_cli import add_parsers

    add_parsers(sub, common, cmd_import, cmd_export)

    from . import privacy_cli

    privacy_cli.add_parsers(sub, common)

    p = sub.add_parser("chat", parents=[common], add_help=False,
                       help="talk to the persona in the terminal (the reference console bot); "
                            "`zcor chat --help` for its options")
    p.set_defaults(func=None)

    p = sub.add_parser("mcp", parents=[common],
                       help="bridge stdin/stdout to zcord for an MCP host (the host is the bot)")
    p.set_defaults(func=cmd_mcp)

    p = sub.add_parser("serve-openai", parents=[common], add_help=False,
                       help="an OpenAI-compatible endpoint that adds zcor's memory to any chat front end; "
                            "`zcor serve-openai --help` for its options")
    p.set_defaults(func=None)
    return parser


def cmd_import(args: argparse.Namespace) -> int:
    from .interop_cli import cmd_import as run_import
    from .interop_cli import print_import

    answer = run_import(args, Client(args.socket, role=P.OPERATOR, timeout=args.timeout, client_name="zcor-cli"))
    if args.json:
        _print_json(answer)
    else:
        print_import(answer, args.persona)
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from .interop_cli import cmd_export as run_export

    summary = run_export(args, Client(args.socket, role=P.OPERATOR, timeout=args.timeout, client_name="zcor-cli"))
    if args.out:
        print(f"zcor: wrote {summary['memories']} memories as {summary['format']} to {args.out}", file=sys.stderr)
    return EXIT_OK


def cmd_chat(args: argparse.Namespace, rest: list[str]) -> int:
    from .bot.chat import main as chat_main  # the bot and LLM code only when chatting

    if args.socket and "--socket" not in rest:
        rest = ["--socket", args.socket, *rest]
    return chat_main(rest)


def cmd_serve_openai(args: argparse.Namespace, rest: list[str]) -> int:
    from .bot.proxy import main as proxy_main  # the HTTP server only when serving

    if args.socket and "--socket" not in rest:
        rest = ["--socket", args.socket, *rest]
    return proxy_main(rest)


AGO_OPTION = re.compile(r"^-\d+\s*[smhdw]", re.I)


def relative_times(argv: list[str]) -> list[str]:
    """`zcor at -2h` as `zcor at 2h`: argparse takes `-2h` for an unknown option, while the
    time forms (and `zcor at`'s own error message) write times ago with a minus."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # options before the command
        i += 2 if argv[i] in ("--socket", "--timeout") else 1
    if i >= len(argv) or argv[i] != "at":
        return argv
    return argv[:i + 1] + [a[1:] if AGO_OPTION.match(a) else a for a in argv[i + 1:]]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(relative_times(sys.argv[1:] if argv is None else argv))
    if args.command == "chat":
        return cmd_chat(args, rest)  # its own options (--session, --sender, --help) pass through
    if args.command == "serve-openai":
        return cmd_serve_openai(args, rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        code: int = args.func(args)
        return code
    except ToolError as e:
        print(shown(f"zcor: {for_operator(e.code, e.message, 'cli', data=e.data)}"), file=sys.stderr)
        return EXIT_REFUSED
    except RpcError as e:
        print(shown(f"zcor: zcord refused the request ({e.code}): {e.message}"), file=sys.stderr)
        return EXIT_REFUSED
    except (DaemonUnavailable, ConnectionLost, RequestTimeout) as e:
        print(f"zcor: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except ClientError as e:
        print(f"zcor: {e}", file=sys.stderr)
        return EXIT_REFUSED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
