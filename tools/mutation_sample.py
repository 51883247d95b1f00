"""The seeded random sample of mutants of docs/testing.md's sampled run (issue 16): after
`mutmut run` has generated mutants/, print the first N names of each group's shuffled list.

    .venv/bin/python tools/mutation_sample.py [N] [GROUP]
    nice -n 19 .venv/bin/mutmut run --max-children 2 $(.venv/bin/python tools/mutation_sample.py 60 recall)

Each group's names (sorted, minus the ones triaged before the sampled run) are shuffled with
random.Random(16); any prefix of that order is a random sample, so a run can stop early.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

MUTANTS = Path("mutants")

# triaged before the sampled run (docs/testing.md), by function and mutant number
STATE_TRIAGED = {("_TextChunkǁ__init__", 3), ("_contains_run", 7), ("_contains_run", 8), ("index_step", 20),
                 ("index_step", 21), ("_fill_chunk", 4), ("_sibling_remove", 7), ("Postingsǁclear", 2),
                 *[("add_node", i) for i in (8, 9, 21, 22, 24, 35, 43, 46)],
                 *[("add_rel", i) for i in (5, 6, 13, 18, 20)]}
STORE_LOADERS = {"x_parse_time", "x__old_str", "x__old_nodes", "x__old_relationships", "x_describe_validation",
                 "x__next_id_after", "xǁStoreǁlist_backups"}
OPLOG_HELPERS = {"x__record_text", "x_record_search_text", "x__indexable", "x__hex", "x_bigram_doc"}


def names(*patterns: str) -> list[str]:
    out: list[str] = []
    for pattern in patterns:
        for meta in sorted(MUTANTS.glob(pattern + ".meta")):
            out += json.loads(meta.read_text())["exit_code_by_key"]
    return sorted(out)


def func(name: str) -> str:
    return re.sub(r"__mutmut_\d+$", "", name).rsplit(".", 1)[-1]


def num(name: str) -> int:
    return int(name.rsplit("_", 1)[-1])


def groups() -> dict[str, list[str]]:
    return {
        "service": names("zcord/service/service.py", "zcord/service/warmup.py", "zcord/service/settings.py",
                         "zcord/service/views.py", "zcord/service/dispatcher.py", "zcord/service/snapshots.py",
                         "zcord/service/gate.py", "zcord/service/calls.py", "zcord/service/rooms/*.py"),
        "recall": names("zcord/retrieval/recall.py", "zcord/retrieval/ranking.py"),
        "state": [n for n in names("zcord/core/state.py", "zcord/core/indexes.py")
                  if not any(func(n).endswith(f) and num(n) == i for f, i in STATE_TRIAGED)],
        "store": [n for n in names("zcord/core/store.py", "zcord/core/layout.py", "zcord/core/parsing.py",
                                             "zcord/core/fastload.py", "zcord/core/invariants.py",
                                             "zcord/core/serializer.py") if func(n) not in STORE_LOADERS],
        "oplog": [n for n in names("zcord/core/oplog.py", "zcord/core/history_index.py")
                  if func(n) not in OPLOG_HELPERS],
    }


def main(argv: list[str]) -> int:
    k = int(argv[0]) if argv else 60
    for group, pool in groups().items():
        if len(argv) > 1 and group != argv[1]:
            continue
        order = list(pool)
        random.Random(16).shuffle(order)
        print("\n".join(order[:k]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
