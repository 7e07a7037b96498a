# toolwire developer commands. Only python3 needs to be installed; everything else goes into $(VENV).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
comma := ,

.PHONY: serve test test-fast bench bench-model bench-bfcl diagram clean-venv

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
# real-model tests need llama-cpp-python, llama.cpp's llama-server and three small models: built and downloaded
# once into ~/.cache/toolwire/llama (about 12 + 15 minutes on 2 cores the first time, nothing afterwards).
test: $(VENV)/.installed-dev
	PYTHONPATH=tests $(BIN)/python -m support.redis_server --install
	PYTHONPATH=tests $(BIN)/python -m support.backends --install
	PYTHONPATH=tests $(BIN)/python -m support.llama_server --install
	PYTHONPATH=tests $(BIN)/python -m support.llama_cpp_server --install
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

# BFCL's own cases and AST checker (PyPI bfcl-eval, in its own venv: installed --no-deps with the few modules its
# checker needs) on Qwen2.5-Coder-0.5B and llama-server: BFCL's prompt, llama-server --jinja's native tool calls
# and toolwire, k/n per category (bench/bfcl_bench.py); about an hour on 2 cores. MODES=toolwire,native runs some.
BFCL_VENV := $(VENV)-bfcl
$(BFCL_VENV)/.installed:
	$(PYTHON) -m venv $(BFCL_VENV)
	$(BFCL_VENV)/bin/python -m pip install --quiet --no-deps bfcl-eval==2026.3.23
	$(BFCL_VENV)/bin/python -m pip install --quiet filelock==3.20.0 tenacity tree_sitter==0.21.3 \
		tree-sitter-java==0.21.0 tree-sitter-javascript==0.21.4 openai overrides requests "httpx>=0.27,<0.29"
	touch $@

bench-bfcl: $(VENV)/.installed-dev $(BFCL_VENV)/.installed
	PYTHONPATH=tests $(BIN)/python -m support.llama_cpp_server --install
	$(BFCL_VENV)/bin/python bench/bfcl_bench.py --check-scorer
	$(BFCL_VENV)/bin/python bench/bfcl_bench.py $(foreach mode,$(subst $(comma), ,$(MODES)),--mode $(mode))
