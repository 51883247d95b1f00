"""A logger per module (issue 39): each module of zcord logs to `getLogger(__name__)`, a
child of "zcord", so a log line says which module wrote it and configuring "zcord" (the
daemon's and the endpoint's set-up, an embedding program's) still covers them all."""

from __future__ import annotations

import importlib
import logging
import re
from pathlib import Path

import zcord

ROOT = Path(zcord.__file__).parent
NAMED = re.compile(r"getLogger\(\s*['\"]")


def _logging_modules() -> list[str]:
    """The modules whose source takes a logger."""
    return [".".join(("zcord", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__")
            for p in sorted(ROOT.rglob("*.py")) if "getLogger(__name__)" in p.read_text(encoding="utf-8")]


def test_no_module_names_its_logger_by_hand():
    named = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if NAMED.search(p.read_text(encoding="utf-8"))]
    assert named == []


def test_each_module_logs_under_its_own_name_below_zcord(caplog):
    logging_modules = []
    for name in _logging_modules():
        module = importlib.import_module(name)
        log = getattr(module, "log", None)
        if isinstance(log, logging.Logger):
            assert log.name == name
            logging_modules.append(module)
    assert len(logging_modules) >= 15  # store, oplog, server, the service's parts, the endpoint…
    with caplog.at_level(logging.ERROR, logger="zcord"):
        for module in logging_modules:
            module.log.warning("below the level set on zcord")
            module.log.error("from %s", module.__name__)
    assert [r.name for r in caplog.records] == [m.__name__ for m in logging_modules]
