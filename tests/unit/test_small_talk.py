"""Small talk recalls nothing (issue 25, the English small talk left over): the bot's own
name (PERSONA.md's first heading) addresses the bot, and everyday phrasal uses of verbs
("heading to bed", "running late") are not the verbs' topics. Weighted recall only; seed
mode keeps its rule."""

from __future__ import annotations

import pytest

from tests.unit.test_recall_weighted import node, recall
from zcord.core.persona import PersonaName, persona_name


def persona(svc, text: str) -> None:
    svc.persona_set(text)


# -- the bot's own name -------------------------------------------------------------------


@pytest.mark.parametrize("text, name", [
    ("# Juniper\n\nYou are Juniper, a companion bot.", "Juniper"),
    ("<!-- # Template -->\n# Pixel — the server's bot\n", "Pixel"),
    ("# Juniper, a companion bot", "Juniper"),
    ("# Juniper Bot (companion)", "Juniper Bot"),
    ("# 小满，陪伴型机器人\n你是小满。", "小满"),
    ("Intro line\n\n# 阿布\n", "阿布"),
    ("你是小雪，一个猫娘。", ""),  # no heading: no name
    ("## Pixel\n", ""),  # only a level-one heading names the bot
    ("#Pixel\n", ""),  # not a Markdown heading
])
def test_bot_name_is_the_first_heading_of_persona(text, name):
    assert persona_name(text) == name


def test_bot_name_is_read_again_when_persona_changes(tmp_path):
    path = tmp_path / "PERSONA.md"
    name = PersonaName(path)
    assert name() == ""  # no file
    path.write_text("# Juniper\n")
    assert name() == "Juniper"
    path.write_text("# Pixel the bot\n")
    assert name() == "Pixel the bot"
    path.unlink()
    assert name() == ""


def test_thanks_to_the_bot_by_name_recalls_nothing(t, svc):
    """"thanks Juniper, you're the best" once recalled *Juniper's notes to self*: the only
    evidence was the bot's own name."""
    notes = node(t, "Juniper's notes to self")
    node(t, "Sam's birthday is October 14")
    assert recall(svc, "thanks Juniper, you're the best") == [notes]  # no persona: no name known
    persona(svc, "# Juniper\n\nYou are Juniper, a companion bot.")
    assert recall(svc, "thanks Juniper, you're the best") == []
    assert recall(svc, "@juniper you're a lifesaver") == []
    assert recall(svc, "morning Juniper", "Morning! Big day?", "night Juniper") == []


def test_the_bots_name_never_hides_the_question(t, svc):
    notes = node(t, "Juniper's notes to self")
    birthday = node(t, "Sam's birthday is October 14")
    persona(svc, "# Juniper\n")
    assert recall(svc, "Juniper, when is Sam's birthday?") == [birthday]
    assert recall(svc, "Juniper, what is in your notes?") == [notes]


def test_a_renamed_bot_is_addressed_by_its_new_name(t, svc):
    pixel = node(t, "Pixel's notes")
    juniper = node(t, "Juniper's notes to self")
    persona(svc, "# Juniper\n")
    assert recall(svc, "thanks Pixel") == [pixel]
    persona(svc, "# Pixel\n")
    assert recall(svc, "thanks Pixel") == []
    assert recall(svc, "thanks Juniper") == [juniper]


def test_chinese_bot_name_is_cut_whole_and_addresses_the_bot(t, svc, jieba_words):
    notes = node(t, "阿布的备忘")
    node(t, "群规：不带宠物")
    persona(svc, "# 阿布\n\n你是阿布，徒步群的机器人。")
    assert recall(svc, "谢谢阿布") == []
    assert recall(svc, "@阿布 辛苦了") == []
    assert "阿布" in svc.recall_explain("谢谢阿布")["segmented"]
    assert recall(svc, "阿布的备忘里写了啥") == [notes]


def test_seed_mode_keeps_its_rule_for_the_bots_name(t, svc):
    notes = node(t, "Juniper's notes to self")
    persona(svc, "# Juniper\n")
    svc.update_config({"recallRanking": "seed"})
    assert recall(svc, "thanks Juniper") == [notes]


# -- everyday phrasal uses of verbs -------------------------------------------------------


def test_heading_to_bed_is_no_deputy_head(t, svc):
    """"ok I'm heading to bed, have a good one" once recalled *Nadia is applying for deputy
    head*: `heading` folds to `head`."""
    deputy = node(t, "Nadia is applying for deputy head")
    node(t, "Monthly board game night")
    for text in ("ok I'm heading to bed, have a good one", "heading off to bed", "headed home, talk tomorrow",
                 "we're heading out now", "heads up, I'm heading back"):
        assert recall(svc, text) == [], text
    assert recall(svc, "did Nadia get the deputy head job?") == [deputy]
    assert recall(svc, "is Nadia heading the department now?") == [deputy]  # the verb used plainly


def test_running_late_is_no_marathon(t, svc):
    """"running late, start without me" once recalled *Ed is running the London Marathon*
    (and `ran` folds to `run` too)."""
    marathon = node(t, "Ed is running the London Marathon")
    tenk = node(t, "Sam ran a 10K in September")
    for text in ("running late, start without me", "sorry, ran a bit late today", "I'm running behind",
                 "we ran out of snacks"):
        assert recall(svc, text) == [], text
    assert recall(svc, "is Ed still running the London Marathon?")[0] == marathon
    assert recall(svc, "how far did Sam run?")[0] == tenk


def test_other_phrasal_verbs_are_filler(t, svc):
    node(t, "Hangs paintings for the gallery")
    node(t, "Catch of the day: trout")
    node(t, "Signed with a new agency")
    for text in ("just hanging out tonight", "let's catch up tomorrow", "signing off for today"):
        assert recall(svc, text) == [], text


def test_a_verb_used_plainly_elsewhere_in_the_batch_still_counts(t, svc):
    marathon = node(t, "Ed is running the London Marathon")
    assert recall(svc, "running late, sorry") == []
    assert recall(svc, "running late, sorry", "how is Ed's running going?") == [marathon]


def test_seed_mode_keeps_its_rule_for_phrasal_verbs(t, svc):
    deputy = node(t, "Nadia is applying for deputy head")
    svc.update_config({"recallRanking": "seed"})
    assert recall(svc, "ok I'm heading to bed") == [deputy]
