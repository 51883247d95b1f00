"""zcor_memory_search: synonym-expanded candidates, then an LLM picks at most five. The LLM
phase runs without the service lock."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ...core.config import api_key_for
from ...core.errors import ProviderError
from ...core.fence import fence_tool_result
from ...retrieval.llm import Message, Provider
from ...retrieval.recall import SEARCH_CANDIDATES
from .. import inputs as I
from .. import scope
from ..calls import Ctx, Steps, parse_args

if TYPE_CHECKING:
    from ...core.config import LlmConfig
    from ..parts import FlowRoom, ToolEntry

SEARCH_SYSTEM = (
    "You filter the results of a memory search. You get the search keywords and candidate "
    "memories (id, title, content). Choose the candidates relevant to the keywords, at most 5, "
    "most relevant first. Answer with a JSON array of their ids and nothing else, for example "
    '["m3", "m17"]. Answer [] when none is relevant.'
)
MAX_SEARCH_RESULTS = 5


class SearchSteps(Steps):
    """zcor_memory_search: candidates under the lock, the LLM's choice without it."""

    def __init__(self, svc: FlowRoom, spec: ToolEntry, params: Any, actor: str) -> None:
        self.svc, self.spec, self.params = svc, spec, params
        self.candidates: list[dict[str, Any]] = []
        self.ids: list[str] = []

    def prepare(self, ctx: Ctx) -> None:
        svc = self.svc
        self.args = parse_args(I.SearchArgs, self.params)
        svc.refresh_synonyms()
        terms = sorted(svc.synonyms.classes.expand(self.args.keywords))
        hits = svc.retriever.visible_hits(terms, keyword_equality=False, limit=SEARCH_CANDIDATES,
                                          mode=svc.config.recall_ranking, floor=False,
                                          hide=scope.hidden_now(svc.state))
        view = svc.retriever.approved_view()  # held changes: candidates as last approved
        nodes = svc.state.nodes if view is None else view.nodes
        self.candidates = [scope.mark(svc.state, nodes[h.id].dump()) for h in hits]
        self.llm = svc.config.llm
        return None

    def work(self, ctx: Ctx) -> None:
        if self.candidates:
            self.ids = llm_filter(self.svc, self.llm, self.args.keywords, self.candidates)

    def finish(self, ctx: Ctx) -> dict[str, Any]:
        by_id = {c["id"]: c for c in self.candidates}
        ctx.log_result = {"ids": self.ids, "candidates": [c["id"] for c in self.candidates]}
        return {"items": [by_id[i] for i in self.ids], "candidateCount": len(self.candidates)}


def llm_filter(svc: FlowRoom, cfg: LlmConfig, keywords: list[str], candidates: list[dict[str, Any]]) -> list[str]:
    """Ask the configured provider which candidates are relevant; strict about the answer."""
    provider = Provider(cfg, api_key_for(cfg.base_url), client=svc.http_client)
    # memory text reaches this model too: fenced as in a tool result (issue 33)
    payload = fence_tool_result({"keywords": keywords,
                                 "candidates": [{"id": c["id"], "title": c["title"], "content": c["content"]}
                                                for c in candidates]})
    reply = provider.chat(SEARCH_SYSTEM, [Message("user", json.dumps(payload, ensure_ascii=False))],
                          max_tokens=256)
    text = reply.text.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.S)
    if fence:
        text = fence.group(1)
    try:
        ids = json.loads(text)
    except ValueError:
        raise ProviderError(f"The search filter's answer is not a JSON array of ids: {reply.text[:200]!r}") \
            from None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise ProviderError(f"The search filter's answer is not a JSON array of id strings: {text[:200]!r}")
    if len(ids) > MAX_SEARCH_RESULTS:
        raise ProviderError(f"The search filter returned {len(ids)} ids; at most {MAX_SEARCH_RESULTS} "
                            f"were asked for.")
    if len(set(ids)) != len(ids):
        raise ProviderError("The search filter returned an id twice.")
    known = {c["id"] for c in candidates}
    strangers = [i for i in ids if i not in known]
    if strangers:
        raise ProviderError(f"The search filter returned ids that were not candidates: "
                            f"{', '.join(strangers)}.")
    return ids
