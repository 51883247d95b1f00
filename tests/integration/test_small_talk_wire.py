"""Small talk on the wire (issue 25): the bot's name, read from PERSONA.md's first heading
by a running daemon, addresses the bot; a hand edit renames it at the next batch."""

from __future__ import annotations


def test_bot_name_from_persona_addresses_the_bot(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        notes = op.call_tool("zcor_memory_write", {"title": "Juniper's notes to self", "content": "short replies"})
        deputy = op.call_tool("zcor_memory_write", {"title": "Nadia is applying for deputy head", "content": "May"})
        say = [{"text": "thanks Juniper, you're the best", "origin": "external"}]
        assert bot.recall("tg:1", say) == [notes["id"]]  # the template names no bot
        op.persona_set("# Juniper\n\nYou are Juniper, a companion bot.\n")
        assert bot.recall("tg:1", say) == []
        assert bot.context("tg:1") == {"text": "", "ids": []}
        assert bot.recall("tg:1", [{"text": "ok I'm heading to bed", "origin": "external"}]) == []
        assert bot.recall("tg:1", [{"text": "did Nadia get the deputy head job?", "origin": "external"}]) \
            == [deputy["id"]]
        # a hand edit of PERSONA.md renames the bot from the next batch on
        (daemon.memdir / "PERSONA.md").write_text("# Pixel\n", encoding="utf-8")
        assert bot.recall("tg:1", say) == [notes["id"]]
        assert bot.recall("tg:1", [{"text": "thanks Pixel", "origin": "external"}]) == []
