# The two quick-start commands: `make demo` and `make test`. Everything else they need is
# installed by them (a private virtualenv in .venv; Debian packages through scripts/).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo test lint bench clean

# pip's output (and its warnings) go to $(VENV)/install.log, shown only when the install fails:
# after the install, `make demo` prints the demo and nothing else
$(STAMP): pyproject.toml
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
