# Entry points: `make demo`, `make test`, `make test-fast`, `make docs`. Each sets itself up.
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
# A real Phoenix server for tests/replay/test_sources_phoenix.py, in a venv of its own: its
# pins clash with the project's. The stamp names the version, so a new pin reinstalls it.
PHOENIX := $(VENV)/phoenix
PHOENIX_VERSION := 20.26.1
# s3rver (an S3 server that keeps objects on disk) for tests/store/test_s3rver.py: pinned by
# tests/store/s3rver/package-lock.json, installed with npm into .venv/node. Node.js and npm
# come from Debian's packages when node is missing (after chromium: one apt-get at a time).
S3RVER_PKG := tests/store/s3rver
NODE_DIR := $(VENV)/node
# Debian's chromium, which tests/report drive through Playwright (Playwright's own browser
# download is not used): installed from Debian's packages when missing.
CHROMIUM := /usr/bin/chromium

# Some images set PYTHONDONTWRITEBYTECODE: then every process the tests and the demo start
# compiles the package's sources again, about a second of CPU each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test test-fast lint types unit unit-fast docs setup clean

SETUP_PARTS := $(VENV)/.installed $(MCP1)/.installed $(NODE_DIR)/.installed $(CHROMIUM) \
	$(PHOENIX)/.installed-$(PHOENIX_VERSION)

# The parts install side by side (downloads and unpacking overlap): a fresh machine's set-up
# takes the longest part's time, not the sum.
setup:
	@$(MAKE) --no-print-directory -j4 $(SETUP_PARTS)

# A venv with a current pip and nothing else (no setuptools), put in by the system's pip:
# faster than ensurepip's old pip followed by an upgrade, and current pip resolves much faster.
$(BIN)/pip:
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install --quiet --no-compile pip

# The demo installs only what it runs (the `demo` extra), not the frameworks the tests drive;
# it imports a small part of what it installs, so compiling it all up front is time lost.
$(VENV)/.demo-installed: pyproject.toml | $(BIN)/pip
	$(BIN)/pip install --quiet --no-compile -e ".[demo]"
	touch $@

$(VENV)/.installed: pyproject.toml | $(BIN)/pip
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps --target $(LEGACY) $(LEGACY_OPENAI) distro tqdm
	touch $@

$(MCP1)/.installed: Makefile | $(VENV)/.installed
	rm -rf $(MCP1)
	$(BIN)/pip install --quiet --no-deps --target $(MCP1) $(MCP1_PACKAGES)
	touch $@

$(PHOENIX)/.installed-$(PHOENIX_VERSION): | $(BIN)/pip
	rm -rf $(PHOENIX)
	$(PYTHON) -m venv --without-pip $(PHOENIX)
	$(BIN)/pip --python $(PHOENIX)/bin/python install --quiet arize-phoenix==$(PHOENIX_VERSION)
	touch $@

$(NODE_DIR)/.installed: $(addprefix $(S3RVER_PKG)/,package.json package-lock.json .npmrc) | $(VENV)/.installed $(CHROMIUM)
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

$(CHROMIUM):
	@command -v apt-get >/dev/null || { echo "chromium is missing: install Chromium at $@" >&2; exit 1; }
	@sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	echo "installing chromium (Debian package)"; \
	$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null

# The demo needs only Python.
demo: $(VENV)/.demo-installed
	$(BIN)/python examples/demo.py

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: setup
	$(BIN)/mypy

# Three workers per two cores (pytest-xdist): a test waits on the processes and servers it
# starts about a sixth of its time, so one worker per core leaves cores idle (2 cores: 13.4
# min with 2 workers, 11.9 with 3). A module's tests stay on one worker, so its fixtures (a
# recorded agent, an S3 server) are made once.
WORKERS := $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n * 3 / 2 > 1 ? n * 3 / 2 : 1 )))
PYTEST := $(BIN)/python -m pytest -n $(WORKERS) --dist loadfile

unit: setup
	$(PYTEST)

# The tests marked slow or subprocess (tests/conftest.py says which and why) are left out;
# a test that starts a process without the mark fails.
unit-fast: setup
	$(PYTEST) -m "not slow and not subprocess"

test: lint types unit

test-fast: lint types unit-fast

# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2.0 says nothing about these pages.
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) site .mypy_cache .ruff_cache .pytest_cache
