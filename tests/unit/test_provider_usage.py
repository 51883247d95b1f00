"""provider_usage: the providers' usage objects as `zcor/usage/report` counts, the whole
prompt always in input_tokens (Anthropic's input_tokens leaves the cached part out)."""

from __future__ import annotations

from zcord.client import provider_usage


def test_openai_chat_completions_with_cached_tokens():
    usage = {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
             "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0}}
    assert provider_usage(usage) == {"input_tokens": 2006, "cached_tokens": 1920, "cache_write_tokens": 0,
                                     "output_tokens": 300}


def test_openai_without_details_a_top_level_cached_count_and_the_responses_api():
    assert provider_usage({"prompt_tokens": 10, "completion_tokens": 2})["cached_tokens"] == 0
    assert provider_usage({"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 8})["cached_tokens"] == 8
    responses = {"input_tokens": 500, "input_tokens_details": {"cached_tokens": 400}, "output_tokens": 20}
    assert provider_usage(responses) == {"input_tokens": 500, "cached_tokens": 400, "cache_write_tokens": 0,
                                         "output_tokens": 20}


def test_deepseek_cache_hit_tokens():
    usage = {"prompt_tokens": 1000, "completion_tokens": 50, "prompt_cache_hit_tokens": 900,
             "prompt_cache_miss_tokens": 100}
    assert provider_usage(usage)["cached_tokens"] == 900 and provider_usage(usage)["input_tokens"] == 1000


def test_anthropic_adds_the_cached_and_written_parts_to_the_prompt():
    usage = {"input_tokens": 50, "cache_read_input_tokens": 10000, "cache_creation_input_tokens": 248,
             "output_tokens": 503}
    assert provider_usage(usage, "anthropic") == {"input_tokens": 10298, "cached_tokens": 10000,
                                                  "cache_write_tokens": 248, "output_tokens": 503}
    assert provider_usage({"input_tokens": 7, "output_tokens": 1, "cache_read_input_tokens": None},
                          "anthropic")["input_tokens"] == 7


def test_missing_or_odd_usage():
    assert provider_usage(None) is None and provider_usage("12") is None
    odd = provider_usage({"prompt_tokens": "12", "completion_tokens": -3, "prompt_tokens_details": {"cached_tokens": True}})
    assert odd == {"input_tokens": 0, "cached_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0}
    # a server that says more was cached than sent: clipped, so the report is never refused
    assert provider_usage({"prompt_tokens": 5, "completion_tokens": 1, "cached_tokens": 9})["cached_tokens"] == 5
