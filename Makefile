# The two quick-start commands: `make demo` and `make test`. Everything else they need is
# installed by them (a private virtualenv in .venv; Debian packages through scripts/).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the install is redone when the project's metadata or its C source changes (the editable
# install compiles formats/_nodescan.c next to it)
NATIVE := src/fleetwarden/formats/_nodescan.c
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(NATIVE) | cksum | cut -d' ' -f1)

.PHONY: demo test lint bench clean

# pip's output (and its warnings) go to $(VENV)/install.log, shown only when the install fails:
# after the install, `make demo` prints the demo and nothing else
$(STAMP): pyproject.toml $(NATIVE)
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@echo "installing fleetwarden and its test tools into $(VENV) (log: $(VENV)/install.log)"
	@{ $(BIN)/python -m pip install --disable-pip-version-check --upgrade pip \
	   && $(BIN)/python -m pip install --disable-pip-version-check -e '.[test]'; \
	 } >$(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP)
	@$(BIN)/fleetwarden demo

test: $(STAMP)
	scripts/test

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

# quick mode (small sizes, no services); `make bench BENCH_FULL=1` runs every script at the
# sizes BENCHMARKS.md records, the ones that need API servers, NATS or PostgreSQL included
bench: $(STAMP)
	@$(BIN)/python benchmarks/run_all.py $(if $(BENCH_FULL),--full)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
