"""Re-check chosen mutants against chosen tests, quickly: after `make mutate` (or any
`mutmut run`) has generated mutants/, switch each named mutant on in turn and run the given
pytest arguments against it in a forked child (pytest and zcord imported once).

    .venv/bin/python tools/mutation_check.py tests/unit/test_fsutil.py -- 'zcord.core.fsutil.x_atomic_write__mutmut_1' ...

It copies the worktree's tests/ into mutants/ first (so tests written since the run are
used) and prints one line per mutant: `killed(exit code)` with the first failing test, or
`SURVIVED`. A child that runs past 120 CPU seconds or 3 GiB (a mutant that loops) is killed
and counts as killed (-24: the tests did not finish). Run it at low priority: `nice -n 19`.
"""

from __future__ import annotations

import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    i = argv.index("--")
    tests, mutants = argv[:i], argv[i + 1:]
    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "tests", root / "mutants" / "tests", dirs_exist_ok=True)
    os.chdir(root / "mutants")
    sys.path.insert(0, os.getcwd())
    import pytest

    import zcord.service  # noqa: F401  (imported once, before the forks)

    os.environ["MUTANT_UNDER_TEST"] = ""
    out = Path(tempfile.mkstemp(prefix="mutation-check-", suffix=".txt")[1])
    for name in mutants:
        pid = os.fork()
        if pid == 0:
            resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
            resource.setrlimit(resource.RLIMIT_CPU, (120, 121))
            os.environ["MUTANT_UNDER_TEST"] = name
            fd = os.open(out, os.O_WRONLY | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os._exit(int(pytest.main(["-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests])))
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        first = next((line.split(" - ")[0].strip() for line in out.read_text(errors="replace").splitlines()
                      if line.startswith(("FAILED", "ERROR"))), "")
        print("SURVIVED" if code == 0 else f"killed({code})", name, first, flush=True)
    out.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
