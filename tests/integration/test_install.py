"""The package installs as contrib/systemd/README.md says: a wheel built from the checkout,
installed into fresh venvs with and without the `tui` extra, runs `zcord`, `zcor status` and
`zcor-tui --help` against a started daemon, and finds its default synonyms.

The wheel is built once (an isolated build, as `make dist` does); dependencies come from the
package registry (the pip cache makes repeated runs quick).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from zcord import __version__
from zcord.client import Client, ClientError

ROOT = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 900

pytestmark = pytest.mark.install


def run(cmd: list[str], timeout: float = 120, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCOR_", "NOTIFY_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    # outside the checkout, so `python -c` cannot import the source tree instead of the install
    kwargs.setdefault("cwd", tempfile.gettempdir())
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                          env=env, **kwargs)


def checked(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    out = run(cmd, timeout)
    assert out.returncode == 0, f"{cmd} exited {out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the checkout so the build leaves no files in it."""
    work = tmp_path_factory.mktemp("build")
    src = work / "src"
    ignore = shutil.ignore_patterns(".venv*", ".git", "dist", "build", "*.egg-info", "__pycache__",
                                    ".pytest_cache", ".hypothesis", "tests", "bench")
    shutil.copytree(ROOT, src, ignore=ignore)
    out = checked([sys.executable, "-m", "build", "--wheel", "--outdir", work / "dist", src], PIP_TIMEOUT)
    warnings = [line for line in (out.stdout + out.stderr).splitlines()
                if "warning" in line.lower() and "byte-compiling is disabled" not in line]
    assert warnings == [], "\n".join(warnings)
    (whl,) = (work / "dist").glob("zcor-*.whl")
    return whl


def make_venv(root: Path, requirement: str) -> Path:
    checked([sys.executable, "-m", "venv", root])
    checked([root / "bin" / "python", "-m", "pip", "install", "--quiet", requirement], PIP_TIMEOUT)
    return root / "bin"


@pytest.fixture(scope="module")
def plain_venv(wheel, tmp_path_factory) -> Path:
    return make_venv(tmp_path_factory.mktemp("venv") / "plain", str(wheel))


@pytest.fixture(scope="module")
def tui_venv(wheel, tmp_path_factory) -> Path:
    return make_venv(tmp_path_factory.mktemp("venv") / "tui", f"{wheel}[tui]")


@pytest.fixture
def installed_daemon(plain_venv):
    """`zcord` from the plain venv on a fresh Memory directory, stopped with SIGTERM afterwards."""
    root = Path(tempfile.mkdtemp(prefix="zi", dir="/tmp"))
    memdir, sock = root / "mem", root / "zcord.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZCOR_", "NOTIFY_"))}
    log = open(root / "zcord.log", "wb")
    proc = subprocess.Popen([plain_venv / "zcord", "--memory-dir", memdir, "--socket", sock],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=root)
    deadline = time.monotonic() + 60
    while True:
        try:
            with Client(sock, role="operator", timeout=5, connect_timeout=1) as c:
                c.ping()
            break
        except (ClientError, OSError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError((root / "zcord.log").read_text(errors="replace")) from None
            time.sleep(0.1)
    yield memdir, sock
    proc.terminate()
    assert proc.wait(40) == 0, (root / "zcord.log").read_text(errors="replace")
    log.close()
    assert "Traceback" not in (root / "zcord.log").read_text(errors="replace")
    shutil.rmtree(root, ignore_errors=True)


def test_wheel_carries_one_synonyms_file_from_the_top_level(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        assert z.read("zcord/synonyms.json") == (ROOT / "synonyms.json").read_bytes()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    assert "zcor_tui/app.tcss" in names
    assert "License-Expression: MIT" in metadata
    assert "Provides-Extra: tui" in metadata and "extra == \"tui\"" in metadata


def test_plain_install_runs_the_daemon_and_cli_and_explains_the_tui_extra(plain_venv, installed_daemon, wheel):
    memdir, sock = installed_daemon
    assert checked([plain_venv / "zcord", "--version"]).stdout.strip() == f"zcord {__version__}"
    assert checked([plain_venv / "zcor", "--version"]).stdout.strip() == f"zcor {__version__}"

    status = json.loads(checked([plain_venv / "zcor", "--socket", sock, "status"]).stdout)
    assert status["memoryDir"] == str(memdir) and status["version"] == __version__
    # the installed package found its default synonyms (copied on first use)
    assert (memdir / "synonyms.json").read_bytes() == (ROOT / "synonyms.json").read_bytes()
    assert (memdir / "PERSONA.md").is_file()

    out = run([plain_venv / "python", "-c", "import textual"])
    assert out.returncode != 0  # the TUI extra is really absent here
    out = run([plain_venv / "zcor-tui", "--socket", sock])
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # zcor is on no package index: the hint names the wheel this venv was installed from
    assert f"{plain_venv / 'python'} -m pip install '{wheel}[tui]'" in out.stderr, out.stderr
    assert "'zcor[tui]'" not in out.stderr
    out = run([plain_venv / "zcor-tui", "--help"])
    assert out.returncode == 1 and f"{wheel}[tui]" in out.stderr and "Traceback" not in out.stderr


def test_tui_install_offers_zcor_tui(tui_venv, installed_daemon):
    memdir, sock = installed_daemon
    out = checked([tui_venv / "zcor-tui", "--help"])
    assert "--with-daemon" in out.stdout
    status = json.loads(checked([tui_venv / "zcor", "--socket", sock, "status"]).stdout)
    assert status["memoryDir"] == str(memdir)
    # the TUI's module and its stylesheet import from the installed wheel, not the checkout
    out = checked([tui_venv / "python", "-c",
                   "import zcor_tui.app, importlib.resources as r; print(zcor_tui.app.__file__); "
                   "print(r.files('zcor_tui').joinpath('app.tcss').is_file())"], )
    path, has_css = out.stdout.split()
    assert str(tui_venv.parent) in path and has_css == "True"
