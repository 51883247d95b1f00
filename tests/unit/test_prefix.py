"""The system prefix (SPEC §5 zcor/prefix): PERSONA.md, the external_event_frame rule, the
declared-tools rule, memory guidance, every important memory with its latest full content
in first-marked order, and relationship guidance only when relationship memory is on.
Built fresh on every request."""

from __future__ import annotations

import re

import pytest

from zcord.core.errors import InvalidArgument
from zcord.core.persona import PERSONA_TEMPLATE
from zcord.retrieval.prefix import DEFAULT_IDENTITY
from zcord.service import Service

PERSONA = "你是小雪，一个温柔、有点毒舌的猫娘。说话时喜欢在句尾加“喵”。"


def node(t, title: str, content: str) -> str:
    return t.write(title=title, content=content, keywords=[])["id"]


def section_lines(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


# -- persona -------------------------------------------------------------------------------


def test_contains_persona_when_file_exists(svc):
    (svc.dir / "PERSONA.md").write_text(PERSONA + "\n", encoding="utf-8")
    text = svc.prefix()
    assert PERSONA in text
    assert text.index(PERSONA) < text.index("external_event_frame"), "persona comes first"


def test_first_use_writes_a_commented_template_and_the_prefix_gets_a_default_identity(svc):
    template = (svc.dir / "PERSONA.md").read_text(encoding="utf-8")
    assert template == PERSONA_TEMPLATE and template.lstrip().startswith("<!--")
    assert svc.persona_get()["empty"] is True and svc.status()["personaEmpty"] is True
    text = svc.prefix()
    assert text.startswith(DEFAULT_IDENTITY + "\n\n## Rules"), text[:200]
    assert "<!--" not in text and "PERSONA.md" not in text  # comments never reach the model
    assert "external_event_frame" in text and "zcor_memory_write" in text


def test_missing_or_comment_only_persona_gives_the_default_identity(svc):
    path = svc.dir / "PERSONA.md"
    path.unlink()
    assert svc.prefix().startswith(DEFAULT_IDENTITY + "\n")
    path.write_text("\n<!-- 还没写 -->\n  \n<!-- unterminated", encoding="utf-8")
    assert svc.prefix().startswith(DEFAULT_IDENTITY + "\n")
    path.write_text("<!-- note for operators -->\n" + PERSONA + "\n", encoding="utf-8")
    text = svc.prefix()
    assert text.startswith(PERSONA + "\n") and DEFAULT_IDENTITY not in text and "operators" not in text
    assert svc.status()["personaEmpty"] is False


def test_an_existing_persona_is_never_overwritten(memdir, clock):
    memdir.mkdir()
    (memdir / "PERSONA.md").write_text(PERSONA, encoding="utf-8")
    s = Service(memdir, clock=clock).open()
    try:
        assert (memdir / "PERSONA.md").read_text(encoding="utf-8") == PERSONA
        assert s.prefix().startswith(PERSONA)
    finally:
        s.close()
    (memdir / "PERSONA.md").write_text("", encoding="utf-8")  # emptied by hand: stays empty
    s = Service(memdir, clock=clock).open()
    try:
        assert (memdir / "PERSONA.md").read_text(encoding="utf-8") == ""
        assert s.persona_get()["empty"] is True
    finally:
        s.close()


def test_persona_set_replaces_the_file_and_is_logged(t, svc):
    result = svc.persona_set(PERSONA + "\n", actor="operator")
    assert result["empty"] is False and result["text"] == PERSONA + "\n"
    assert (svc.dir / "PERSONA.md").read_text(encoding="utf-8") == PERSONA + "\n"
    assert not [p for p in svc.dir.iterdir() if p.name.endswith(".tmp")]
    item = t.history(keywords=["zcor/persona/set"])["items"][0]
    assert item["status"] == "ok" and item["changes"][0]["kind"] == "persona.update"
    assert item["changes"][0]["before"] == PERSONA_TEMPLATE and item["changes"][0]["after"] == PERSONA + "\n"


@pytest.mark.parametrize("bad, message", [(None, "must be a string"), (["x"], "must be a string"),
                                          ("a" * 100_001, "at most 100,000"),
                                          ("\ud800", "lone surrogate")])
def test_persona_set_refuses_bad_text_and_changes_nothing(svc, bad, message):
    with pytest.raises(InvalidArgument) as e:
        svc.persona_set(bad)
    assert message in e.value.message and e.value.field == "text"
    assert (svc.dir / "PERSONA.md").read_text(encoding="utf-8") == PERSONA_TEMPLATE


def test_persona_read_fresh_each_time(svc):
    path = svc.dir / "PERSONA.md"
    path.write_text(PERSONA, encoding="utf-8")
    assert PERSONA in svc.prefix()
    path.write_text("你是阿澈，一个沉默寡言的剑客。", encoding="utf-8")
    text = svc.prefix()
    assert "你是阿澈，一个沉默寡言的剑客。" in text
    assert PERSONA not in text
    path.unlink()
    text = svc.prefix()
    assert "阿澈" not in text and "external_event_frame" in text and text.startswith(DEFAULT_IDENTITY)


# -- rules ---------------------------------------------------------------------------------


def test_external_event_frame_rule(svc):
    text = svc.prefix()
    lines = section_lines(text, "external_event_frame")
    assert lines, "the prefix names external_event_frame"
    joined = " ".join(lines)
    assert re.search(r"never|must not|do not|don't", joined, re.I), "it says never to call it"
    assert re.search(r"synthesi[sz]|system", joined, re.I), "it says the system synthesizes it"


def test_declared_tools_rule(svc):
    text = svc.prefix()
    assert re.search(r"only[^.\n]*tools[^.\n]*declared|declared[^.\n]*tools[^.\n]*only", text, re.I)


def test_memory_tool_guidance(svc):
    text = svc.prefix()
    for tool in ("zcor_memory_write", "zcor_memory_read", "zcor_memory_important"):
        assert tool in text


# -- important memories ----------------------------------------------------------------------


def test_important_memories_full_content_in_first_marked_order(t, svc):
    a = node(t, "主人的名字", "主人叫林晓，大家都叫她晓晓。" + "她喜欢猫。" * 300)
    b = node(t, "主人的生日", "三月五号，喜欢巧克力蛋糕。")
    c = node(t, "禁忌话题", "不要提她前男友。")
    node(t, "普通记录", "今天天气不错，和小明聊了聊。")
    for i in (c, a, b):
        t.important(id=i, important=True)
    text = svc.prefix()
    full_a = "主人叫林晓，大家都叫她晓晓。" + "她喜欢猫。" * 300
    assert full_a in text, "full content, not truncated"
    positions = [text.index(x) for x in ("不要提她前男友。", full_a, "三月五号，喜欢巧克力蛋糕。")]
    assert positions == sorted(positions), "first-marked order: c, a, b"
    for title in ("禁忌话题", "主人的名字", "主人的生日"):
        assert title in text
    assert "今天天气不错，和小明聊了聊。" not in text
    assert "普通记录" not in text


def test_important_memory_shows_latest_content(t, svc):
    a = node(t, "主人的工作", "主人在银行上班。")
    t.important(id=a, important=True)
    assert "主人在银行上班。" in svc.prefix()
    t.write(id=a, title="主人的新工作", content="主人跳槽去了游戏公司。")
    text = svc.prefix()
    assert "主人跳槽去了游戏公司。" in text
    assert "主人的新工作" in text
    assert "银行" not in text


def test_marking_shows_at_next_prefix(t, svc):
    a = node(t, "主人的生日", "三月五号。")
    assert "三月五号。" not in svc.prefix()
    t.important(id=a, important=True)
    assert "三月五号。" in svc.prefix()


def test_unmarking_removes_from_next_prefix(t, svc):
    a = node(t, "主人的生日", "三月五号。")
    b = node(t, "主人的猫", "猫叫咪咪。")
    t.important(id=a, important=True)
    t.important(id=b, important=True)
    t.important(id=a, important=False)
    text = svc.prefix()
    assert "三月五号。" not in text
    assert "猫叫咪咪。" in text


def test_sixth_mark_replaces_earliest_in_prefix(t, svc):
    ids = [node(t, f"重要记录{i}", f"重要内容第{i}条。") for i in range(6)]
    for i in ids[:5]:
        t.important(id=i, important=True)
    assert "重要内容第0条。" in svc.prefix()
    r = t.important(id=ids[5], important=True)
    assert r["replaced"]["id"] == ids[0]
    text = svc.prefix()
    assert "重要内容第0条。" not in text
    positions = [text.index(f"重要内容第{i}条。") for i in range(1, 6)]
    assert positions == sorted(positions)


def test_important_mark_moved_by_supersede_shows_replacement(t, svc):
    old = node(t, "主人住在城西", "城西老小区。")
    t.important(id=old, important=True)
    new = node(t, "主人的新家", "搬到了城东。")
    t.supersede(ids=[old], replacementId=new, reason="搬家了")
    text = svc.prefix()
    assert "搬到了城东。" in text
    assert "城西老小区。" not in text


def test_deleted_important_memory_leaves_prefix(t, svc):
    a = node(t, "临时提醒", "明天交报告。")
    t.important(id=a, important=True)
    t.delete(id=a)
    assert "明天交报告。" not in svc.prefix()


# -- relationship guidance --------------------------------------------------------------


def relationship_guidance(text: str) -> bool:
    return "zcor_relationship" in text


def test_relationship_guidance_present_when_on(svc):
    assert svc.config.relationship_memory is True
    text = svc.prefix()
    assert relationship_guidance(text)
    assert re.search(r"before[^.]*(talk|speak|mention)", text, re.I), "look a person up before talking"
    assert re.search(r"evidence", text, re.I), "update only on new evidence"


def test_relationship_guidance_absent_when_off(svc):
    svc.update_config({"relationshipMemory": False})
    text = svc.prefix()
    assert not relationship_guidance(text)
    assert "affinity" not in text.lower()
    assert "external_event_frame" in text


def test_relationship_guidance_returns_when_turned_back_on(svc):
    svc.update_config({"relationshipMemory": False})
    assert not relationship_guidance(svc.prefix())
    svc.update_config({"relationshipMemory": True})
    assert relationship_guidance(svc.prefix())


def test_relationship_off_keeps_important_memories(t, svc):
    a = node(t, "主人的生日", "三月五号。")
    t.important(id=a, important=True)
    svc.update_config({"relationshipMemory": False})
    assert "三月五号。" in svc.prefix()


# -- not recorded ---------------------------------------------------------------------------


def test_prefix_writes_no_history(t, svc):
    a = node(t, "主人的生日", "三月五号。")
    t.important(id=a, important=True)
    oplog = svc.dir / "operations.jsonl"
    total = t.history()["total"]
    size = oplog.stat().st_size
    for _ in range(3):
        svc.prefix()
    assert oplog.stat().st_size == size
    assert t.history()["total"] == total + 1
