# Two commands on a fresh machine: `make demo` (set-up + the main job) and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= dev,traces,vllm

.PHONY: setup test lint demo sim-quick clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installs the project with its extras (the vllm extra is about 9.4 GB, a few minutes).
setup: $(BIN)/python
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	$(BIN)/pip install -q --no-deps bfcl-eval==2026.3.23

lint: setup
	$(BIN)/ruff check .

test: setup
	$(BIN)/ruff check .
	HF_HUB_OFFLINE=1 AUTELLIX_REQUIRE_VLLM=1 $(BIN)/pytest -q

demo: setup
	HF_HUB_OFFLINE=1 $(BIN)/autellix demo

sim-quick: setup
	$(BIN)/autellix sim --workload mixed --quick

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
