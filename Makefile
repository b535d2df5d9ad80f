# The two entry points of the README. Everything else is a helper of these.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv run test lint typecheck unit bench clean

venv: $(STAMP)

# torch is pinned to the CPU build on this kind of machine (a plain "torch" pulls CUDA).
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# Main job on the embedded default (the local end-to-end run).
run: venv
	$(BIN)/imagectl lint
	$(BIN)/imagectl plan --stack local
	$(BIN)/imagectl status

lint: venv
	$(BIN)/ruff check pipeline validators tests benchmarks
	$(BIN)/ruff format --check pipeline validators tests benchmarks

typecheck: venv
	$(BIN)/mypy pipeline validators

unit: venv
	$(BIN)/pytest -q

test: lint typecheck unit

bench: venv
	$(BIN)/python benchmarks/cli_startup.py

clean:
	rm -rf $(VENV) build dist *.egg-info
