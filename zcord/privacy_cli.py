"""`zcor forget`, `zcor subject` and `zcor scope` (issue 34): forget a person, show what the
Memory holds about them, show or change a memory's scope. The rules are zcord's
(zcord.service.erasure, zcord.service.scope); this only asks and prints."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .transport.client import Client
from .transport.results import ErasureResult
from .transport.shown import json_shown, shown

LONG_WAIT = 600.0
"""Seconds an erasure waits for zcord at least: a large Memory with many backups takes minutes."""


def _say(text: str = "") -> None:
    print(shown(text))


def _who(args: argparse.Namespace) -> dict[str, str | None]:
    return {"sender": None, "person_id": args.person} if args.person_id else {"sender": args.person, "person_id": None}


def cmd_forget(args: argparse.Namespace) -> int:
    with Client(args.socket, role="operator", timeout=max(args.timeout, LONG_WAIT), client_name="zcor-cli") as c:
        if not args.yes and not args.preview and not args.json:
            preview = c.erase(**_who(args), preview=True)
            print_erase(preview)
            if not sys.stdin.isatty():
                print("zcor: nothing erased; pass --yes to erase without asking", file=sys.stderr)
                return 1
            if input("Erase all of this for good? It cannot be undone. [y/N] ").strip().lower() not in ("y", "yes"):
                _say("Nothing erased.")
                return 1
        answer = c.erase(**_who(args), preview=args.preview)
    if args.json:
        print(json_shown(json.dumps(answer, ensure_ascii=False, indent=2)))
    else:
        print_erase(answer)
    return 0


def print_erase(a: ErasureResult) -> None:
    counts = a["counts"]
    head = "Would erase" if a.get("preview") else "Erased"
    _say(f"{head} {a['person']}: {counts['memories']} memories, {counts['relationships']} "
         f"relationship(s), {counts['trustEntries']} trust entr(y/ies); "
         f"{counts['recordsAbout']} history records came from them")
    for m in a["memories"]:
        _say(f"  memory {m['id']}{'' if m['current'] else ' (deleted; in the history)'}: {m['title'] or ''}")
    for p in a["relationships"]:
        _say(f"  relationship {p}")
    for t in a["trust"]:
        _say(f"  trust entry {t}")
    places = a["places"]
    if places:
        _say("Where their words are kept (each is rewritten):")
        for name, n in places.items():
            _say(f"  {name}: " + ("deleted and rebuilt" if n < 0 else f"{n} record(s)/line(s)"))
    for at in a["erasedBefore"]:
        _say(f"This person was erased before, at {at}.")
    if a.get("preview"):
        _say("Nothing was changed. Erasure cannot be reverted.")
    else:
        _say(f"Operation {a.get('seq')} is the tombstone ({a.get('subject')}); "
             f"{a.get('records', 0)} log records rewritten, {a.get('backups', 0)} backups. It cannot be reverted.")


def cmd_subject(args: argparse.Namespace) -> int:
    with Client(args.socket, role="operator", timeout=max(args.timeout, LONG_WAIT), client_name="zcor-cli") as c:
        answer = c.subject(**_who(args))
    if args.json:
        print(json_shown(json.dumps({k: v for k, v in answer.items() if k != "report"}, ensure_ascii=False, indent=2)))
    else:
        sys.stdout.write(shown(answer["report"]))
    return 0


def scope_text(scope: Any) -> str:
    """A memory's scope as the operator reads it."""
    if isinstance(scope, dict) and isinstance(scope.get("session"), str):
        return f"private to session {scope['session']}"
    return "visible everywhere"


def cmd_scope(args: argparse.Namespace) -> int:
    if args.scope is None:
        scope: Any = None
    elif args.scope == "everywhere" and args.session is None:
        scope = "everywhere"
    elif args.scope == "session" and args.session:
        scope = {"session": args.session}
    else:
        print("zcor: scope is `everywhere` or `session NAME`", file=sys.stderr)
        return 2
    with Client(args.socket, role="operator", timeout=args.timeout, client_name="zcor-cli") as c:
        answer: dict[str, Any]
        if scope is None:
            node = c.call_tool("zcor_memory_read", {"id": args.id}, view=True)
            answer = {"id": node["id"], "title": node["title"], "scope": node.get("scope", "everywhere")}
        else:
            answer = dict(c.scope_set(args.id, scope))
    if args.json:
        print(json_shown(json.dumps(answer, ensure_ascii=False, indent=2)))
    elif scope is None:
        _say(f"{answer['id']} ({answer['title']}): {scope_text(answer['scope'])}")
    else:
        _say(f"{answer['id']} is now {scope_text(answer['scope'])} (operation {answer['seq']}; "
             f"`zcor revert {answer['seq']}` undoes it)")
    return 0


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("forget", parents=[common],
                       help="forget a person: their relationship, trust, memories, and every trace in the files")
    p.add_argument("person", metavar="SENDER", help="their sender key (qq:42), or a personId with --person-id")
    p.add_argument("--person-id", action="store_true", help="SENDER is a relationship's personId")
    p.add_argument("--preview", action="store_true", help="list exactly what would go; change nothing")
    p.add_argument("--yes", action="store_true", help="erase without showing the preview and asking first")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON (erases without asking)")
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("subject", parents=[common],
                       help="everything the Memory holds about or from a person (for a data request)")
    p.add_argument("person", metavar="SENDER", help="their sender key (qq:42), or a personId with --person-id")
    p.add_argument("--person-id", action="store_true", help="SENDER is a relationship's personId")
    p.add_argument("--json", action="store_true", help="print it as JSON instead of a report")
    p.set_defaults(func=cmd_subject)

    p = sub.add_parser("scope", parents=[common],
                       help="show a memory's scope, or change it: everywhere, or private to one session")
    p.add_argument("id", metavar="ID", help="a memory id (m17)")
    p.add_argument("scope", nargs="?", choices=["everywhere", "session"], help="the new scope (omit to show it)")
    p.add_argument("session", nargs="?", metavar="NAME", help="with `session`: the session it is private to")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON")
    p.set_defaults(func=cmd_scope)
