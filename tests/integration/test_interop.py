"""`zcor import` / `zcor export` and `zcor/import` / `zcor/export` over a real daemon: a World
Info book and a PNG card in, a preview that changes nothing, a second import that creates
no duplicates, the import reverted as one operation, files larger than one message both
ways, and a bad file refused with nothing written."""

from __future__ import annotations

import json

import yaml

from tests.lorefiles import book_entry, card, dumps, png_card, wi_entry, world_info
from zcord.client import ToolError, export_steps, import_steps, run_steps

WI = world_info(
    wi_entry(0, ["moon", "luna"], "The moon is made of cheese.", "The Moon", constant=True, group="Sky"),
    wi_entry(1, ["sun"], "The sun is hot.", "The Sun", group="Sky"),
    wi_entry(2, ["inn", "rat"], "The Drowned Rat serves eel pie.", "The inn"),
    wi_entry(3, ["old"], "Nobody reads this.", "Disabled", disable=True))


def _titles(c) -> list[str]:
    out = []

    def walk(parent):
        for item in c.call_tool("zcor_memory_children", {} if parent is None else {"parentId": parent})["items"]:
            out.append(item["title"])
            walk(item["id"])

    walk(None)
    return sorted(out)


def test_cli_import_preview_import_again_revert_and_export(daemon, tmp_path):
    book = tmp_path / "world.json"
    book.write_bytes(dumps(WI))
    p = daemon.zcor("import", str(book), "--preview")
    assert p.returncode == 0, p.stderr
    assert "Would import world.json (worldinfo): 4 created" in p.stdout and "Nothing was changed" in p.stdout
    assert "skipped   entries[\"3\"]: disabled in the file" in p.stdout
    with daemon.client("operator") as c:
        assert _titles(c) == []
    r = daemon.zcor("import", str(book), "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["created"] == 4 and answer["origin"] == "import:world.json"
    again = json.loads(daemon.zcor("import", str(book), "--json").stdout)
    assert (again["created"], again["unchanged"]) == (0, 4)
    with daemon.client("operator") as c:
        assert _titles(c) == ["Sky", "The Moon", "The Sun", "The inn"]
        moon = next(i for i in answer["items"] if i["title"] == "The Moon")
        assert c.call_tool("zcor_memory_read", {"id": moon["id"]})["important"] is True
        hist = c.history_query({"origin": "import:world.json", "changesOnly": True})
        assert [x["seq"] for x in hist["items"]] == [answer["seq"]]
    # everything the import made goes back with one revert
    rv = daemon.zcor("revert", str(answer["seq"]))
    assert rv.returncode == 0, rv.stderr
    with daemon.client("operator") as c:
        assert _titles(c) == []
    daemon.zcor("import", str(book))
    out = tmp_path / "notes"
    e = daemon.zcor("export", "--format", "markdown", "--out", str(out))
    assert e.returncode == 0, e.stderr
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*.md"))
    assert len(files) == 4 and any(f.startswith("Sky (") and "/The Moon (" in f for f in files)
    moon_file = next(p for p in out.rglob("The Moon*.md"))
    assert yaml.safe_load(moon_file.read_text().split("---\n")[1])["important"] is True
    wi = daemon.zcor("export", "--format", "worldinfo")
    assert wi.returncode == 0, wi.stderr
    entries = json.loads(wi.stdout)["entries"]
    assert sorted(e["comment"] for e in entries.values()) == ["Sky", "The Moon", "The Sun", "The inn"]
    assert [e["constant"] for e in entries.values() if e["comment"] == "The Moon"] == [True]


def test_png_card_with_persona(daemon, tmp_path):
    png = tmp_path / "aster.png"
    png.write_bytes(png_card({"chara": card([book_entry(["marsh"], "Fog every morning.", comment="Marsh")]),
                              "ccv3": card([book_entry(["marsh"], "Fog, V3.", comment="Marsh")], version=3)}))
    r = daemon.zcor("import", str(png))
    assert r.returncode == 0, r.stderr
    assert "Proposed PERSONA.md (written only with --persona)" in r.stdout and "# Aster" in r.stdout
    with daemon.client("operator") as c:
        assert "Aster" not in c.persona_get()["text"]
    r = daemon.zcor("import", str(png), "--persona")
    assert r.returncode == 0, r.stderr
    with daemon.client("operator") as c:
        assert c.persona_get()["text"].startswith("# Aster\n\nA witch of the northern marsh.")
        items = c.call_tool("zcor_memory_children", {})["items"]
        assert [i["title"] for i in items] == ["Marsh"]  # the second import updated it
        assert c.call_tool("zcor_memory_read", {"id": items[0]["id"]})["content"] == "Fog, V3."


def test_bad_file_is_refused_and_nothing_is_written(daemon, tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_bytes(dumps(world_info(wi_entry(0, ["ok"], "fine", "Fine"), wi_entry(5, ["ok", 7], "c", "Bad"))))
    r = daemon.zcor("import", str(bad))
    assert r.returncode == 1
    assert 'entries["5"].key[1] must be a string, not a number; nothing was imported.' in r.stderr
    png = tmp_path / "cut.png"
    png.write_bytes(png_card({"chara": card([book_entry(["k"], "c")])})[:60])
    r = daemon.zcor("import", str(png))
    assert r.returncode == 1 and "PNG" in r.stderr and "nothing was imported" in r.stderr
    with daemon.client("operator") as c:
        assert _titles(c) == []
        assert c.history_query({"changesOnly": True})["total"] == 0


def test_files_larger_than_one_message_both_ways(daemon):
    """A 6 MB JSONL arrives in upload pieces; its export back comes in read pieces."""
    nodes = [{"type": "memory", "id": f"m{i}", "title": f"Chapter {i}", "content": f"{i} " + "页" * 19_990,
              "keywords": [f"c{i}"], "parentId": "m1" if i > 1 else None, "sourceMessage": None,
              "createdAt": "2026-01-01T00:00:00.000+00:00", "updatedAt": "2026-01-02T00:00:00.000+00:00",
              "supersededBy": None, "supersedeReason": None} for i in range(1, 111)]
    text = "\n".join(json.dumps(x, ensure_ascii=False) for x in
                     [{"type": "zcor-export", "version": 1}, *nodes, {"type": "important", "ids": ["m3"]}]) + "\n"
    raw = text.encode()
    assert len(raw) > 6_000_000
    sent: list[str] = []
    with daemon.client("operator", timeout=120) as c:
        steps = import_steps(raw, "big.jsonl")

        class Spy:
            def request(self, method, params, timeout=None):
                sent.append(method)
                return c.request(method, params, timeout=timeout)

        answer = run_steps(Spy(), steps)
        assert answer["created"] == 110 and sent.count("zcor/import/upload") >= 4
        summary, files = run_steps(Spy(), export_steps("jsonl"))
        assert summary["exportId"] and "zcor/export/read" in sent
    lines = [json.loads(x) for x in files[0][1].splitlines()]
    got = [x for x in lines if x["type"] == "memory"]
    assert [(x["title"], x["content"]) for x in got] == [(n["title"], n["content"]) for n in nodes]
    assert next(x for x in lines if x["type"] == "important")["ids"] == [got[2]["id"]]


def test_import_params_are_checked_by_name(daemon):
    with daemon.client("operator") as c:
        for params, field in (({"data": "{}", "preview": "yes"}, "preview"), ({}, "data"),
                              ({"data": "{}", "format": "pdf"}, "format"), ({"uploadId": "nope"}, "uploadId"),
                              ({"data": "!!", "encoding": "base64"}, "data")):
            try:
                c.request("zcor/import", params)
            except ToolError as e:
                assert e.field == field, (params, e)
            else:
                raise AssertionError(f"{params} was accepted")
    with daemon.client("bot") as bot:  # an operator method: the bot may not import
        try:
            bot.request("zcor/import", {"data": json.dumps(WI)})
        except Exception as e:
            assert "operator" in str(e).lower()
        else:
            raise AssertionError("the bot imported")


def test_an_import_survives_a_kill(daemon, tmp_path):
    """The import's log record is its journal: after SIGKILL the restarted daemon has it whole."""
    book = tmp_path / "world.json"
    book.write_bytes(dumps(WI))
    r = daemon.zcor("import", str(book))
    assert r.returncode == 0, r.stderr
    daemon.kill()
    daemon.start()
    with daemon.client("operator") as c:
        assert _titles(c) == ["Sky", "The Moon", "The Sun", "The inn"]
        assert len(c.call_tool("zcor_memory_query", {"keywords": ["moon"]})["items"]) == 1
    again = json.loads(daemon.zcor("import", str(book), "--json").stdout)
    assert (again["created"], again["unchanged"]) == (0, 4)  # the mapping came back from the log too
