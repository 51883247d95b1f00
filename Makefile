# Two entry points, each doing all the set-up it needs on a fresh machine:
#   make run    the product on a local default Memory directory
#   make test   the whole test suite (in a random order; the seed is printed first)
#   make mutate mutation testing of the core rules against the unit tests (slow; not in CI)
# and `make dist`, the wheel and sdist in dist/ (how to install them: contrib/systemd/README.md).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` installs what running needs (the package and its `tui` extra); `make test` adds
# the `dev` extra. Each stamp says what the venv holds.
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# AstrBot pins versions that clash with ours, so its plugin is tested in a venv of its own.
ASTRBOT_VENV := .venv-astrbot
ASTRBOT_STAMP := $(ASTRBOT_VENV)/.installed
ASTRBOT_VERSION := 4.14.6

.PHONY: setup run test bench dist astrbot-env mutate

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml setup.py | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e '.[tui]'
	touch $@

$(TEST_STAMP): pyproject.toml setup.py | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet -e '.[tui,dev]'
	touch $@ $(RUN_STAMP)

$(ASTRBOT_VENV)/bin/python:
	$(PYTHON) -m venv $(ASTRBOT_VENV)
	$(ASTRBOT_VENV)/bin/python -m pip install --quiet --upgrade pip

# zcor goes in editable: the plugin imports zcord.client from this checkout.
$(ASTRBOT_STAMP): Makefile pyproject.toml setup.py | $(ASTRBOT_VENV)/bin/python
	$(ASTRBOT_VENV)/bin/python -m pip install --quiet 'astrbot==$(ASTRBOT_VERSION)'
	$(ASTRBOT_VENV)/bin/python -m pip install --quiet -e .
	touch $@

setup: $(TEST_STAMP)

astrbot-env: $(ASTRBOT_STAMP)

run: $(RUN_STAMP)
	$(BIN)/zcor-tui --with-daemon

test: $(TEST_STAMP) $(ASTRBOT_STAMP)
	ZCOR_ASTRBOT_PYTHON=$(CURDIR)/$(ASTRBOT_VENV)/bin/python $(BIN)/python -m pytest -q

dist: $(TEST_STAMP)
	rm -rf dist build
	$(BIN)/python -m build --outdir dist .

# bench_history.py at 100,000 log records here; `--records 1000000` for the full-size run
bench: $(TEST_STAMP)
	$(BIN)/python bench/bench_all.py
	$(BIN)/python bench/bench_history.py --records 100000 --restarts 2 --warm 10

# Mutants of store, state, service, synonyms, oplog, protocol, recall and fsutil (see
# [tool.mutmut] in pyproject.toml) against tests/unit; results in mutants/, triage in
# docs/testing.md. CPU heavy: runs at the lowest priority.
mutate: $(TEST_STAMP)
	$(BIN)/python -m pip install --quiet -e '.[tui,dev,mutate]'
	rm -rf mutants
	nice -n 19 $(BIN)/mutmut run --max-children $${MUTATE_JOBS:-2} || true
	$(BIN)/mutmut results
	$(BIN)/python tools/mutation_score.py
