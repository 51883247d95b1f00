# Two entry points, each doing all the set-up it needs on a fresh machine:
#   make run    the product on a local default Memory directory
#   make test   the whole test suite (in a random order; the seed is printed first)
#   make mutate mutation testing of the core rules against the unit tests (slow; not in CI)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test bench mutate

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[tui,dev]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/zcor-tui --with-daemon

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/bench_all.py

# Mutants of store, state, service, synonyms, oplog, protocol, recall and fsutil (see
# [tool.mutmut] in pyproject.toml) against tests/unit; results in mutants/, triage in
# docs/testing.md. CPU heavy: runs at the lowest priority.
mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[tui,dev,mutate]'
	rm -rf mutants
	nice -n 19 $(BIN)/mutmut run --max-children $${MUTATE_JOBS:-2} || true
	$(BIN)/mutmut results
	$(BIN)/python tools/mutation_score.py
