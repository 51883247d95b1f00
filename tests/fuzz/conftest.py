"""Bad-input suite: hypothesis over tool arguments (in-process) and protocol lines (one real
daemon). Every module here is marked `fuzz`, so `pytest -m fuzz` runs the suite alone."""

from tests.fault.conftest import fresh_jieba_afterwards  # noqa: F401  (autouse fixture)
