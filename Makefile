# Two entry points for a fresh machine: `make run` (the main job) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PROMPT ?= In two short sentences, why is the sky blue?

.PHONY: run test bench bench-docs clean

$(VENV)/.installed: pyproject.toml scripts/bootstrap.sh scripts/system-packages.sh scripts/install-package.sh
	bash scripts/bootstrap.sh $(VENV)
	touch $@

run: $(VENV)/.installed
	$(VENV)/bin/voice-membrane run --prompt "$(PROMPT)"

test: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest -n 3 --dist loadfile --no-loadscope-reorder --durations=15  # a file's tests share one worker, the longest files first (tests/conftest.py); the slowest named

# Prints the report and writes it to build/benchmarks.md (untracked).
bench: $(VENV)/.installed
	$(PY) -m benchmarks.run

# The same run, written to docs/benchmarks.md (the published report).
bench-docs: $(VENV)/.installed
	$(PY) -m benchmarks.run --output docs/benchmarks.md

clean:
	rm -rf $(VENV)
