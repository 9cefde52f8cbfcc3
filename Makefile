# The README's two set-up commands: `make demo` and `make test`. Both bootstrap .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo check test bench install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/run_demo.py

# Static types: strict on the plugin packages, default on host_spec (see [tool.mypy]).
check: $(STAMP)
	$(BIN)/python -m mypy

test: check
	$(BIN)/python -m pytest -q -p no:cacheprovider --cov --cov-report=term --cov-config=pyproject.toml tests

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist .coverage* .pytest_cache
