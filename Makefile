# Two entry points for newcomers: `make demo` and `make test`. Each sets itself up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# openai 2.x is the last line on httpx; tests drive it from its own directory.
LEGACY := $(VENV)/legacy-openai
LEGACY_OPENAI := openai==2.54.0
# langchain-mcp-adapters requires mcp 1.x, the project mcp 2: tests/frameworks/test_langchain_mcp.py
# runs its agent with this directory first on PYTHONPATH.
MCP1 := $(VENV)/mcp1
MCP1_PACKAGES := mcp==1.30.0 langchain-mcp-adapters==0.3.2 httpx-sse==0.4.3
# s3rver (an S3 server that keeps objects on disk) for tests/store/test_s3rver.py: pinned by
# tests/store/s3rver/package-lock.json, installed with npm into .venv/node. Node.js and npm
# come from Debian's packages when node is missing.
S3RVER_PKG := tests/store/s3rver
NODE_DIR := $(VENV)/node

.PHONY: demo test lint types unit setup clean

setup: $(VENV)/.installed $(MCP1)/.installed $(NODE_DIR)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps --target $(LEGACY) $(LEGACY_OPENAI) distro tqdm
	touch $@

$(MCP1)/.installed: Makefile | $(VENV)/.installed
	rm -rf $(MCP1)
	$(BIN)/pip install --quiet --no-deps --target $(MCP1) $(MCP1_PACKAGES)
	touch $@

$(NODE_DIR)/.installed: $(addprefix $(S3RVER_PKG)/,package.json package-lock.json .npmrc) | $(VENV)/.installed
	@command -v node >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "node is missing: install Node.js >= 18 and npm" >&2; exit 1; }; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  echo "installing nodejs and npm (Debian packages)"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq nodejs npm >/dev/null; \
	}
	@command -v npm >/dev/null || { echo "npm is missing: install npm" >&2; exit 1; }
	rm -rf $(NODE_DIR) && mkdir -p $(NODE_DIR)
	cp $(S3RVER_PKG)/package.json $(S3RVER_PKG)/package-lock.json $(S3RVER_PKG)/.npmrc $(NODE_DIR)/
	cd $(NODE_DIR) && npm ci --omit=dev --no-audit --no-fund --loglevel=error
	touch $@

# The demo needs only Python.
demo: $(VENV)/.installed
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
