"""Operator backup methods over a real daemon: the listing and the preview of a restore."""

from __future__ import annotations

import pytest

from zcord.client import ToolError


def test_preview_counts_what_a_restore_would_change_and_changes_nothing(daemon):
    with daemon.client("operator") as op, daemon.client() as bot:
        for title in ("甲", "乙", "丙"):
            op.call_tool("zcor_memory_write", {"title": title, "content": title})
        op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                                 "affinity": 10, "reason": "一起吃饭"})
        op.call_tool("zcor_memory_important", {"id": "m1", "important": True})
        name = op.call_tool("zcor_memory_backup")["backupFile"]

        op.call_tool("zcor_memory_delete", {"id": "m3"})
        op.call_tool("zcor_memory_write", {"id": "m2", "title": "乙", "content": "改过"})
        op.call_tool("zcor_memory_write", {"title": "丁", "content": "新的"})
        op.call_tool("zcor_relationship_write", {"personId": "qq:1", "name": "小明", "relationship": "朋友",
                                                 "affinity": 30, "reason": "帮忙"})
        op.call_tool("zcor_relationship_write", {"personId": "qq:2", "name": "小红", "relationship": "同学",
                                                 "affinity": 0, "reason": "刚认识"})
        op.call_tool("zcor_memory_important", {"id": "m1", "important": False})
        op.call_tool("zcor_memory_important", {"id": "m4", "important": True})

        state = daemon.memdir / "memory-state.json"
        before = state.read_bytes()
        preview = op.backup_preview(name)
        assert preview["backupFile"] == name
        assert preview["memories"] == {"now": 3, "after": 3, "added": 1, "removed": 1, "changed": 1}
        assert preview["relationships"] == {"now": 2, "after": 1, "added": 0, "removed": 1, "changed": 1}
        assert preview["important"] == {"now": ["m4"], "after": ["m1"], "changed": True}
        assert state.read_bytes() == before

        # the listing: size and time of each file, and which the bot made
        bot_name = bot.call_tool("zcor_memory_backup")["backupFile"]
        listing = {b["backupFile"]: b for b in op.backups()}
        assert listing[name]["size"] == (daemon.memdir / "backups" / name).stat().st_size
        assert listing[name]["modifiedAt"] and listing[name]["bot"] is False
        assert listing[bot_name]["bot"] is True

        # the bot may not preview; bad names are refused naming the field
        with pytest.raises(ToolError) as refused:
            bot.request("zcor/backups/preview", {"backupFile": name})
        assert refused.value.code == "forbidden"
        with pytest.raises(ToolError) as bad:
            op.backup_preview("../memory-state.json")
        assert bad.value.code == "invalid_argument" and bad.value.field == "backupFile"
        with pytest.raises(ToolError) as missing:
            op.backup_preview("memory-state-none.json")
        assert missing.value.code == "not_found"
        with pytest.raises(ToolError) as no_name:  # one shape for bad params of operator methods (issue 28)
            op.request("zcor/backups/preview", {})
        assert "backupFile" in no_name.value.message
        assert no_name.value.code == "invalid_argument" and no_name.value.field == "backupFile"
        assert state.read_bytes() == before

        # and the restore does what the preview said
        op.call_tool("zcor_memory_restore", {"backupFile": name})
        status = op.status()
        assert status["nodes"] == 3 and status["relationships"] == 1 and status["important"] == ["m1"]
        assert op.backup_preview(name)["memories"] == {"now": 3, "after": 3, "added": 0, "removed": 0,
                                                       "changed": 0}
