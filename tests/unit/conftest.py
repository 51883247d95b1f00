"""Unit tests run in one process: each starts from jieba's own dictionary (see
tests/conftest.py JiebaWords), so no test relies on words another one taught."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _jieba_dictionary_per_test(jieba_words):
    yield
