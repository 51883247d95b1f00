"""A provider's `usage` object as the counts `zcor/usage/report` takes, so every front end
reads OpenAI-compatible, DeepSeek and Anthropic usage the same way (no I/O, no imports).

    counts = provider_usage(response["usage"], "openai")
    if counts:
        client.usage_report(session, **counts, prefix_chars=..., header_chars=..., front_end="chat")

`input_tokens` is always the whole prompt, cached and cache-written tokens included:

- OpenAI Chat Completions (and compatible servers): `prompt_tokens`, cached
  `prompt_tokens_details.cached_tokens` (some compatible servers put `cached_tokens` at the
  top), `completion_tokens`; the Responses API's `input_tokens`, `input_tokens_details.cached_tokens`,
  `output_tokens` likewise. Streamed: the last chunk's `usage` with
  `stream_options: {"include_usage": true}`.
- DeepSeek: `prompt_tokens` (= `prompt_cache_hit_tokens + prompt_cache_miss_tokens`), cached
  `prompt_cache_hit_tokens`.
- Anthropic Messages: `input_tokens` counts only what was neither read from nor written to
  the cache, so the prompt is `input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`; cached is `cache_read_input_tokens`, written
  `cache_creation_input_tokens`. Streamed: `message_start`'s `message.usage` updated with
  `message_delta`'s `usage` (its `output_tokens` is the running total).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def provider_usage(usage: Any, protocol: str = "openai") -> dict[str, int] | None:
    """`{input_tokens, cached_tokens, cache_write_tokens, output_tokens}` (the keyword
    arguments of `usage_report`) from a provider's usage object; None when there is none.
    Missing or odd values count 0; cached and written tokens never exceed the prompt."""
    if not isinstance(usage, Mapping):
        return None
    if protocol == "anthropic":
        cached = _count(usage.get("cache_read_input_tokens"))
        written = _count(usage.get("cache_creation_input_tokens"))
        prompt = _count(usage.get("input_tokens")) + cached + written
        output = _count(usage.get("output_tokens"))
    else:
        responses_api = "prompt_tokens" not in usage and "input_tokens" in usage
        prompt = _count(usage.get("input_tokens" if responses_api else "prompt_tokens"))
        output = _count(usage.get("output_tokens" if responses_api else "completion_tokens"))
        details = usage.get("input_tokens_details" if responses_api else "prompt_tokens_details")
        if "prompt_cache_hit_tokens" in usage:  # DeepSeek
            cached = _count(usage.get("prompt_cache_hit_tokens"))
        elif isinstance(details, Mapping) and "cached_tokens" in details:
            cached = _count(details.get("cached_tokens"))
        else:
            cached = _count(usage.get("cached_tokens"))
        written = 0
    cached = min(cached, prompt)
    written = min(written, prompt - cached)
    return {"input_tokens": prompt, "cached_tokens": cached, "cache_write_tokens": written, "output_tokens": output}
