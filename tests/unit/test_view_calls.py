"""Display reads (`view`, the `zcor/view` meta) are for the read-only tools only. Tools that
run their own flow off the service lock (search, backup, restore) are refused like any
other tool outside VIEW_TOOLS: the refusal is recorded and nothing else happens."""

from __future__ import annotations

import pytest

from tests.conftest import log_records
from zcord.core.errors import InvalidArgument
from zcord.core.protocol import VIEW_TOOLS
from zcord.service.tools import TOOLS


@pytest.mark.parametrize("tool,args", [
    ("zcor_memory_search", {"keywords": ["奶茶"]}),
    ("zcor_memory_backup", {}),
    ("zcor_memory_restore", {"backupFile": "memory-state-20260101T000000.000Z.json"}),
    ("zcor_memory_write", {"title": "x", "content": "y"}),
])
def test_a_view_of_a_tool_outside_view_tools_is_refused_and_recorded(svc, tool, args):
    assert tool not in VIEW_TOOLS
    svc.call("zcor_memory_write", {"title": "奶茶", "content": "珍珠"})
    before = len(log_records(svc.dir))
    backups = sorted(p.name for p in svc.store.backups.iterdir())
    with pytest.raises(InvalidArgument) as refused:
        svc.call(tool, args, view=True)
    assert refused.value.field == "_meta" and tool in refused.value.message
    records = log_records(svc.dir)[before:]
    assert [(r["tool"], r["status"], r["error"]["code"]) for r in records] == [(tool, "error", "invalid_argument")]
    assert sorted(p.name for p in svc.store.backups.iterdir()) == backups
    assert svc.status()["nodes"] == 1


def test_view_tools_are_exactly_the_tables_plain_reads():
    """The client's VIEW_TOOLS (zcord.core.protocol, so a bot need not load the service) names
    the tool table's tools that change nothing and run under the lock like any read."""
    plain_reads = {t.name for t in TOOLS.values() if not t.mutates and t.flow is None and t.handler is not None}
    assert VIEW_TOOLS == plain_reads
