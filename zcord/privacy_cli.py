"""`zcor forget` and `zcor subject` (issue 34): forget a person, or show what the Memory
holds about them. The rules are zcord's (zcord.service.erasure); this only asks and prints."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .transport.client import Client
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


def print_erase(a: dict[str, Any]) -> None:
    counts = a.get("counts") or {}
    head = "Would erase" if a.get("preview") else "Erased"
    _say(f"{head} {a['person']}: {counts.get('memories', 0)} memories, {counts.get('relationships', 0)} "
         f"relationship(s), {counts.get('trustEntries', 0)} trust entr(y/ies); "
         f"{counts.get('recordsAbout', 0)} history records came from them")
    for m in a.get("memories") or []:
        _say(f"  memory {m['id']}{'' if m.get('current') else ' (deleted; in the history)'}: {m.get('title') or ''}")
    for p in a.get("relationships") or []:
        _say(f"  relationship {p}")
    for t in a.get("trust") or []:
        _say(f"  trust entry {t}")
    places = a.get("places") or {}
    if places:
        _say("Where their words are kept (each is rewritten):")
        for name, n in places.items():
            _say(f"  {name}: " + ("deleted and rebuilt" if n < 0 else f"{n} record(s)/line(s)"))
    for at in a.get("erasedBefore") or []:
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
        answer.pop("report", None)
        print(json_shown(json.dumps(answer, ensure_ascii=False, indent=2)))
    else:
        sys.stdout.write(shown(answer["report"]))
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
