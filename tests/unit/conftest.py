"""Unit tests run in one process: each starts from jieba's own dictionary (see
tests/conftest.py JiebaWords), so no test relies on words another one taught; and each runs
without real fsyncs (tests/conftest.py fast_fsync: durability is the fault and durability
suites' subject, not the rules')."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _jieba_dictionary_per_test(jieba_words):
    yield


@pytest.fixture(autouse=True)
def _fast_fsync(fast_fsync):
    yield
