"""The deployment's trust settings in config.py: where the API key may go, and the settings
the socket may not change."""

from __future__ import annotations

import pytest

from zcord.core.config import api_key_for, key_urls, key_withheld_reason
from zcord.core.errors import InvalidArgument


def test_the_key_goes_only_to_confirmed_urls(monkeypatch, tmp_path):
    for var in ("ZCOR_LLM_BASE_URL", "CREDENTIALS_DIRECTORY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZCOR_LLM_API_KEY", "sk-unit")
    assert key_urls() == []
    assert api_key_for("https://api.example.com/v1") is None
    assert "not confirmed by the deployment" in key_withheld_reason("https://api.example.com/v1")

    monkeypatch.setenv("ZCOR_LLM_BASE_URL", "https://api.example.com/v1/")
    assert api_key_for("https://api.example.com/v1") == "sk-unit"  # a trailing slash is the same URL
    assert api_key_for("https://api.example.com/v1.evil.net") is None
    assert api_key_for("http://api.example.com/v1") is None

    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "llm-base-url").write_text("# comment\nhttp://127.0.0.1:11434/v1\n\n \n")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    assert key_urls() == ["https://api.example.com/v1", "http://127.0.0.1:11434/v1"]
    assert api_key_for("http://127.0.0.1:11434/v1") == "sk-unit"
    assert key_withheld_reason("http://127.0.0.1:11434/v1") is None


def test_operator_group_is_not_changed_over_the_socket(svc, monkeypatch):
    monkeypatch.delenv("ZCOR_LLM_API_KEY", raising=False)
    with pytest.raises(InvalidArgument) as refused:
        svc.update_config({"operatorGroup": "users"})
    assert refused.value.field == "operatorGroup" and "deployment" in refused.value.message
    assert svc.config.operator_group == "zcor-operators"
    # the same value is no change, so a full config written back is accepted
    out = svc.update_config({"operatorGroup": "zcor-operators", "maxConnections": 10})
    assert out["maxConnections"] == 10 and out["llm"]["apiKeyWithheld"] is False
    with pytest.raises(InvalidArgument):
        svc.update_config({"maxConnections": 0})
    monkeypatch.setenv("ZCOR_OPERATOR_GROUP", "ops")
    svc.reload()
    assert svc.config.operator_group == "ops"


@pytest.mark.parametrize("name", ["config.json", "synonyms.json"])
def test_symlinked_config_or_synonyms_refused_and_target_untouched(memdir, clock, tmp_path, name):
    """A link planted in the Memory directory is never read through (it could point at
    another persona's files); zcord names the file and leaves both as they are."""
    from zcord.core.errors import StateFileInvalid
    from zcord.service import Service

    memdir.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text('{"version": 1, "groups": [["a", "b"]]}' if name == "synonyms.json" else "{}")
    (memdir / name).symlink_to(target)
    with pytest.raises(StateFileInvalid) as refused:
        Service(memdir, clock=clock).open()
    assert name in refused.value.message and "symbolic link" in refused.value.message
    assert (memdir / name).is_symlink() and target.read_text().startswith("{")


def test_synonyms_replaced_by_a_link_while_running_keep_the_last_good_groups(svc, tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text('{"version": 1, "groups": [["x1", "x2"]]}')
    before = svc.synonym_groups()
    path = svc.dir / "synonyms.json"
    path.unlink()
    path.symlink_to(target)
    assert svc.recall_explain("x1")["expanded"] == ["x1"]  # not read through the link
    assert svc.synonym_groups() == before
