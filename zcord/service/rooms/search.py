"""zcor_memory_search: synonym-expanded candidates, then an LLM picks at most five. The LLM
phase runs without the service lock."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ...core.config import api_key_for
from ...core.errors import ProviderError, ZcorError
from ...retrieval.llm import Message, Provider
from ...retrieval.recall import SEARCH_CANDIDATES
from ..calls import parse_args

if TYPE_CHECKING:
    from ..service import Service
    from ..tools import ToolSpec

SEARCH_SYSTEM = (
    "You filter the results of a memory search. You get the search keywords and candidate "
    "memories (id, title, content). Choose the candidates relevant to the keywords, at most 5, "
    "most relevant first. Answer with a JSON array of their ids and nothing else, for example "
    '["m3", "m17"]. Answer [] when none is relevant.'
)
MAX_SEARCH_RESULTS = 5


def search(svc: Service, spec: ToolSpec, params: Any, actor: str) -> dict[str, Any]:
    with svc.lock:
        svc.store.verify_lock()
        ctx = svc.new_ctx(spec.name, actor)
        try:
            args = parse_args(spec.input_model, params)
            svc.refresh_synonyms()
            terms = sorted(svc.synonyms.classes.expand(args.keywords))
            hits = svc.retriever.visible_hits(terms, keyword_equality=False, limit=SEARCH_CANDIDATES,
                                              mode=svc.config.recall_ranking, floor=False)
            candidates = [svc.state.nodes[h.id].dump() for h in hits]
            cfg = svc.config.llm
        except ZcorError as e:
            svc.log_call(ctx, params, error=e)
            raise
    try:
        if not candidates:
            ids: list[str] = []
        else:
            ids = llm_filter(svc, cfg, args.keywords, candidates)
    except ZcorError as e:
        with svc.lock:
            svc.renumber(ctx)
            svc.log_call(ctx, params, error=e)
        raise
    by_id = {c["id"]: c for c in candidates}
    result = {"items": [by_id[i] for i in ids], "candidateCount": len(candidates)}
    with svc.lock:
        ctx.log_result = {"ids": ids, "candidates": [c["id"] for c in candidates]}
        svc.renumber(ctx)
        svc.log_call(ctx, params)
    return result


def llm_filter(svc: Service, cfg, keywords: list[str], candidates: list[dict[str, Any]]) -> list[str]:
    """Ask the configured provider which candidates are relevant; strict about the answer."""
    provider = Provider(cfg, api_key_for(cfg.base_url), client=svc.http_client)
    payload = {"keywords": keywords,
               "candidates": [{"id": c["id"], "title": c["title"], "content": c["content"]}
                              for c in candidates]}
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
