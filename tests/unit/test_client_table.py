"""The clients are produced from the method table (zcord.transport.methods.TABLE): the
generated file is up to date, every method is reachable from both clients, and the sync and
async calls have the same signatures."""

from __future__ import annotations

import inspect
import re

from zcord.transport import client as C
from zcord.transport import gen_client
from zcord.transport import methods as table_methods
from zcord.transport.methods import TABLE
from zcord.transport.params import NoParams

HAND_WRITTEN = {"tools/call": "call_tool", "zcor/subscribe": "subscribe", "zcor/unsubscribe": "unsubscribe"}
"""Calls kept by hand: they unwrap an MCP result or keep client state across reconnects."""
NO_CLIENT_CALL = {"initialize", "prompts/list", "prompts/get", "resources/list", "resources/templates/list",
                  "resources/read", "zcor/llm", "zcor/snapshot"}
"""Reached with `request` only: the handshake, MCP extras for MCP hosts, and two methods no
client wraps today."""


def test_generated_client_calls_are_up_to_date():
    assert gen_client.TARGET.read_text(encoding="utf-8") == gen_client.render(TABLE), \
        "run `python -m zcord.transport.gen_client`"


def _sent_method(fn) -> str:
    found = re.findall(r'request\(\s*"([^"]+)"', inspect.getsource(fn))
    assert found, fn
    return found[0]


def test_every_method_is_reachable_from_both_clients_with_one_signature():
    for method in TABLE:
        names = [c.name for c in method.client] or ([HAND_WRITTEN[method.name]] if method.name in HAND_WRITTEN else [])
        if not names:
            assert method.name in NO_CLIENT_CALL, f"{method.name} has no client call; declare one in the table"
            continue
        for name in names:
            sync, asynchronous = getattr(C.Client, name), getattr(C.AsyncClient, name)
            assert not inspect.iscoroutinefunction(sync) and inspect.iscoroutinefunction(asynchronous), name
            assert inspect.signature(sync) == inspect.signature(asynchronous), name
            assert _sent_method(sync) == _sent_method(asynchronous) == method.name, name
    assert set(HAND_WRITTEN) | NO_CLIENT_CALL <= {m.name for m in TABLE}


def test_the_clients_keep_the_calls_bots_and_the_tui_use():
    # the typed calls zcor_tui, zcord/cli.py, zcord/bot and contrib use (grepped), by name and parameters
    expected = {
        "ping": "(self, *, timeout: 'float | None' = None) -> 'None'",
        "recall": "(self, session: 'str', events: 'list[dict[str, Any]] | str', private: 'bool' = False) -> "
                  "'list[str]'",
        "history_revert": "(self, seq: 'int', force: 'bool' = False, preview: 'bool' = False) -> 'R.RevertResult'",
        "synonyms_held": "(self, action: 'str', held: 'int | None' = None, index: 'int | None' = None) -> "
                         "'R.SynonymsHeldResult'",
        "backup_preview": "(self, backup_file: 'str') -> 'R.BackupPreviewResult'",
        "history_revert_origin": "(self, sender: 'str', start: 'str | datetime | None' = None, "
                                 "end: 'str | datetime | None' = None, force: 'bool' = False, "
                                 "preview: 'bool' = False, shared: 'bool' = False) -> 'R.RevertOriginResult'",
    }
    for name, sig in expected.items():
        assert str(inspect.signature(getattr(C.Client, name))) == sig, name
    calls = {c.name for m in TABLE for c in m.client} | set(HAND_WRITTEN.values())
    assert {"prefix", "recall", "context", "status", "config_get", "config_set", "backups", "synonym_groups",
            "synonym_listing", "synonyms_set", "recall_explain", "reload", "persona_get", "persona_set",
            "history_versions", "history_reinstate", "history_at", "history_query", "trust_get", "trust_set",
            "review_list", "review_approve", "review_reject", "list_tools"} <= calls


def test_a_method_is_declared_once():
    table = type(TABLE)()
    table_methods.method("zcor/x", params=NoParams, result=dict, table=table)(_noop)
    try:
        table_methods.method("zcor/x", params=NoParams, result=dict, table=table)(_noop)
    except ValueError as e:
        assert "zcor/x" in str(e)
    else:
        raise AssertionError("a second declaration was accepted")


async def _noop(m, call):
    return {}


def test_every_method_and_tool_has_a_params_and_a_result_model():
    from pydantic import BaseModel

    from zcord.service.tools import TOOLS
    from zcord.transport.results import TOOL_RESULTS

    for m in TABLE:
        assert isinstance(m.params, type) and issubclass(m.params, BaseModel), m.name
        assert m.result is not None, m.name
    assert set(TOOL_RESULTS) == set(TOOLS)
    for name, spec in TOOLS.items():  # the typed tool calls, generated from the input models
        assert getattr(C.Client, name).__annotations__["arguments"] == spec.input_model.__name__
        assert inspect.iscoroutinefunction(getattr(C.AsyncClient, name))
