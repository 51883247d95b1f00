"""`zcor trust` (issue 35): list, set and reset per-sender trust levels from the command line,
and `zcor call` reaching an operator method by its name."""

from __future__ import annotations

import json
import subprocess

from .conftest import ZCOR_CMD


def _ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_trust_list_set_reset_human_and_json(daemon):
    out = _ok(daemon.zcor("trust"))
    assert "Default level: normal" in out and "No sender has a level of its own" in out

    out = _ok(daemon.zcor("trust", "set", "qq:42", "untrusted"))
    assert out.strip() == "qq:42 is untrusted (was normal, the default)."
    _ok(daemon.zcor("trust", "set", "qq:13", "blocked"))
    out = _ok(daemon.zcor("trust", "set", "qq:13", "blocked"))
    assert "nothing changed" in out
    out = _ok(daemon.zcor("trust", "list"))
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows == [["sender", "level"], ["qq:13", "blocked"], ["qq:42", "untrusted"]]
    assert json.loads(_ok(daemon.zcor("trust", "--json"))) == json.loads(_ok(daemon.zcor("trust", "list", "--json")))
    assert json.loads(_ok(daemon.zcor("trust", "list", "--json"))) == {
        "default": "normal", "senders": [{"sender": "qq:13", "level": "blocked"},
                                         {"sender": "qq:42", "level": "untrusted"}]}
    with daemon.client("operator") as op:  # the daemon holds what the CLI set
        assert op.trust_get()["senders"][1] == {"sender": "qq:42", "level": "untrusted"}

    out = _ok(daemon.zcor("trust", "reset", "qq:42"))
    assert out.strip() == "qq:42 has the default level, normal (was untrusted)."
    answer = json.loads(_ok(daemon.zcor("trust", "set", "qq:13", "trusted", "--json")))
    assert answer == {"sender": "qq:13", "level": "trusted", "explicit": True}
    assert json.loads(_ok(daemon.zcor("trust", "--json")))["senders"] == [{"sender": "qq:13", "level": "trusted"}]


def test_trust_bad_input_changes_nothing(daemon):
    out = daemon.zcor("trust", "set", "qq:42", "evil")
    assert out.returncode == 2 and "LEVEL" in out.stderr and "untrusted" in out.stderr
    out = daemon.zcor("trust", "set", " ", "blocked")
    assert out.returncode == 1 and "sender" in out.stderr and out.stdout == ""
    out = daemon.zcor("trust", "set", "x" * 500, "blocked")
    assert out.returncode == 1 and "sender" in out.stderr
    assert not (daemon.memdir / "trust.json").exists()
    assert json.loads(_ok(daemon.zcor("trust", "--json")))["senders"] == []


def test_call_reaches_operator_methods_by_name(daemon):
    answer = json.loads(_ok(daemon.zcor("call", "zcor/trust/set", '{"sender": "qq:7", "level": "untrusted"}')))
    assert answer["level"] == "untrusted"
    assert json.loads(_ok(daemon.zcor("call", "zcor/trust/get")))["senders"] == [{"sender": "qq:7",
                                                                                  "level": "untrusted"}]
    out = daemon.zcor("call", "zcor/no/such")
    assert out.returncode == 1 and "zcor/no/such" in out.stderr


def test_trust_unreachable_daemon(tmp_path):
    out = subprocess.run([*ZCOR_CMD, "--socket", str(tmp_path / "none.sock"), "trust"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 3 and out.stdout == ""
