"""zcor_memory_search (SPEC §3.2): synonym-expanded title candidates, filtered by the
configured provider over its real wire format; every provider failure is a tool error."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.fakellm import FakeLLM, anthropic_text, openai_text
from zcord.core.errors import InvalidArgument, ProviderError


@pytest.fixture(params=["openai", "anthropic"])
def llm(request, svc, monkeypatch):
    """A fake provider of each wire format, configured as the Memory's provider."""
    monkeypatch.setenv("ZCOR_LLM_API_KEY", "sk-test")
    with FakeLLM() as server:
        monkeypatch.setenv("ZCOR_LLM_BASE_URL", server.url)  # the deployment confirms where the key may go
        svc.update_config({"llm": {"protocol": request.param, "baseUrl": server.url, "model": "fake-model",
                                   "timeoutSeconds": 2}})
        server.protocol = request.param
        yield server


def reply(llm, text):
    return openai_text(text) if llm.protocol == "openai" else anthropic_text(text)


def seed(t):
    a = t.write(title="小明喜欢喝奶茶", content="每周五都去买", keywords=["饮料"])["id"]
    b = t.write(title="小明的猫咪团子", content="橘猫")["id"]
    c = t.write(title="周末去爬山", content="和小红")["id"]
    return a, b, c


def test_search_returns_the_ids_the_model_picks_in_its_order(t, svc, llm):
    a, b, c = seed(t)
    llm.script.append(reply(llm, json.dumps([b, a])))
    res = t.search(keywords=["小明"])
    assert [i["id"] for i in res["items"]] == [b, a]
    assert res["items"][0]["content"] == "橘猫"
    assert res["candidateCount"] == 2
    req = llm.requests[0]
    if llm.protocol == "openai":
        assert req["path"] == "/v1/chat/completions"
        assert req["headers"]["Authorization"] == "Bearer sk-test"
        user = req["json"]["messages"][-1]["content"]
    else:
        assert req["path"] == "/v1/messages"
        assert req["headers"]["x-api-key"] == "sk-test"
        assert req["headers"]["anthropic-version"]
        user = req["json"]["messages"][-1]["content"]
    assert req["json"]["model"] == "fake-model"
    sent = json.loads(user)
    assert sent["keywords"] == ["小明"]
    assert {c["id"] for c in sent["candidates"]} == {a, b}
    assert all({"id", "title", "content"} <= set(c) for c in sent["candidates"])
    assert len(req["json"]["messages"]) == (1 if llm.protocol == "anthropic" else 2), "one-off, no history"


def test_synonyms_expand_the_keywords_and_only_titles_count(t, llm):
    a, b, c = seed(t)
    t.write(title="无关", content="猫咪 在正文里")  # body only: not a candidate
    llm.script.append(reply(llm, json.dumps([b])))
    res = t.search(keywords=["cat"])  # cat ~ 猫咪 in the default synonyms
    assert [i["id"] for i in res["items"]] == [b]
    sent = json.loads(llm.requests[0]["json"]["messages"][-1]["content"])
    assert [c["id"] for c in sent["candidates"]] == [b]


def test_candidates_ranked_by_score_then_updated_then_id_and_capped_at_20(t, svc, clock, llm):
    clock.step = timedelta(0)
    ids = [t.write(title=f"奶茶 {i}", content="x")["id"] for i in range(25)]
    best = t.write(title="小明 奶茶", content="x")["id"]
    llm.script.append(reply(llm, "[]"))
    res = t.search(keywords=["奶茶", "小明"])
    assert res == {"items": [], "candidateCount": 20}
    sent = [c["id"] for c in json.loads(llm.requests[0]["json"]["messages"][-1]["content"])["candidates"]]
    assert sent[0] == best
    assert sent[1:] == ids[:19], "same score and time: id ascending, natural order"


def test_no_candidate_means_no_request(t, llm):
    seed(t)
    assert t.search(keywords=["火星"]) == {"items": [], "candidateCount": 0}
    assert llm.requests == []


def test_superseded_nodes_are_not_candidates(t, llm):
    a, b, c = seed(t)
    t.supersede(ids=[a], replacementId=c, reason="old")
    assert t.search(keywords=["奶茶"]) == {"items": [], "candidateCount": 0}


@pytest.mark.parametrize("bad,needle", [
    ("not json at all", "not a JSON array"),
    ('{"ids": ["m1"]}', "not a JSON array"),
    ('["m1", "m1"]', "twice"),
    ('["m99"]', "not candidates"),
    ('["m1","m2","m3","m4","m5","m6"]', "at most 5"),
])
def test_malformed_answers_are_errors(t, llm, bad, needle):
    seed(t)
    for i in range(4):
        t.write(title=f"小明 {i}", content="x")
    llm.script.append(reply(llm, bad))
    with pytest.raises(ProviderError, match=needle):
        t.search(keywords=["小明"])


@pytest.mark.parametrize("pick", ["outsider", "candidate+outsider", "superseded"])
def test_existing_id_that_was_no_candidate_is_an_error(t, llm, pick):
    """The answer may only name candidates: an id of a memory that exists but was not sent
    (its title does not match, or it is superseded) is refused like an unknown one."""
    a, b, c = seed(t)  # c (周末去爬山) exists but its title has no 小明
    old = t.write(title="小明的旧地址", content="城西")["id"]
    t.supersede(ids=[old], replacementId=a, reason="搬家")
    answer = {"outsider": [c], "candidate+outsider": [a, c], "superseded": [old]}[pick]
    llm.script.append(reply(llm, json.dumps(answer)))
    with pytest.raises(ProviderError, match="not candidates") as ei:
        t.search(keywords=["小明"])
    assert answer[-1] in ei.value.message
    sent = json.loads(llm.requests[0]["json"]["messages"][-1]["content"])
    assert {x["id"] for x in sent["candidates"]} == {a, b}
    rec = t.history(keywords=["zcor_memory_search"])["items"][0]
    assert rec["status"] == "error" and "not candidates" in rec["error"]["message"]


def test_http_500_is_an_error_and_recorded(t, llm):
    seed(t)
    llm.script.append(("status", 500, {"error": {"message": "boom"}}))
    with pytest.raises(ProviderError, match="HTTP 500"):
        t.search(keywords=["小明"])
    rec = t.history(keywords=["zcor_memory_search"])["items"][0]
    assert rec["status"] == "error" and "HTTP 500" in rec["error"]["message"]


def test_non_json_body_is_an_error(t, llm):
    seed(t)
    llm.script.append(("raw", "<html>gateway</html>"))
    with pytest.raises(ProviderError, match="not JSON"):
        t.search(keywords=["小明"])


def test_empty_choice_is_an_error(t, llm):
    seed(t)
    empty = {"choices": []} if llm.protocol == "openai" else {"type": "error", "error": {"type": "x"}}
    llm.script.append(empty)
    with pytest.raises(ProviderError):
        t.search(keywords=["小明"])


def test_timeout_is_an_error(t, svc, llm):
    seed(t)
    svc.update_config({"llm": {"timeoutSeconds": 0.3}})
    llm.script.append(("sleep", 1, reply(llm, "[]")))
    with pytest.raises(ProviderError, match="did not answer"):
        t.search(keywords=["小明"])


def test_unconfigured_provider_says_what_to_set(t, svc, monkeypatch):
    seed(t)
    monkeypatch.delenv("ZCOR_LLM_MODEL", raising=False)
    with pytest.raises(ProviderError, match="ZCOR_LLM_MODEL"):
        t.search(keywords=["小明"])


def test_bad_arguments_name_the_field(t):
    with pytest.raises(InvalidArgument) as e:
        t.search(keywords=[])
    assert e.value.field == "keywords"
    with pytest.raises(InvalidArgument) as e:
        t.search(keywords="小明")
    assert e.value.field == "keywords"


def test_reads_do_not_wait_behind_the_llm_call(t, svc, llm):
    import threading

    a, b, c = seed(t)
    release = threading.Event()
    llm.script.append(("sleep", 1.5, reply(llm, json.dumps([a]))))
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("res", t.search(keywords=["小明"])))
    th.start()
    while not llm.requests:  # the provider has the request: the search is in its LLM phase
        release.wait(0.01)
    assert t.read(id=b)["id"] == b
    t.write(title="written during the search", content="x")
    assert th.is_alive(), "read and write finished while the search still waited on the provider"
    th.join()
    assert [i["id"] for i in out["res"]["items"]] == [a]
