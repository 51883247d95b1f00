"""The units in contrib/systemd/ pass `systemd-analyze verify` and keep their hardening."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

UNITS = Path(__file__).resolve().parents[2] / "contrib" / "systemd"
INSTALLED = "/opt/zcor/bin/zcord"


def zcord_binary() -> str:
    """The zcord the units should run here: the one next to this Python, else a stand-in."""
    near = Path(sys.executable).parent / "zcord"
    return str(near) if near.exists() else shutil.which("zcord") or "/bin/true"


@pytest.fixture
def unit_dir(tmp_path):
    """The units with ExecStart pointing at an existing binary (verify checks it exists)."""
    for unit in ("zcord.service", "zcord@.service"):
        text = (UNITS / unit).read_text()
        assert INSTALLED in text
        (tmp_path / unit).write_text(text.replace(INSTALLED, zcord_binary()))
    return tmp_path


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian/Ubuntu package: systemd)")
def test_units_pass_systemd_analyze_verify(unit_dir):
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", "./zcord.service", "./zcord@alice.service"],
                         cwd=unit_dir, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    problems = [line for line in out.stderr.splitlines()
                if "zcord" in line and ("ignoring" in line.lower() or "invalid" in line.lower()
                                        or "unknown" in line.lower())]
    assert problems == []


@pytest.mark.skipif(shutil.which("systemd-sysusers") is None,
                    reason="systemd-sysusers is not installed (Debian/Ubuntu package: systemd)")
def test_sysusers_creates_user_and_group(tmp_path):
    (tmp_path / "etc").mkdir()
    out = subprocess.run(["systemd-sysusers", f"--root={tmp_path}", str(UNITS / "zcor.sysusers.conf")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert any(line.startswith("zcor:") for line in (tmp_path / "etc" / "passwd").read_text().splitlines())
    assert any(line.startswith("zcor:") for line in (tmp_path / "etc" / "group").read_text().splitlines())
    assert any(line.startswith("zcor-operators:") for line in (tmp_path / "etc" / "group").read_text().splitlines())


@pytest.mark.parametrize("unit", ["zcord.service", "zcord@.service"])
def test_units_are_hardened_notify_services(unit):
    lines = {line.strip() for line in (UNITS / unit).read_text().splitlines()}
    instance = "%i" if "@" in unit else "default"
    for required in ["LimitNOFILE=8192", "Environment=ZCOR_OPERATOR_GROUP=zcor-operators",
                     "LoadCredential=llm-base-url:/etc/zcor/llm-base-url", "Type=notify", "Restart=on-failure", "NoNewPrivileges=yes", "ProtectSystem=strict",
                     "PrivateTmp=yes", "ProtectHome=yes", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
                     "SystemCallFilter=@system-service", "UMask=0007", "User=zcor", "Group=zcor",
                     "LoadCredential=llm-api-key:/etc/zcor/llm-api-key", "RuntimeDirectoryMode=0750",
                     "ExecReload=/bin/kill -HUP $MAINPID", f"StateDirectory=zcor/{instance}",
                     f"RuntimeDirectory=zcor/{instance}"]:
        assert required in lines, required
    assert any(line.startswith("WatchdogSec=") for line in lines)
    assert any("${RUNTIME_DIRECTORY}/zcord.sock" in line for line in lines if line.startswith("ExecStart="))


def test_readme_installs_into_the_venv_the_units_run():
    readme = (UNITS / "README.md").read_text()
    assert "python3 -m venv /opt/zcor" in readme
    assert "/opt/zcor/bin/pip install './dist/zcor-" in readme and "pip install zcor" not in readme
    for unit in ("zcord.service", "zcord@.service"):
        exec_start = [line for line in (UNITS / unit).read_text().splitlines() if line.startswith("ExecStart=")]
        assert exec_start and exec_start[0].startswith(f"ExecStart={INSTALLED} "), unit
    # the wheel name in the README is the one `make dist` builds
    from zcord import __version__
    assert f"zcor-{__version__}-py3-none-any.whl" in readme


# -- zcor-openai.service (zcor serve-openai) ------------------------------------------------------

PROXY_UNIT = "zcor-openai.service"
PROXY_INSTALLED = "/opt/zcor/bin/zcor"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian/Ubuntu package: systemd)")
def test_proxy_unit_passes_systemd_analyze_verify(tmp_path):
    text = (UNITS / PROXY_UNIT).read_text()
    assert f"ExecStart={PROXY_INSTALLED} serve-openai " in text
    near = Path(sys.executable).parent / "zcor"
    (tmp_path / PROXY_UNIT).write_text(text.replace(PROXY_INSTALLED, str(near) if near.exists() else "/bin/true"))
    out = subprocess.run(["systemd-analyze", "verify", "--man=no", f"./{PROXY_UNIT}"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    problems = [line for line in out.stderr.splitlines()
                if PROXY_UNIT in line and ("ignoring" in line.lower() or "invalid" in line.lower()
                                           or "unknown" in line.lower())]
    assert out.returncode == 0, out.stderr
    assert problems == []


def test_proxy_unit_is_hardened_off_by_default_and_reads_its_token_from_a_credential():
    text = (UNITS / PROXY_UNIT).read_text()
    lines = {line.strip() for line in text.splitlines()}
    for required in ["Type=notify", "Restart=on-failure", "DynamicUser=yes", "SupplementaryGroups=zcor",
                     "LoadCredential=proxy-token:/etc/zcor/proxy-token",
                     "LoadCredential=llm-api-key:/etc/zcor/llm-api-key",
                     "LoadCredential=llm-base-url:/etc/zcor/llm-base-url", "NoNewPrivileges=yes",
                     "ProtectSystem=strict", "PrivateTmp=yes", "ProtectHome=yes", "CapabilityBoundingSet=",
                     "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6", "SystemCallFilter=@system-service",
                     "MemoryDenyWriteExecute=yes", "After=zcord.service network.target"]:
        assert required in lines, required
    exec_start = [line for line in lines if line.startswith("ExecStart=")]
    assert exec_start == [f"ExecStart={PROXY_INSTALLED} serve-openai --socket /run/zcor/default/zcord.sock "
                          f"--host 127.0.0.1 --port 8765"]
    # the token is never on the command line nor in the environment of the unit
    assert "ZCOR_PROXY_TOKEN" not in text and "--no-token" not in text
    # no fallback credential for the token: without /etc/zcor/proxy-token the unit does not start
    assert not any(line.startswith("SetCredential=proxy-token") for line in lines)
