"""What both clients' typed calls build on: the params builders of the calls whose params
are more than a dict of their arguments (zcord.transport.client_calls is generated from
the method table and calls these)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..core import protocol as P
from ..core.origin import ORIGIN_META


class CallParams:
    """The params builders the clients' typed calls share; a client provides `request`."""

    request: Callable[..., Any]
    view_tools: frozenset[str] = frozenset()
    """The tools whose calls are display reads (`view`) unless a call says otherwise (the TUI
    sets VIEW_TOOLS: its browsing must not bury what the bot did in History)."""

    def _call_tool_params(self, name: str, arguments: Mapping[str, Any] | None, view: bool | None = False,
                          origin: dict[str, Any] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name, "arguments": {} if arguments is None else arguments}
        if view is None:
            view = name in self.view_tools
        if view:
            params["_meta"] = {P.VIEW_META: True}
        if origin is not None:
            params.setdefault("_meta", {})[ORIGIN_META] = origin
        return params

    @staticmethod
    def _revert_origin_params(sender: str, start: str | datetime | None, end: str | datetime | None,
                              force: bool, preview: bool, shared: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"sender": sender}
        for key, value in (("from", start), ("to", end)):
            if value is not None:
                params[key] = value.isoformat() if isinstance(value, datetime) else value
        return {**params, **({"shared": True} if shared else {}), **({"force": True} if force else {}),
                **({"preview": True} if preview else {})}

    @staticmethod
    def _erase_params(sender: str | None, person_id: str | None, preview: bool) -> dict[str, Any]:
        return {**({"sender": sender} if sender is not None else {}),
                **({"personId": person_id} if person_id is not None else {}),
                **({"preview": True} if preview else {})}

    @staticmethod
    def _held_params(action: str, held: int | None, index: int | None) -> dict[str, Any]:
        return {"action": action, **({"held": held} if held is not None else {}),
                **({"index": index} if index is not None else {})}

    @staticmethod
    def _review_params(ids: list[int], force: bool = False, preview: bool = False) -> dict[str, Any]:
        return {"ids": list(ids), **({"force": True} if force else {}), **({"preview": True} if preview else {})}

    @staticmethod
    def _recall_params(session: str, events: list[dict[str, Any]] | str, private: bool = False) -> dict[str, Any]:
        if isinstance(events, str):
            events = [{"text": events, "origin": "external"}]
        params: dict[str, Any] = {"session": session, "events": events}
        if private:
            params["private"] = True
        return params

    @staticmethod
    def _revert_params(seq: int, force: bool, preview: bool) -> dict[str, Any]:
        params: dict[str, Any] = {"seq": seq}
        if force:
            params["force"] = True
        if preview:
            params["preview"] = True
        return params

    @staticmethod
    def _time_param(time: str | datetime) -> dict[str, Any]:
        return {"time": time.isoformat() if isinstance(time, datetime) else time}

    @staticmethod
    def _usage_report_params(session: str, input_tokens: int, cached_tokens: int, output_tokens: int,
                             cache_write_tokens: int, prefix_chars: int, header_chars: int, front_end: str | None,
                             protocol: str | None, model: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"session": session, "inputTokens": input_tokens, "cachedTokens": cached_tokens,
                                  "outputTokens": output_tokens, "cacheWriteTokens": cache_write_tokens,
                                  "prefixChars": prefix_chars, "headerChars": header_chars}
        for key, value in (("frontEnd", front_end), ("protocol", protocol), ("model", model)):
            if value is not None:
                params[key] = value
        return params
