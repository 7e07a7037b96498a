# toolwire developer commands. Only python3 needs to be installed; everything else goes into $(VENV).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: serve test test-fast bench bench-model diagram clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the project metadata changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	touch $@ $(VENV)/.installed

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

serve: $(VENV)/.installed
	$(BIN)/python -m gunicorn -c gunicorn.conf.py wsgi:app

# The Redis store's tests need redis-server, the back-end conformance suite Go, nginx and Node: installed here
# (Debian's packages, as root) when missing; the suite's Go server is built once into ~/.cache/toolwire. The
# real-model tests need llama-cpp-python and two small models: built and downloaded once into
# ~/.cache/toolwire/llama (about 12 minutes on 2 cores the first time, nothing afterwards).
test: $(VENV)/.installed-dev
	PYTHONPATH=tests $(BIN)/python -m support.redis_server --install
	PYTHONPATH=tests $(BIN)/python -m support.backends --install
	PYTHONPATH=tests $(BIN)/python -m support.llama_server --install
	$(BIN)/python -m pytest

# Unit tests only: the core and the Flask side in process (no gunicorn, no fuzz corpus); well under a minute.
test-fast: $(VENV)/.installed-dev
	$(BIN)/python -m pytest tests/statemachine tests/app tests/test_support_imports.py tests/test_support_invariants.py

diagram: $(VENV)/.installed
	$(BIN)/toolwire diagram --format mermaid

clean-venv:
	rm -rf $(VENV)

# End-to-end benchmark (toolwire vs minimal relays, see bench/run.py); prints one table and writes
# docs/bench/results.json and the chart docs/bench/bench.png; ~15 minutes. SECTIONS=0,9 runs only some.
bench: $(VENV)/.installed-bench
	$(BIN)/python bench/run.py $(if $(SECTIONS),--sections $(SECTIONS))

# Small real models (SmolLM2 135M, Gemma 3 270M on llama.cpp) against the real-model prompt set: success
# rate and prompt tokens per tool per teaching variant (bench/model_bench.py); ~8 minutes once built.
bench-model: $(VENV)/.installed-dev
	PYTHONPATH=tests $(BIN)/python -m support.llama_server --install
	$(BIN)/python bench/model_bench.py
