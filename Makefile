# Two entry points for newcomers: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# openai 2.x is the last line on httpx; tests drive it from its own directory.
LEGACY := $(VENV)/legacy-openai
LEGACY_OPENAI := openai==2.54.0

.PHONY: demo test lint types unit setup clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps --target $(LEGACY) $(LEGACY_OPENAI) distro tqdm
	touch $@

demo: setup
	$(BIN)/python examples/demo.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/python -m pytest

test: lint types unit

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
