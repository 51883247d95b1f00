"""Import and export (issue 36), in process: the formats, the mapping, bad files (each a clear
error naming the entry and field, nothing written), a second import updating what the
first created, the import as one revertible operation, and round trips (hypothesis)."""

from __future__ import annotations

import json
import tempfile

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as stt

from tests import operator_rooms as rooms
from tests.lorefiles import book_entry, card, dumps, lorebook_v3, png_card, wi_entry, world_info
from zcord.core.errors import InvalidArgument, ZcorError
from zcord.interop import readers
from zcord.service import interop as X
from zcord.service.service import Service


@pytest.fixture
def svc():
    d = tempfile.mkdtemp(dir="/tmp", prefix="zi")
    with Service(d) as s:
        yield s


def imp(svc: Service, raw: bytes, name: str = "lore.json", **kw) -> dict:
    return X.import_file(svc, raw, X.Options(name=name, **kw))


def titles(svc: Service) -> list[str]:
    return [n.title for n in svc.state.nodes.values()]


def changed_ops(svc: Service) -> int:
    records, _ = svc.oplog.query([], None, None, 1000, 0, changes_only=True)
    return len(records)


# -- formats and mapping -----------------------------------------------------------------------------


def test_world_info_maps_comment_keys_groups_constant_and_disabled(svc):
    wi = world_info(
        wi_entry(0, ["moon", "luna"], "Made of cheese.", "The Moon", keysecondary=["night"], constant=True,
                 group="Sky", order=7),
        wi_entry(1, ["sun"], "Hot.", group="Sky"),
        wi_entry(2, ["x"], "hidden", "Off", disable=True),
        wi_entry(3, [], "First line of the body\nsecond line"))
    r = imp(svc, dumps(wi))
    assert r["format"] == "worldinfo" and r["created"] == 4 and r["origin"] == "import:lore.json"
    nodes = {n.title: n for n in svc.state.nodes.values()}
    assert set(nodes) == {"Sky", "The Moon", "sun", "First line of the body"}
    assert nodes["The Moon"].keywords == ("moon", "luna", "night")
    assert nodes["The Moon"].parent_id == nodes["Sky"].id == nodes["sun"].parent_id
    assert nodes["First line of the body"].parent_id is None
    assert svc.state.important == [nodes["The Moon"].id]
    assert r["skipped"] == [{"entry": 'entries["2"]', "title": "Off", "reason": "disabled in the file"}]
    assert r["unkept"] == {"order": 1}


@pytest.mark.parametrize("version", [2, 3])
def test_card_json_and_png_give_the_same_book_and_a_persona(svc, version):
    c = card([book_entry(["inn"], "The Drowned Rat.", comment="The inn"),
              book_entry(["marsh"], "Fog.", name="Marsh", constant=True)], version=version)
    from_json = readers.read(dumps(c))
    from_png = readers.read(png_card({"chara" if version == 2 else "ccv3": c}))
    for book in (from_json, from_png):
        assert book.format == "card"
        assert [(e.title, e.content, e.keywords, e.important) for e in book.entries] == \
            [("The inn", "The Drowned Rat.", ["inn"], False), ("Marsh", "Fog.", ["marsh"], True)]
        assert book.persona is not None and book.persona.startswith("# Aster\n\nA witch of the northern marsh.")
        assert "## Personality\n\nCurious, blunt." in book.persona and "## Scenario" in book.persona


def test_png_with_both_chunks_reads_ccv3_first():
    v2 = card([book_entry(["old"], "from chara")])
    v3 = card([book_entry(["new"], "from ccv3")], version=3)
    book = readers.read(png_card({"chara": v2, "ccv3": v3}))
    assert [e.content for e in book.entries] == ["from ccv3"]


def test_lorebook_v3_and_a_bare_character_book(svc):
    lb = lorebook_v3([book_entry(["k"], "c", name="N", id=5), book_entry(["j"], "d", enabled=False)])
    book = readers.read(dumps(lb))
    assert book.format == "lorebook" and [e.ident for e in book.entries] == ["id:5", "#1"]
    assert [e.enabled for e in book.entries] == [True, False]
    bare = readers.read(dumps({"entries": [book_entry(["k"], "c")]}))
    assert bare.format == "lorebook"


def test_card_persona_is_written_only_when_asked(svc):
    c = dumps(card([book_entry(["inn"], "The Drowned Rat.")]))
    r = imp(svc, c, name="aster.json")
    assert r["persona"] and r["personaWritten"] is False
    assert "Aster" not in svc.persona_get()["text"]
    r = imp(svc, c, name="aster.json", persona=True)
    assert r["personaWritten"] is True and svc.persona_get()["text"] == r["persona"]


def test_a_card_without_book_is_refused_unless_only_its_persona_is_wanted(svc):
    c = dumps(card(None))
    with pytest.raises(InvalidArgument) as e:
        imp(svc, c)
    assert "data.character_book" in e.value.message and "no lorebook" in e.value.message
    assert svc.state.nodes == {} and changed_ops(svc) == 0
    r = imp(svc, c, persona=True)
    assert r["created"] == 0 and r["personaWritten"] is True


def test_constant_entries_fill_the_important_list_in_entry_order_and_the_rest_are_reported(svc):
    wi = world_info(*[wi_entry(i, [f"k{i}"], f"c{i}", f"T{i}", constant=True) for i in range(7)])
    r = imp(svc, dumps(wi))
    assert [svc.state.nodes[i].title for i in svc.state.important] == ["T0", "T1", "T2", "T3", "T4"]
    assert [x["title"] for x in r["notMarked"]] == ["T5", "T6"]
    assert all("already holds 5" in x["reason"] for x in r["notMarked"])


# -- one operation, preview, second import ----------------------------------------------------------------


def test_preview_shows_exactly_what_the_import_then_creates(svc):
    wi = dumps(world_info(wi_entry(0, ["a"], "A.", "Alpha", group="G"), wi_entry(1, ["b"], "B.", "Beta")))
    p = imp(svc, wi, preview=True)
    assert svc.state.nodes == {} and changed_ops(svc) == 0 and svc.seq == 0
    r = imp(svc, wi)
    assert p["preview"] is True and r["preview"] is False
    strip = [{k: v for k, v in i.items() if k != "content"} for i in p["items"]]
    assert strip == r["items"]
    assert [(i["id"], i["title"], i["parentId"]) for i in r["items"]] == \
        [("m1", "G", None), ("m2", "Alpha", "m1"), ("m3", "Beta", None)]


def test_the_same_file_twice_updates_instead_of_duplicating(svc):
    entries = [wi_entry(0, ["a"], "A.", "Alpha", group="G"), wi_entry(1, ["b"], "B.", "Beta")]
    first = imp(svc, dumps(world_info(*entries)))
    again = imp(svc, dumps(world_info(*entries)))
    assert (again["created"], again["updated"], again["unchanged"]) == (0, 0, 3)
    entries[1]["content"] = "B, revised."
    entries.append(wi_entry(2, ["c"], "C.", "Gamma"))
    third = imp(svc, dumps(world_info(*entries)))
    assert (third["created"], third["updated"], third["unchanged"]) == (1, 1, 2)
    assert sorted(titles(svc)) == ["Alpha", "Beta", "G", "Gamma"]
    assert svc.state.nodes[first["items"][2]["id"]].content == "B, revised."
    other = imp(svc, dumps(world_info(*entries)), name="other.json")  # another file: its own memories
    assert other["created"] == 4


def test_the_import_is_one_operation_with_its_origin_and_reverts_as_one(svc):
    r = imp(svc, dumps(world_info(*[wi_entry(i, [f"k{i}"], f"c{i}", f"T{i}", constant=i == 0, group="G")
                                    for i in range(5)])))
    rec = svc.find_operation(r["seq"])
    assert rec["tool"] == "zcor/import" and rec["origin"] == {"operator": True, "senders": ["import:lore.json"]}
    assert "data" not in rec["params"] and rec["params"]["name"] == "lore.json"
    from zcord.client import describe_origin
    assert describe_origin(rec["origin"]) == "operator (import:lore.json)"
    assert {c["kind"] for c in rec["changes"]} == {"node.create", "important.set"}
    assert changed_ops(svc) == 1
    rooms.revert(svc, {"seq": r["seq"]})
    assert svc.state.nodes == {} and svc.state.important == []
    again = imp(svc, dumps(world_info(wi_entry(0, ["k0"], "c0", "T0"))))  # its memories are gone: made anew
    assert again["created"] == 1


def test_revert_origin_takes_back_every_import_of_one_file(svc):
    imp(svc, dumps(world_info(wi_entry(0, ["a"], "A.", "Alpha"))))
    imp(svc, dumps(world_info(wi_entry(0, ["a"], "A2.", "Alpha"), wi_entry(1, ["b"], "B.", "Beta"))))
    svc.call("zcor_memory_write", {"title": "mine", "content": "kept"})
    rooms.revert_origin(svc, {"sender": "import:lore.json"})
    assert titles(svc) == ["mine"]


def test_parent_id_puts_the_import_under_a_memory(svc):
    top = svc.call("zcor_memory_write", {"title": "Lore", "content": ""})["id"]
    imp(svc, dumps(world_info(wi_entry(0, ["a"], "A.", "Alpha"))), parent_id=top)
    assert [svc.state.nodes[i].title for i in svc.state.child_ids(top)] == ["Alpha"]
    with pytest.raises(ZcorError) as e:
        imp(svc, dumps(world_info(wi_entry(0, ["a"], "A.", "Alpha"))), name="x.json", parent_id="m99")
    assert e.value.field == "parentId"


# -- bad files: a clear error naming the entry and field, nothing written ----------------------------------

GOOD = wi_entry(0, ["ok"], "fine", "Fine")


def _bad_files() -> list[tuple[str, bytes, str]]:
    card_png = png_card({"chara": card([book_entry(["k"], "c")])})
    many = {"entries": {str(i): {"uid": i, "key": ["k"], "content": "c"} for i in range(50_000)}}
    return [
        ("truncated PNG", card_png[: len(card_png) // 2], "PNG"),
        ("PNG with no card", png_card({"Comment": "just a picture"}), "no ccv3 or chara"),
        ("zip bomb in a PNG text chunk", png_card({"chara": "A" * 20_000_000}, zip_chunk=True), "decompression bomb"),
        ("card with no book", dumps(card(None)), "data.character_book"),
        ("200,000 characters", dumps(world_info(GOOD, wi_entry(7, ["k"], "x" * 200_000, "Huge"))),
         'entries["7"].content is 200,000 characters'),
        ("50,000 entries", dumps(many), "50,000 entries"),
        ("duplicate uid keys", b'{"entries": {"1": {"uid": 1, "key": [], "content": "a"}, '
                               b'"1": {"uid": 1, "key": [], "content": "b"}}}', 'uid \'1\' is given twice'),
        ("duplicate uid fields", dumps({"entries": {"1": wi_entry(4, ["a"], "a"), "2": wi_entry(4, ["b"], "b")}}),
         'entries["2"].uid 4 is also the uid of entries["1"]'),
        ("duplicate book ids", dumps(lorebook_v3([book_entry(["a"], "a", id=3), book_entry(["b"], "b", id=3)])),
         "data.entries[1].id 3 is also the id of data.entries[0]"),
        ("a key that is a number", dumps(world_info(GOOD, wi_entry(9, ["ok", 42], "c"))),
         'entries["9"].key[1] must be a string, not a number'),
        ("keys that are an object", dumps(lorebook_v3([book_entry({"a": 1}, "c")])),
         "data.entries[0].keys must be an array of strings"),
        ("a title over 200", dumps(world_info(wi_entry(0, ["k"], "c", "t" * 201))), 'entries["0"].comment is 201'),
        ("none of the formats", b'{"hello": "world"}', "none of the formats"),
        ("not JSON", b"{not json", "not valid JSON"),
        ("binary", b"\x00\xff\xfe garbage", "neither a PNG"),
        ("Character Card V1", dumps({"name": "A", "description": "d", "first_mes": "hi"}), "V1"),
        ("a lone surrogate", b'{"entries": {"0": {"uid": 0, "key": ["k"], "content": "\\ud800"}}}',
         'entries["0"].content holds a lone surrogate'),
        ("a relationship name over 200", b'{"type":"zcor-export","version":1}\n{"type":"relationship","personId":"p",'
         b'"name":"' + b"n" * 201 + b'","relationship":"r","affinity":1,"reason":"x","createdAt":'
         b'"2026-01-01T00:00:00+00:00","updatedAt":"2026-01-01T00:00:00+00:00"}\n', "line 2.name is 201"),
        ("zcor JSONL with a missing parent", b'{"type":"zcor-export","version":1}\n{"type":"memory","id":"m1",'
         b'"title":"t","content":"","keywords":[],"parentId":"m9","createdAt":"2026-01-01T00:00:00+00:00",'
         b'"updatedAt":"2026-01-01T00:00:00+00:00"}\n', "line 2.parentId names m9"),
    ]


@pytest.mark.parametrize("what,raw,needle", _bad_files(), ids=[b[0] for b in _bad_files()])
def test_bad_files_are_refused_by_name_and_nothing_is_written(svc, what, raw, needle):
    svc.call("zcor_memory_write", {"title": "before", "content": "x"})
    seq, nodes = svc.seq, dict(svc.state.nodes)
    for preview in (True, False):
        with pytest.raises(InvalidArgument) as e:
            imp(svc, raw, preview=preview)
        assert needle in e.value.message, e.value.message
        assert e.value.message.endswith("nothing was imported.")
    assert svc.state.nodes == nodes and svc.seq == seq and changed_ops(svc) == 1


def test_format_insisted_on_must_match():
    with pytest.raises(InvalidArgument, match="is a SillyTavern World Info file, not a character card"):
        readers.read(dumps(world_info(GOOD)), "card")


# -- exports ----------------------------------------------------------------------------------------------


def _small_memory(svc: Service) -> dict[str, str]:
    a = svc.call("zcor_memory_write", {"title": "Kingdom: North/South", "content": "Cold.\nVery cold.",
                                       "keywords": ["north", "kingdom"]})["id"]
    b = svc.call("zcor_memory_write", {"title": "Castle", "content": "Stone.", "parentId": a,
                                       "sourceMessage": "we saw a castle"})["id"]
    c = svc.call("zcor_memory_write", {"title": "Old castle", "content": "Gone.", "parentId": a})["id"]
    svc.call("zcor_memory_supersede", {"ids": [c], "replacementId": b, "reason": "rebuilt"})
    svc.call("zcor_memory_important", {"id": b, "important": True})
    svc.call("zcor_relationship_write", {"personId": "qq:1", "name": "Lin", "relationship": "friend",
                                         "affinity": 40, "reason": "helped", "memoryNodeId": b})
    return {"a": a, "b": b, "c": c}


def test_world_info_export_is_what_sillytavern_loads(svc):
    ids = _small_memory(svc)
    files, summary = X.export_files(svc, "worldinfo")
    wi = json.loads(files[0].text)
    assert set(wi) == {"entries"} and summary["memories"] == 2  # the superseded one is not lore
    e = wi["entries"]["1"]
    assert e["uid"] == 1 and e["key"] == list(svc.state.nodes[ids["b"]].keywords)
    assert e["comment"] == "Castle" and e["content"] == "Castle\n\nStone." and e["constant"] is True
    assert e["extensions"]["zcor"] == {"id": ids["b"], "parentId": ids["a"], "titleInContent": True}
    assert wi["entries"]["0"]["constant"] is False and wi["entries"]["0"]["key"] == ["north", "kingdom"]


def test_markdown_export_has_front_matter_and_the_tree_as_folders(svc):
    ids = _small_memory(svc)
    files, _ = X.export_files(svc, "markdown")
    paths = [f.path for f in files]
    assert paths == [f"Kingdom North South ({ids['a']}).md",
                     f"Kingdom North South ({ids['a']})/Castle ({ids['b']}).md",
                     f"Kingdom North South ({ids['a']})/Old castle ({ids['c']}).md"]
    text = files[1].text
    head, body = text.split("---\n", 2)[1:]
    meta = yaml.safe_load(head)
    assert meta["id"] == ids["b"] and meta["important"] is True and meta["parentId"] == ids["a"]
    assert meta["sourceMessage"] == "we saw a castle" and body == "\nStone.\n"
    assert yaml.safe_load(files[2].text.split("---\n")[1])["supersededBy"] == ids["b"]


# -- round trips (hypothesis) ----------------------------------------------------------------------------

text = stt.text(stt.characters(blacklist_categories=("Cs", "Cc")), max_size=40)
word = stt.text(stt.characters(whitelist_categories=("Ll", "Lu", "Lo", "Nd", "Zs")), min_size=1,
               max_size=8).filter(lambda w: w.strip())
node_spec = stt.tuples(text.filter(lambda s: s.strip()), text, stt.lists(word, max_size=4, unique=True),
                       stt.integers(min_value=-1, max_value=10))
memory_spec = stt.tuples(stt.lists(node_spec, min_size=1, max_size=7), stt.sets(stt.integers(0, 6), max_size=5),
                         stt.integers(0, 6), stt.lists(stt.lists(word, min_size=2, max_size=3, unique=True), max_size=2))


def _build(svc: Service, spec) -> None:
    nodes, important, supersede, groups = spec
    ids: list[str] = []
    for title, content, keywords, parent in nodes:
        args = {"title": title[:200] if title[:200].strip() else "t", "content": content, "keywords": keywords}
        if 0 <= parent < len(ids):
            args["parentId"] = ids[parent]
        ids.append(svc.call("zcor_memory_write", args)["id"])
    for i in sorted(important):
        if i < len(ids):
            svc.call("zcor_memory_important", {"id": ids[i], "important": True})
    if supersede < len(ids) - 1:
        svc.call("zcor_memory_supersede", {"ids": [ids[supersede]], "replacementId": ids[-1], "reason": "newer"})
    svc.call("zcor_relationship_write", {"personId": "p1", "name": "Pat", "relationship": "r", "affinity": 5,
                                         "reason": "x", "memoryNodeId": ids[-1]})
    for g in groups:
        try:
            svc.call("zcor_synonyms_add", {"terms": g})
        except ZcorError:
            pass


def _shape(svc: Service) -> dict:
    """The Memory without its ids: each memory by its place in creation order."""
    st = svc.state
    order = {i: n for n, i in enumerate(st.nodes)}
    mem = [(n.title, n.content, n.keywords, order.get(n.parent_id), n.source_message, n.created_at, n.updated_at,
            order.get(n.superseded_by), n.supersede_reason) for n in st.nodes.values()]
    rels = [(r.person_id, r.name, r.affinity, order.get(r.memory_node_id), r.created_at) for r in
            st.relationships.values()]
    from zcord.retrieval.synonyms import key_of
    return {"memories": mem, "important": [order[i] for i in st.important], "relationships": rels,
            "synonyms": {key_of(g) for g in svc.synonym_groups()}}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=memory_spec)
def test_jsonl_round_trip_into_an_empty_memory(spec):
    with Service(tempfile.mkdtemp(dir="/tmp", prefix="zj")) as a, Service(tempfile.mkdtemp(dir="/tmp", prefix="zk")) as b:
        _build(a, spec)
        files, _ = X.export_files(a, "jsonl")
        r = X.import_file(b, files[0].text.encode(), X.Options(name="memories.jsonl"))
        assert r["created"] == len(a.state.nodes)
        assert _shape(b) == _shape(a)
        again = X.import_file(b, files[0].text.encode(), X.Options(name="memories.jsonl"))
        assert again["created"] == 0 and _shape(b) == _shape(a)


@settings(max_examples=10, deadline=None)
@given(spec=memory_spec, fmt=stt.sampled_from(["lorebook", "worldinfo"]))
def test_lorebook_round_trip_keeps_titles_contents_keywords_and_the_important_set(spec, fmt):
    with Service(tempfile.mkdtemp(dir="/tmp", prefix="zl")) as a, Service(tempfile.mkdtemp(dir="/tmp", prefix="zm")) as b:
        _build(a, spec)
        files, _ = X.export_files(a, fmt)
        X.import_file(b, files[0].text.encode(), X.Options(name="book.json"))

        def lore(s: Service):
            cur = [n for n in s.state.nodes.values() if n.superseded_by is None]
            imp_titles = {s.state.nodes[i].title for i in s.state.important}
            return sorted((n.title, n.content, n.keywords) for n in cur), sorted(imp_titles)

        assert lore(b) == lore(a)
        tree_a = {n.title: a.state.nodes[n.parent_id].title if n.parent_id in a.state.nodes and
                  a.state.nodes[n.parent_id].superseded_by is None else None
                  for n in a.state.nodes.values() if n.superseded_by is None}
        tree_b = {n.title: b.state.nodes[n.parent_id].title if n.parent_id else None for n in b.state.nodes.values()}
        if len(tree_a) == len(lore(a)[0]):  # titles distinct: the tree can be compared by title
            assert tree_b == tree_a


def test_export_of_an_empty_memory_imports_to_nothing(svc):
    for fmt in ("lorebook", "worldinfo", "jsonl"):
        files, _ = X.export_files(svc, fmt)
        assert X.import_file(svc, files[0].text.encode(), X.Options(name=f"e.{fmt}"))["created"] == 0
    assert X.export_files(svc, "markdown")[0] == []


def test_export_refuses_an_unknown_format(svc):
    with pytest.raises(InvalidArgument) as e:
        X.export_files(svc, "pdf")
    assert e.value.field == "format"


def test_name_must_be_a_file_name(svc):
    with pytest.raises(InvalidArgument) as e:
        imp(svc, dumps(world_info(GOOD)), name="../etc/x")
    assert e.value.field == "name"


@settings(max_examples=60, deadline=None)
@given(title=text.filter(lambda s: s.strip()), keywords=stt.lists(text, max_size=3), source=stt.none() | text,
       content=text)
def test_markdown_front_matter_reads_back_as_the_fields(title, keywords, source, content):
    from datetime import UTC, datetime

    from zcord.core.models import Node
    from zcord.interop.writers import Snapshot, markdown

    at = datetime(2026, 1, 1, tzinfo=UTC)
    node = Node(id="m1", title=title, content=content, keywords=keywords, source_message=source, created_at=at,
                updated_at=at)
    [f] = markdown(Snapshot(nodes={"m1": node}, important=["m1"], relationships={}, synonyms=[], at=at))
    assert "/" not in f.path and f.path.endswith("(m1).md") or f.path == "m1.md"
    head, body = f.text[len("---\n"):].split("\n---\n\n", 1)
    meta = yaml.safe_load(head)
    assert (meta["title"], meta["keywords"], meta.get("sourceMessage"), meta["important"]) == \
        (title, keywords, source, True)
    assert body.rstrip("\n") == content.rstrip("\n")


def test_the_limits_are_the_tools_limits():
    from zcord.interop import common
    from zcord.service import inputs

    assert (common.MAX_TITLE, common.MAX_CONTENT, common.MAX_KEYWORD, common.MAX_KEYWORDS, common.MAX_SOURCE,
            common.MAX_ID, common.MAX_SHORT_TEXT) == \
        (inputs.MAX_TITLE, inputs.MAX_CONTENT, inputs.MAX_KEYWORD, inputs.MAX_KEYWORDS, inputs.MAX_SOURCE,
         inputs.MAX_ID, inputs.MAX_SHORT_TEXT)


def test_a_huge_preview_cuts_each_content_but_keeps_everything_else(svc, monkeypatch):
    monkeypatch.setattr(X, "PREVIEW_CONTENT", 1000)
    wi = dumps(world_info(*[wi_entry(i, [f"k{i}"], "x" * 600, f"T{i}") for i in range(3)]))
    p = imp(svc, wi, preview=True)
    assert [(i["title"], len(i["content"]), i["contentCut"]) for i in p["items"]] == \
        [("T0", 333, True), ("T1", 333, True), ("T2", 333, True)]
    r = imp(svc, wi)
    assert [svc.state.nodes[i["id"]].content for i in r["items"]] == ["x" * 600] * 3


def test_the_identity_mapping_is_found_while_the_history_index_is_busy(svc, monkeypatch):
    wi = dumps(world_info(wi_entry(0, ["a"], "A.", "Alpha")))
    imp(svc, wi)
    from zcord.core.history_index import IndexBuilding

    def busy(*a, **kw):
        raise IndexBuilding("the history index is being built")

    monkeypatch.setattr(svc.oplog, "query", busy)
    assert imp(svc, wi)["unchanged"] == 1 and titles(svc) == ["Alpha"]


def test_an_answer_lists_at_most_max_items_and_counts_them_all(svc, monkeypatch):
    monkeypatch.setattr(X, "MAX_ITEMS", 2)
    r = imp(svc, dumps(world_info(*[wi_entry(i, [f"k{i}"], "c", f"T{i}") for i in range(5)])))
    assert r["created"] == 5 and r["itemsTotal"] == 5 and [i["title"] for i in r["items"]] == ["T0", "T1"]
    assert len(svc.state.nodes) == 5


def test_a_persona_too_long_for_persona_md_is_refused_before_anything(svc):
    c = dumps(card([book_entry(["k"], "c")], description="d" * 100_001))
    with pytest.raises(InvalidArgument, match="data.description: the card's PERSONA.md would be"):
        imp(svc, c, persona=True)
    assert svc.state.nodes == {} and changed_ops(svc) == 0
    assert imp(svc, c)["created"] == 1  # without persona the book comes in
