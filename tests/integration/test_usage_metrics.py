"""Token usage (issue 32.5) and Prometheus metrics (issue 35.18) over a real daemon: front
ends report with `zcor/usage/report`, operators read `zcor/usage`, `zcor usage` and the status
line; the reports survive a restart and a kill, stay bounded, are refused whole when bad and
rate-limited for the bot; `zcor/metrics` is Prometheus text that prometheus_client parses."""

from __future__ import annotations

import json
import os
import pty
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import ZCOR_CMD
from zcord.client import ToolError


def configured(make_daemon, config: dict, **start):
    d = make_daemon()
    d.memdir.mkdir(mode=0o750)
    (d.memdir / "config.json").write_text(json.dumps(config))
    return d.start(**start)


def test_reports_show_in_usage_and_status_survive_restart_and_kill_and_are_not_operations(daemon):
    with daemon.client() as bot:
        assert bot.usage_report("qq:group:1", 12000, 11000, 300, prefix_chars=4000, header_chars=900,
                                front_end="endpoint", protocol="openai", model="gpt-x") == {"recorded": True}
        bot.usage_report("qq:group:1", 13000, 12500, 200, front_end="endpoint")
        bot.usage_report("console", 5000, 0, 100, cache_write_tokens=4500, front_end="chat", protocol="anthropic")
    with daemon.client("operator") as op:
        ops_before = op.history_query({})["total"]
        usage = op.usage()
        status = op.status()
    group = next(s for s in usage["sessions"] if s["session"] == "qq:group:1")
    assert (group["requests"], group["inputTokens"], group["cachedTokens"], group["outputTokens"]) == (2, 25000, 23500, 500)
    assert group["hitShare"] == 0.94 and group["prefixChars"] == 4000 and group["headerChars"] == 900
    assert group["frontEnd"] == "endpoint" and group["model"] == "gpt-x"
    assert usage["totals"]["requests"] == 3 and usage["totals"]["cacheWriteTokens"] == 4500
    assert [s["session"] for s in usage["sessions"]] == ["qq:group:1", "console"]  # by input tokens
    assert status["usageToday"]["requests"] == 3 and status["usageToday"]["inputTokens"] == 30000
    assert ops_before == 0  # reports are no operations: the history holds none of them

    out = daemon.zcor("usage")
    assert out.returncode == 0, out.stderr
    assert "3 provider calls · 30,000 input tokens, 78% read from the provider's cache" in out.stdout
    assert "qq:group:1" in out.stdout and "endpoint" in out.stdout
    out = daemon.zcor("usage", "--json", "--session", "console", "--days", "7")
    assert json.loads(out.stdout)["totals"]["inputTokens"] == 5000

    daemon.stop()
    daemon.start()
    with daemon.client("operator") as op:
        assert op.usage() == usage
        op.usage_report("console", 10, 10, 1)  # operators may report too
    daemon.kill()  # no clean shutdown: every answered report is already on disk
    daemon.start()
    with daemon.client("operator") as op:
        after = op.usage()
    assert after["totals"]["requests"] == 4 and after["totals"]["inputTokens"] == 30010


def test_bad_reports_are_refused_naming_the_field_and_count_nothing(daemon):
    good = {"session": "s", "inputTokens": 10, "cachedTokens": 5, "outputTokens": 1}
    bad = [
        ({**good, "session": ""}, "session"),
        ({k: v for k, v in good.items() if k != "inputTokens"}, "inputTokens"),
        ({**good, "cachedTokens": -1}, "cachedTokens"),
        ({**good, "outputTokens": 1.5}, "outputTokens"),
        ({**good, "inputTokens": True}, "inputTokens"),
        ({**good, "headerChars": "9"}, "headerChars"),
        ({**good, "frontEnd": "my front end"}, "frontEnd"),
        ({**good, "cachedTokens": 11}, "cachedTokens"),  # more cached than the whole prompt
        ({**good, "cacheWriteTokens": 6}, "cachedTokens"),
        ({**good, "inputTokens": 10**12, "cachedTokens": 0}, "inputTokens"),
        ({**good, "cachedTokenz": 1}, "cachedTokenz"),
    ]
    with daemon.client() as bot:
        for params, field in bad:
            with pytest.raises(ToolError) as e:
                bot.request("zcor/usage/report", params)
            assert e.value.code == "invalid_argument" and e.value.field == field, (params, e.value.message)
            assert field in e.value.message
        with pytest.raises(ToolError) as e:
            bot.usage()  # reading usage is the operator's
        assert e.value.code == "forbidden"
    with daemon.client("operator") as op:
        assert op.usage()["totals"]["requests"] == 0
        with pytest.raises(ToolError) as e:
            op.usage(days=91)
        assert e.value.field == "days"
    assert not (daemon.memdir / "usage.jsonl").exists()


def test_the_bots_reports_are_rate_limited_and_the_operators_are_not(make_daemon):
    d = configured(make_daemon, {"botUsageReportsPerMinute": 3})
    with d.client() as bot, d.client() as other_bot:
        for _ in range(2):
            bot.usage_report("s", 100, 50, 5)
        other_bot.usage_report("s", 100, 50, 5)  # one budget for all the bot's connections
        with pytest.raises(ToolError) as e:
            bot.usage_report("s", 100, 50, 5)
        assert e.value.code == "rate_limited" and "botUsageReportsPerMinute" in e.value.message
    with d.client("operator") as op:
        for _ in range(5):
            op.usage_report("s", 100, 50, 5)
        assert op.usage()["totals"]["requests"] == 8  # 3 of the bot's, 5 of the operator's


def test_usage_is_bounded_in_sessions_across_a_restart(make_daemon):
    d = make_daemon().start(env={"ZCOR_USAGE_MAX_SESSIONS": "3"})
    with d.client() as bot:
        for name in ("a", "b", "c", "d", "e"):
            bot.usage_report(name, 100, 10, 1)
    with d.client("operator") as op:
        usage = op.usage()
    assert sorted(s["session"] for s in usage["sessions"]) == ["c", "d", "e"]
    assert usage["totals"]["requests"] == 5
    d.stop()
    d.start(env={"ZCOR_USAGE_MAX_SESSIONS": "3"})
    with d.client("operator") as op:
        assert op.usage() == usage


def _samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _value(samples: dict, name: str, **labels) -> float:
    found = [s.value for s in samples.get(name, []) if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


def test_metrics_parse_as_prometheus_text_and_count_what_happened(daemon):
    with daemon.client("operator") as op:
        op.call_tool("zcor_memory_write", {"title": "火锅", "content": "小王最爱吃火锅。", "keywords": ["火锅"]})
    with daemon.client() as bot:
        for _ in range(2):
            bot.call_tool("zcor_memory_write", {"title": "生日", "content": "三月三日。"})
        with pytest.raises(ToolError):
            bot.call_tool("zcor_memory_read", {"id": "m999"})
        assert bot.recall("qq:1", "今晚吃火锅吗")  # one memory recalled
        header = bot.context("qq:1")["text"]
        bot.recall("qq:1", [{"text": "（系统）", "origin": "internal"}])
        bot.usage_report("qq:1", 2000, 1500, 80, header_chars=len(header), front_end="endpoint")
        text = bot.metrics()  # the bot may read metrics (the endpoint serves them on /metrics)
    with daemon.client("operator") as op:
        journaled = op.status()["journaledChanges"]
    s = _samples(text)
    assert _value(s, "zcord_calls_total", method="tools/call", tool="zcor_memory_write", status="ok") == 3
    assert _value(s, "zcord_calls_total", method="tools/call", tool="zcor_memory_read", status="not_found") == 1
    assert _value(s, "zcord_calls_total", method="zcor/usage/report", tool="", status="ok") == 1
    assert _value(s, "zcord_call_duration_seconds_count", method="tools/call", tool="zcor_memory_write") == 3
    assert _value(s, "zcord_call_duration_seconds_bucket", method="tools/call", tool="zcor_memory_write", le="+Inf") == 3
    assert _value(s, "zcord_recall_batches_total", result="hit") == 1
    assert _value(s, "zcord_recall_batches_total", result="unchanged") == 1
    assert _value(s, "zcord_recall_hits_total") == 1
    assert _value(s, "zcord_recall_duration_seconds_count") == 2
    assert _value(s, "zcord_context_header_characters_count") == 1
    assert _value(s, "zcord_context_header_characters_sum") == len(header) > 0
    assert _value(s, "zcord_connections", role="bot") == 1
    assert _value(s, "zcord_review_pending") == 0
    assert _value(s, "zcord_journal_changes") == journaled > 0
    assert _value(s, "zcord_memories") == 3
    assert _value(s, "zcord_usage_input_tokens_total", session="qq:1") == 2000
    assert _value(s, "zcord_usage_cached_tokens_total", session="qq:1") == 1500
    assert _value(s, "zcord_usage_header_characters_total", session="qq:1") == len(header)

    out = daemon.zcor("metrics")
    assert out.returncode == 0, out.stderr
    s = _samples(out.stdout)
    assert _value(s, "zcord_calls_total", method="zcor/metrics", tool="", status="ok") == 1  # the bot's, above
    assert _value(s, "zcord_connections", role="bot") == 1  # zcor metrics connects as the bot: any user may
    with daemon.client("operator") as op:
        op.request("zcor/snapshot", {})
        s = _samples(op.metrics())
    assert _value(s, "zcord_snapshot_age_seconds") >= 0 and _value(s, "zcord_journal_changes") == 0


def test_status_on_a_terminal_ends_with_todays_usage(daemon):
    with daemon.client() as bot:
        bot.usage_report("s", 1000, 900, 10)
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(ZCOR_CMD + ["status", "--socket", str(daemon.sock)], stdout=secondary,
                              stderr=subprocess.PIPE, timeout=60, env={**os.environ, "COLUMNS": "200"})
        os.close(secondary)
        secondary = -1
        shown = b""
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert done.returncode == 0, done.stderr
    assert "usage today: 1 provider call, 1,000 input tokens, 90% from the provider's cache" in shown.decode()
    piped = daemon.zcor("status")
    assert "usage today" not in piped.stdout and json.loads(piped.stdout)["usageToday"]["requests"] == 1


async def test_the_async_client_reports_and_reads_metrics(daemon):
    from zcord.client import provider_usage

    bot = await daemon.aclient()
    try:
        counts = provider_usage({"input_tokens": 40, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 60,
                                 "output_tokens": 30}, "anthropic")
        assert await bot.usage_report("qq:9", **counts, front_end="astrbot", protocol="anthropic") == {"recorded": True}
        text = await bot.metrics()
    finally:
        await bot.close()
    s = _samples(text)
    assert _value(s, "zcord_usage_input_tokens_total", session="qq:9") == 1000
    assert _value(s, "zcord_usage_cache_write_tokens_total", session="qq:9") == 60
    with daemon.client("operator") as op:
        assert op.usage(session="qq:9")["totals"]["hitShare"] == 0.9


def test_usage_jsonl_is_0640_under_any_umask_and_never_followed_through_a_link(make_daemon, tmp_path):
    import stat

    d = make_daemon()
    d.start(cmd_prefix=["sh", "-c", 'umask 077; exec "$@"', "sh"])
    with d.client() as bot:
        bot.usage_report("s", 10, 0, 1)
    assert stat.S_IMODE(os.stat(d.memdir / "usage.jsonl").st_mode) == 0o640
    d.stop()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("")
    (d.memdir / "usage.jsonl").unlink()
    (d.memdir / "usage.jsonl").symlink_to(elsewhere)
    d.start()  # the link is not read (usage starts over, with a warning) …
    with d.client() as bot:
        bot.usage_report("s", 10, 0, 1)
    assert elsewhere.read_text() == ""  # … nor written through: the file replaces the link
    assert not (d.memdir / "usage.jsonl").is_symlink()
    assert "usage.jsonl cannot be read" in d.stderr()
