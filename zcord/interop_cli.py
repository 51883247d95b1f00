"""`zcor import FILE` and `zcor export` (issue 36): lore files in, the Memory out.

The file travels to zcord in as many messages as it needs (zcord.transport.interop_client);
the import itself, its preview and the export are zcord's (zcord.service.interop)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .transport.client import Client
from .transport.interop_client import export_steps, import_steps, run, write_export
from .transport.shown import shown


def _say(text: str = "") -> None:
    print(shown(text))


LONG_WAIT = 600.0
"""Seconds an import or export waits for zcord at least: a 100,000-memory move takes minutes."""


def _patient(args: argparse.Namespace) -> float:
    return max(float(args.timeout), LONG_WAIT)


def cmd_import(args: argparse.Namespace, client: Client) -> dict[str, Any]:
    path = Path(args.file)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise SystemExit(f"zcor: cannot read {args.file}: {e.strerror or e}") from None
    with client as c:
        answer: dict[str, Any] = run(c, import_steps(raw, path.name, fmt=args.format, preview=args.preview,
                                     parent_id=args.parent, persona=args.persona), timeout=_patient(args))
    return answer


def print_import(answer: dict[str, Any], persona_asked: bool) -> None:
    verb = "Would import" if answer.get("preview") else "Imported"
    _say(f"{verb} {answer['name']} ({answer['format']}): {answer['created']} created, {answer['updated']} "
         f"updated, {answer['unchanged']} unchanged"
         + (f" — operation {answer['seq']}, origin {answer['origin']}" if answer.get("seq") else ""))
    for item in answer.get("items") or []:
        mark = " *" if item.get("important") else ""
        _say(f"  {item['action']:<9} {item.get('id') or '':<8} {item['title'][:60]}{mark}"
             + (f"  (under {item['parentId']})" if item.get("parentId") else ""))
    unlisted = answer.get("itemsTotal", 0) - len(answer.get("items") or [])
    if unlisted > 0:
        _say(f"  … and {unlisted:,} more (the counts above cover them)")
    for s in answer.get("skipped") or []:
        _say(f"  skipped   {s['entry']}: {s['reason']}")
    for s in answer.get("notMarked") or []:
        _say(f"  not important: {s['entry']}: {s['reason']}")
    if answer.get("important"):
        _say(f"  important (*): {', '.join(answer['important'])}")
    rels = answer.get("relationships") or {}
    if any(rels.values()):
        _say(f"  relationships: {rels.get('created', 0)} created, {rels.get('updated', 0)} updated")
    if answer.get("synonymGroups"):
        _say(f"  synonym groups added: {answer['synonymGroups']}")
    unkept = answer.get("unkept") or {}
    if unkept:
        _say("  not kept (zcor has no place for them): "
             + ", ".join(f"{k} ({n})" for k, n in unkept.items()))
    if answer.get("persona"):
        if answer.get("personaWritten"):
            _say("  PERSONA.md was replaced by the card's description, personality and scenario.")
        else:
            _say("  Proposed PERSONA.md (written only with --persona):")
            for line in answer["persona"].splitlines():
                _say(f"    {line}")
    if answer.get("preview"):
        _say("Nothing was changed (--preview).")


def cmd_export(args: argparse.Namespace, client: Client) -> dict[str, Any]:
    if args.format == "markdown" and not args.out:
        raise SystemExit("zcor: --out FOLDER is needed for the markdown format (one file per memory)")
    with client as c:
        summary: dict[str, Any]
        summary, files = run(c, export_steps(args.format), timeout=_patient(args))
    if args.out:
        try:
            write_export(args.format, files, args.out)
        except (OSError, ValueError) as e:
            raise SystemExit(f"zcor: cannot write {args.out}: {getattr(e, 'strerror', None) or e}") from None
    else:
        sys.stdout.write(files[0][1])
    return summary


def add_parsers(sub: Any, common: argparse.ArgumentParser, import_fn: Any, export_fn: Any) -> None:
    p = sub.add_parser("import", parents=[common],
                       help="import a SillyTavern World Info file, a character card (JSON or PNG), a lorebook_v3 "
                            "or a zcor JSONL export, as one operation")
    p.add_argument("file", metavar="FILE", help="the file (its format is found from its content)")
    p.add_argument("--preview", action="store_true", help="show exactly what would be created; change nothing")
    p.add_argument("--parent", metavar="ID", help="put the imported memories under this memory")
    p.add_argument("--format", choices=("worldinfo", "card", "lorebook", "jsonl"),
                   help="insist on a format (default: found from the content)")
    p.add_argument("--persona", action="store_true",
                   help="also replace PERSONA.md with a card's description, personality and scenario")
    p.add_argument("--json", action="store_true", help="print zcord's answer as JSON")
    p.set_defaults(func=import_fn)

    p = sub.add_parser("export", parents=[common], help="write the Memory as a lorebook, World Info, JSONL or "
                                                        "a folder of Markdown files")
    p.add_argument("--format", choices=("lorebook", "worldinfo", "jsonl", "markdown"), default="jsonl",
                   help="lorebook (lorebook_v3), worldinfo (SillyTavern), jsonl (zcor, everything; the default) "
                        "or markdown")
    p.add_argument("--out", metavar="PATH", help="the file (default: standard output) or, for markdown, the folder")
    p.set_defaults(func=export_fn)
