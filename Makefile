# Two entry points, each doing all the set-up it needs on a fresh machine:
#   make run    the product on a local default Memory directory
#   make test   the whole test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup run test bench

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
