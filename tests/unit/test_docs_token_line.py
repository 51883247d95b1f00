"""docs/frontends.md's lines that make the proxy's token file work in an account that has no
~/.config yet (issue 35): they are run here as written, in a fresh HOME."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("openssl") is None or shutil.which("bash") is None, reason="needs bash and openssl")
def test_the_token_file_lines_work_without_a_config_directory(tmp_path):
    doc = (ROOT / "docs" / "frontends.md").read_text(encoding="utf-8")
    block = doc.split("## Starting it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line for line in block.splitlines() if line.strip() and not line.startswith("zcor ")]
    assert any("zcor-proxy-token" in line for line in lines)
    home = tmp_path / "home"
    home.mkdir()
    out = subprocess.run(["bash", "-e", "-c", "\n".join(lines)], env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    token = home / ".config" / "zcor-proxy-token"
    assert len(token.read_text().strip()) == 64
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
