# The two commands of the README: `make demo` (an offline overnight run in a minute) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: setup tools demo test lint typecheck bench clean-runs wheel-check

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

# bubblewrap (sandbox) and chromium (report tests) from Debian when root, Claude Code from npm.
tools:
	bash scripts/install-system.sh
	bash scripts/install-claude-code.sh

demo: setup
	$(BIN)/optimizer run examples/csv-report --provider sim --max-iterations 3 --run-dir runs/demo --fresh
	$(BIN)/optimizer lineage runs/demo
	@echo "files: runs/demo (history.json, v*/benchmark.json); report: $(BIN)/optimizer report runs/demo"

test: setup tools
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .

# The package and its checks live in pyproject.toml ([tool.mypy]).
typecheck: setup
	$(BIN)/mypy

# A normal (non-editable) install in a fresh venv runs the demo from another folder.
wheel-check:
	bash scripts/check-wheel.sh

bench: setup
	$(PY) bench/run_all.py
