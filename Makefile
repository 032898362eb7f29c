# Quick start: `make demo`, then `make test`. Everything installs into .venv with pip.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The CPU build of torch: found locally on the project's machines; elsewhere set
# TORCH_INDEX=https://download.pytorch.org/whl/cpu so pip does not pull a multi-GB CUDA build. torch alone comes
# from there (--no-deps: that index need not carry the pinned versions of its dependencies), which the next
# install takes from PyPI under the same constraints.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX ?=
# Every install is pinned to the tested set (constraints.txt, written by `make lock`); CONSTRAINTS= lifts the pins.
CONSTRAINTS ?= constraints.txt
PIP_C := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
AUDIT_TOOLS := $(VENV)/audit-tools
QUESTION ?= What is the notice period for termination for convenience?
SAMPLE := samples/master_services_agreement.pdf

.PHONY: install install-engine demo lint test test-fast system-deps lock audit eval bench bench-analysis bench-review bench-offline clean

# What the demo needs: docpipe and its dependencies, no test tools (make test adds them).
install: $(VENV)/.installed

# The tests also run the real vLLM engine (CPU build), the Redis answer cache, the Gradio page and
# `docpipe serve` (FastAPI, uvicorn, prometheus-client).
install-engine: $(VENV)/.installed-engine

$(VENV)/.installed: pyproject.toml Makefile $(CONSTRAINTS)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(PIP_C) torch==$(TORCH_VERSION) $(if $(TORCH_INDEX),--no-deps --index-url $(TORCH_INDEX))
	$(PIP) install -q $(PIP_C) -e .
	touch $@

# The test tools (pytest, ruff, mypy, playwright ...), for test-fast.
$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -q $(PIP_C) -e '.[dev]'
	touch $@

$(VENV)/.installed-engine: $(VENV)/.installed
	$(PIP) install -q $(PIP_C) -e '.[dev,cpu,redis,ui,serve,ocr,ray,docs]'
	# PyPI's torchvision/torchaudio/torchcodec/triton are built against CUDA torch and break
	# `import transformers` / `from vllm import LLM` beside the CPU build.
	$(PIP) uninstall -y -q torchvision torchaudio torchcodec triton 2>/dev/null || true
	touch $@

demo: install
	$(VENV)/bin/docpipe ask $(SAMPLE) "$(QUESTION)"
	@echo "Key terms of the same contract (docpipe terms; -o terms.xlsx for a workbook):"
	$(VENV)/bin/docpipe -q terms $(SAMPLE) --terms parties,agreement_date,expiration_date,notice_deadline,governing_law
	@echo "The same contract held against a firm's positions (docpipe check; samples/playbook.toml; -o check.xlsx):"
	$(VENV)/bin/docpipe -q check --playbook samples/playbook.toml $(SAMPLE)

# Static checks, first in `make test`: ruff's lint rules, the import contracts (import-linter: the layers of
# issue 11, no cycles) and mypy, all configured in pyproject.toml, plus `ruff format --check` (FORMAT_CHECK=0
# skips it while a change is in progress; `ruff format .` fixes what it finds).
FORMAT_CHECK ?= 1
# mypy sees the serve, ui and engine extras' own types only once they are installed: with the base install
# alone, ignores written for them look unused and it fails (found by a plain `make test` in a fresh clone).
lint: install-engine
	$(VENV)/bin/ruff check .
ifeq ($(FORMAT_CHECK),1)
	$(VENV)/bin/ruff format --check .
endif
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# DOCPIPE_REQUIRE_SYSTEM_TOOLS=1: a browser or Redis test that cannot run fails instead of skipping.
test: lint docs install-engine system-deps
	DOCPIPE_REQUIRE_SYSTEM_TOOLS=1 $(PY) -m pytest -q

# The documentation site (mkdocs.yml, docs/) into site/, git-ignored; --strict: a warning (a broken link, a
# docstring the API pages cannot render) fails the build. .PHONY because docs/ is a folder.
.PHONY: docs
docs: install-engine
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir site

test-fast: $(VENV)/.installed-dev
	$(PY) -m pytest -q -m "not integration"

# The workbench's security tests run in Debian's chromium (/usr/bin/chromium, driven by playwright), the cache
# tests against a real redis-server and the OCR tests with Debian's tesseract (English data): installed with
# apt-get when missing and possible (root or password-less sudo), else make stops and says what to install.
# Never a silent skip.
system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v tesseract >/dev/null || missing="$$missing tesseract-ocr"; \
	tesseract --list-langs 2>/dev/null | grep -qx eng || missing="$$missing tesseract-ocr-eng"; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ]; then sudo=""; elif sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=no; fi; \
	if command -v apt-get >/dev/null && [ "$$sudo" != no ]; then \
		echo "make test: installing$$missing with apt-get (the browser, Redis and OCR tests need them)"; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi; \
	if [ ! -x /usr/bin/chromium ] || ! command -v redis-server >/dev/null || ! tesseract --list-langs 2>/dev/null | grep -qx eng; then \
		echo "make test needs$$missing and could not install it (no apt-get, or neither root nor password-less sudo)." >&2; \
		echo "Install it, then run make test again:  sudo apt-get install -y$$missing" >&2; \
		echo "(make test-fast runs the unit tests without them)" >&2; \
		exit 1; \
	fi

# Writes the set installed in .venv (pip freeze, minus docpipe itself) to constraints.txt, which every install
# above uses, so CI tests exactly this set. To move to newer releases: make clean; make install-engine
# CONSTRAINTS=; make test; make lock; make audit; commit constraints.txt.
lock: $(VENV)/.installed-engine
	{ echo "# The tested set: written by make lock from $(VENV) (pip freeze); every install in the Makefile uses it"; \
	  echo "# with -c. Do not edit by hand: change pyproject.toml, reinstall without pins (CONSTRAINTS=), make lock."; \
	  $(PIP) freeze --exclude-editable | grep -v -i -E '^(#|-e |docpipe==)' | sed -E 's/^(torch==[^+]+)[+].*/\1/'; \
	} > $(CONSTRAINTS).tmp && mv $(CONSTRAINTS).tmp $(CONSTRAINTS)
	@echo "wrote $(CONSTRAINTS) ($$(grep -c '==' $(CONSTRAINTS)) pins)"

# Known advisories against the installed set and the lock: .ci/advisories.toml offline, plus pip-audit when it
# can be installed and reach its service. Fails on a known vulnerable version, never for lack of network.
audit: $(VENV)/.installed-engine
	@test -x $(AUDIT_TOOLS)/bin/pip-audit || { python3 -m venv $(AUDIT_TOOLS) && $(AUDIT_TOOLS)/bin/pip install -q pip-audit; } \
		|| echo "pip-audit could not be installed: the offline advisory list still runs"
	$(PY) .ci/audit.py $(if $(CONSTRAINTS),--lock $(CONSTRAINTS)) --pip-audit $(AUDIT_TOOLS)/bin/pip-audit

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

# Review grids (about 6 minutes): a question's latency while a grid runs, old vs new batching; the grid's stream,
# layouts and resume on the vLLM CPU engine; its offline quality against CUAD beside eval-analysis.
bench-review: $(VENV)/.installed-engine
	$(PY) benchmarks/interactive_latency.py --out benchmarks/results/interactive_latency.json
	$(PY) benchmarks/review_grid.py
	$(PY) benchmarks/review_quality.py

# Offline reading (no language model): a new question on the 115-page contract, sentences embedded at ingestion
# vs on first use (~3 min); the checklist grid over the data room, cold cells, both placements (~20 min for 30
# contracts on 2 cores; --contracts 231 for the whole room).
bench-offline: $(VENV)/.installed-engine
	$(PY) benchmarks/offline_latency.py --out docs/benchmarks/offline_latency.json
	$(PY) benchmarks/offline_grid.py --contracts 30 --compare 10 --out docs/benchmarks/offline_grid.json

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
