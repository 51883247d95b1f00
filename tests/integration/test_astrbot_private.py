"""Issue 34 through a real AstrBot (both versions): a QQ private (friend) message goes to zcord
as private, so what the model writes there stays in that chat's session; the group, asked
about it next, gets none of it in what AstrBot sends the model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fakellm import FakeLLM, openai_text, openai_tools
from tests.integration.test_astrbot import ASTRBOTS, drive

pytestmark = [pytest.mark.astrbot]

SECRET = "小王在看心理医生Quorvex"
WRITE = {"title": "小王的秘密Quorvex", "content": SECRET}


@pytest.fixture(scope="module", params=list(ASTRBOTS))
def run(request):
    from tests.integration.conftest import Factory

    python, missing = ASTRBOTS[request.param]
    if not Path(python).exists():
        pytest.skip(missing)
    factory = Factory()
    d = factory().start()
    with FakeLLM() as llm:
        llm.default = openai_text("嗯")
        llm.script += [openai_tools(("zcor_memory_write", WRITE)), openai_text("我会保密的"),
                       openai_text("不知道呢"), openai_text("记得")]
        sock = str(d.sock)
        transcript, log = drive(llm.url, [{"socket": sock, "message": "跟你说个秘密 Quorvex", "private": True},
                                          {"socket": sock, "message": "Quorvex 是什么？", "sender": "7"},
                                          {"socket": sock, "message": "Quorvex 还记得吗", "private": True}], python)
    yield {"daemon": d, "llm": llm, "transcript": transcript, "log": log}
    problems = factory.cleanup()
    assert not problems, "zcord logged a crash:\n" + "\n---\n".join(problems)


def test_a_private_message_is_private_and_the_group_never_sees_it(run):
    assert [s["reply"] for s in run["transcript"]] == ["我会保密的", "不知道呢", "记得"], run["log"][-3000:]
    with run["daemon"].client("operator") as op:
        (write,) = op.history_query({"tool": "zcor_memory_write"})["items"]
        assert write["origin"]["private"] is True and write["origin"]["session"] == "qq:private:42"
        mid = write["changes"][0]["target"]
        assert op.call_tool("zcor_memory_read", {"id": mid})["scope"] == {"session": "qq:private:42"}
    requests = [json.dumps(r["json"], ensure_ascii=False) for r in run["llm"].requests]
    group = [r for r in requests if "Quorvex 是什么" in r]
    assert group and all(SECRET not in r for r in group)  # the group's request: none of it
    again = [r for r in requests if "Quorvex 还记得吗" in r]
    assert again and SECRET in again[0]  # the private chat recalls it
