# Two entry points, each doing all the set-up it needs on a fresh machine:
#   make run    the product on a local default Memory directory
#   make test   the whole test suite (in a random order, on two workers; the seed is printed first)
#   make lint   ruff and mypy (.ci/run runs it before make test)
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
# ...and against AstrBot's newest release (`pip index versions astrbot`), which needs Python
# 3.12+: a third venv on the first 3.12+ interpreter found (python3.13, python3.12, pyenv's).
# None found: its test is skipped, saying why. Override: make test ASTRBOT_LATEST_PYTHON=/path.
ASTRBOT_LATEST_VENV := .venv-astrbot-latest
ASTRBOT_LATEST_STAMP := $(ASTRBOT_LATEST_VENV)/.installed
ASTRBOT_LATEST_VERSION := 4.29.3
ASTRBOT_LATEST_PYTHON ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.13.*/bin/python \
	$$HOME/.pyenv/versions/3.12.*/bin/python; do command -v "$$p" >/dev/null 2>&1 && \
	"$$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { command -v "$$p"; break; }; done)

# pytest-xdist workers for `make test` (docs/testing.md); TEST_WORKERS=0 runs in this process
TEST_WORKERS ?= 2

.PHONY: setup run test lint bench dist astrbot-env astrbot-latest-env mutate

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

# Remade when the Makefile (the version) or the package changes; the stamp names what it holds.
$(ASTRBOT_LATEST_STAMP): Makefile pyproject.toml setup.py
	@if [ -z "$(ASTRBOT_LATEST_PYTHON)" ]; then \
		echo "make: no Python 3.12+ here (python3.13, python3.12, ~/.pyenv/versions/3.1[23].*): the AstrBot plugin test against AstrBot $(ASTRBOT_LATEST_VERSION) will be skipped" >&2; \
	else \
		rm -rf $(ASTRBOT_LATEST_VENV) && \
		$(ASTRBOT_LATEST_PYTHON) -m venv $(ASTRBOT_LATEST_VENV) && \
		$(ASTRBOT_LATEST_VENV)/bin/python -m pip install --quiet --upgrade pip && \
		$(ASTRBOT_LATEST_VENV)/bin/python -m pip install --quiet 'astrbot==$(ASTRBOT_LATEST_VERSION)' && \
		$(ASTRBOT_LATEST_VENV)/bin/python -m pip install --quiet -e . && \
		echo "$(ASTRBOT_LATEST_PYTHON) astrbot==$(ASTRBOT_LATEST_VERSION)" > $@; \
	fi

setup: $(TEST_STAMP)

astrbot-env: $(ASTRBOT_STAMP)

astrbot-latest-env: $(ASTRBOT_LATEST_STAMP)

run: $(RUN_STAMP)
	$(BIN)/zcor-tui --with-daemon

test: $(TEST_STAMP) $(ASTRBOT_STAMP) $(ASTRBOT_LATEST_STAMP)
	ZCOR_ASTRBOT_PYTHON=$(CURDIR)/$(ASTRBOT_VENV)/bin/python \
	ZCOR_ASTRBOT_LATEST_PYTHON=$(CURDIR)/$(ASTRBOT_LATEST_VENV)/bin/python $(BIN)/python -m pytest -q \
		-n $(TEST_WORKERS) --dist loadgroup

# Static checks ([tool.ruff] and [tool.mypy] in pyproject.toml); .ci/run runs them before the tests
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

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
