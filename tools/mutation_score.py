"""Per-module mutation score from the last `make mutate` run (mutmut's mutants/*.meta).

Prints one row per mutated module: mutants, killed (timeouts count as killed: the tests
noticed), survived, not covered by any unit test ("no tests"), not yet checked, and the
score killed / (killed + survived + no tests). Mutants triaged as equivalent in
docs/testing.md are listed there; subtract them by hand for the score over non-equivalent
mutants.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

KILLED = {1, 3, 36, 24, -24, 152, 255, 37}
SURVIVED = {0}
NO_TESTS = {5, 33}


def main(root: Path = Path("mutants")) -> int:
    metas = sorted(root.rglob("*.py.meta"))
    if not metas:
        print("no mutants/ results: run `make mutate` first", file=sys.stderr)
        return 1
    print(f"{'module':<22}{'mutants':>8}{'killed':>8}{'survived':>9}{'no tests':>9}{'unchecked':>10}{'score':>8}")
    total: Counter[str] = Counter()
    for meta in metas:
        codes = _exit_codes(meta)
        c: Counter[str] = Counter()
        for code in codes:
            c["mutants"] += 1
            if code is None:
                c["unchecked"] += 1
            elif code in KILLED:
                c["killed"] += 1
            elif code in SURVIVED:
                c["survived"] += 1
            elif code in NO_TESTS:
                c["no tests"] += 1
            else:
                c["other"] += 1
        total.update(c)
        print(_row(str(meta.relative_to(root)).removesuffix(".meta"), c))
    print(_row("all", total))
    return 0


def _exit_codes(meta: Path) -> list:
    """A .meta file's exit codes (read again if mutmut was half-way through rewriting it)."""
    for _attempt in range(20):
        try:
            return list(json.loads(meta.read_text())["exit_code_by_key"].values())
        except json.JSONDecodeError:
            time.sleep(0.1)
    raise SystemExit(f"{meta} is not readable JSON")


def _row(name: str, c: Counter) -> str:
    judged = c["killed"] + c["survived"] + c["no tests"]
    score = f"{100 * c['killed'] / judged:.1f}%" if judged else "-"
    return (f"{name:<22}{c['mutants']:>8}{c['killed']:>8}{c['survived']:>9}{c['no tests']:>9}"
            f"{c['unchecked']:>10}{score:>8}")


if __name__ == "__main__":
    sys.exit(main())
