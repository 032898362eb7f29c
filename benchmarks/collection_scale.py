"""Collection scale by simulation: search latency, recall and memory of a data room of 10^3 to 10^5 contracts.

    .venv/bin/python benchmarks/collection_scale.py --out docs/benchmarks/collection_scale.json   # ~30 min
    .venv/bin/python benchmarks/collection_scale.py --quick      # 10^3 and 10^4 documents only, a few minutes

The real data room is the start: the collection `eval-collection` of the store at DOCPIPE_HOME (built through
the API, `dp.collection(NAME).add(FOLDER)`, when it is not there), read through `dp.collection_service.sync`, the
same object a question goes through. Each member's passage vectors and texts come from its own stored index
(`dp.collection_service.stored_vectors`, `dp.collection_service.stored_passage_texts`), its routing card from the collection index. Document d of a
simulated collection is a copy of real member d mod 231: its passage vectors are the member's plus isotropic
Gaussian noise, re-normalised, with the noise scaled so that a copy is as near its original as a real passage
is to its nearest real neighbour (median cosine, measured here; `--noise` overrides it). Its passage tokens
and card text are the member's (the card named "<name> copy <d>"), so the lexical indexes grow in documents but
not in vocabulary, which flatters their size a little.

Each component runs in a fresh child process per size, so that its memory is its own (RSS growth over the
child's start, peak RSS from VmHWM), and the parent holds only the real data:

- **pooled dense index**, built as `CollectionIndex` builds it when contracts are added one by one: exact
  `IndexIDMap2(IndexFlatIP)` until it reaches `POOLED_FLAT_BELOW` vectors, then `docpipe.retrieve.collection.
  _retrain` (IVF, 4 sqrt(N) lists, k-means on 50 points a list, nprobe `POOLED_NPROBE`) whenever it has grown
  `RETRAIN_GROWTH` times since the last training. The vectors are added a block of documents at a time rather
  than one document per call, splitting a block at the document whose addition triggers a retraining, which
  gives the very same index. Then: build time, the serialized size (`faiss.write_index`), RSS growth, the peak
  of a retraining and of `CollectionIndex.save`'s serialization, one query at a time on one FAISS thread with
  k = `POOL_DEPTH` (what `CollectionIndex.pooled` asks) p50/p95, the distances computed per query, recall@10
  against the exact neighbours (the same index searched with every list probed). Beside it, side by side on the
  same queries, an IVF with 8-bit scalar quantization (`IVF{lists},SQ8`, same list count and training sample
  size) as the alternative that stores four times as many vectors.
- **routing**: a `CollectionIndex` holding N cards (card vectors as the passage vectors above, `_index_cards`
  for its bm25s index and document frequencies) and `route(question, query)` per question.
- **pooled bm25s** over N x ~78 passages, built as `CollectionIndex.build_bm25` builds it (one token list per
  passage, `bm25s.BM25().index`), and the query as `pooled` runs it (`get_scores`, the top `POOL_DEPTH`).

Queries are real questions embedded by the collection's embedder: those of ../shared/eval/natural_questions_dev.json
and a seeded sample of the cuad-collection-dev questions (which name their contract: they are what routing is
for). 10^5 documents is ~7.8 million passage vectors, 12 GB of float32: above the 8 GiB this benchmark allows
itself on a shared 24 GiB machine. So the dense index is measured up to `--max-dense-docs` documents and its
memory extrapolated linearly to 10^5 (its latency from the distances computed per query); a component whose
projected peak exceeds `--memory-budget-gib` is skipped and extrapolated the same way. Every figure says
whether it was measured or extrapolated.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe.retrieve import collection as collection_index
from docpipe.retrieve.cards import card_text
from docpipe.retrieve.dense import ivf_lists, tokenize

# The pooled index's own policy (docpipe.retrieve.collection), not the per-document index's.
AUTO_FLAT_BELOW = collection_index.POOLED_FLAT_BELOW
IVF_NPROBE = collection_index.POOLED_NPROBE

DIM = 384
K = 10
BLOCK = 500  # documents generated at a time (each block its own seeded generator)
DEFAULT_SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)
DEFAULT_COLLECTION = "eval-collection"
DEFAULT_FOLDER = ROOT.parent / "shared" / "eval" / "cuad-collection-dev"
NQ_QUESTIONS = ROOT.parent / "shared" / "eval" / "natural_questions_dev.json"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "collection_scale.json"
MACHINE_GIB = 24
GIB = 1 << 30
MB = 1e6


# -- memory -------------------------------------------------------------------------------------------------
def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak() -> None:
    """Resets VmHWM (the peak RSS) to the current RSS (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def peak_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def settle() -> int:
    gc.collect()
    return rss_bytes()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def ms_stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 4), "p95_ms": round(percentile(values, 95), 4)}


# -- the simulated collection -----------------------------------------------------------------------------
class Real:
    """The real collection's data as the children read it from the parent's temp folder."""

    def __init__(self, folder: Path) -> None:
        arrays = np.load(folder / "real.npz")
        self.vectors = arrays["vectors"]
        self.counts = arrays["counts"]
        self.card_vectors = arrays["card_vectors"]
        self.queries = arrays["queries"]
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        meta = json.loads((folder / "real.json").read_text())
        self.noise = float(meta["noise"])
        self.seed = int(meta["seed"])
        self.names: list[str] = meta["names"]
        self.texts: list[str] = meta["texts"]  # the members' texts, for their cards
        self.tokens: list[list[list[str]]] = meta["tokens"]  # per member, per passage
        self.questions: list[str] = meta["questions"]
        self.members = len(self.counts)

    def passages(self, docs: int) -> int:
        full, rest = divmod(docs, self.members)
        return int(full * self.counts.sum() + self.counts[:rest].sum())

    def block(self, first: int, last: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Returns the passage vectors of documents [first, last), their pooled ids (the document's number as
        its slot) and the row at which each document ends."""
        members = np.arange(first, last) % self.members
        counts = self.counts[members]
        rows = np.concatenate([np.arange(s, s + c) for s, c in zip(self.starts[members], counts)])
        rng = np.random.default_rng([self.seed, first // BLOCK])
        vectors = self.vectors[rows] + self.noise * rng.standard_normal((len(rows), DIM), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        slots = np.repeat(np.arange(first, last, dtype=np.int64), counts)
        within = np.concatenate([np.arange(c, dtype=np.int64) for c in counts])
        ids = (slots << collection_index._SLOT_SHIFT) + within
        return vectors, ids, np.cumsum(counts)

    def blocks(self, docs: int):
        for first in range(0, docs, BLOCK):
            yield self.block(first, min(first + BLOCK, docs))

    def card_block(self, first: int, last: int) -> np.ndarray:
        members = np.arange(first, last) % self.members
        rng = np.random.default_rng([self.seed, 1 << 20, first // BLOCK])
        vectors = self.card_vectors[members] + self.noise * rng.standard_normal((last - first, DIM), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def retrain_schedule(real: Real, docs: int) -> list[int]:
    """Returns the pooled sizes at which `CollectionIndex._add_passages` trains the IVF when `docs` documents
    are added one by one (the arithmetic alone, nothing built)."""
    total, trained_at, ivf, out = 0, 0, False, []
    for d in range(docs):
        total += int(real.counts[d % real.members])
        if (not ivf and total >= AUTO_FLAT_BELOW) or (ivf and total >= collection_index.RETRAIN_GROWTH * trained_at):
            ivf, trained_at = True, total
            out.append(total)
    return out


# -- children -------------------------------------------------------------------------------------------------
def child_dense(real: Real, docs: int, args: argparse.Namespace) -> dict[str, Any]:
    import faiss

    faiss.omp_set_num_threads(os.cpu_count() or 1)
    base = settle()
    reset_peak()
    pooled: Any = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
    trained_at, retrains = 0, []
    started = time.perf_counter()
    generate_s = 0.0
    for first in range(0, docs, BLOCK):
        t0 = time.perf_counter()
        vectors, ids, ends = real.block(first, min(first + BLOCK, docs))
        generate_s += time.perf_counter() - t0
        if rss_bytes() - base > args.memory_budget_gib * GIB:
            return {"documents": docs, "aborted": f"RSS growth over {args.memory_budget_gib} GiB at document {first}"}
        start = 0
        while start < len(vectors):
            flat = not isinstance(pooled, faiss.IndexIVF)
            threshold = AUTO_FLAT_BELOW if flat else collection_index.RETRAIN_GROWTH * max(trained_at, 1)
            ahead = ends[ends > start]
            trigger = ahead[int(pooled.ntotal) + ahead - start >= threshold]
            end = int(trigger[0]) if len(trigger) else len(vectors)
            pooled.add_with_ids(vectors[start:end], ids[start:end])
            if len(trigger):
                before = rss_bytes()
                reset_peak()
                t0 = time.perf_counter()
                pooled = collection_index._retrain(pooled, DIM)
                trained_at = int(pooled.ntotal)
                retrains.append(
                    {
                        "at_vectors": trained_at,
                        "lists": int(pooled.nlist),
                        "s": round(time.perf_counter() - t0, 3),
                        "peak_over_rss_before_MB": round((peak_bytes() - before) / MB, 1),
                    }
                )
            start = end
        del vectors, ids
    build_s = time.perf_counter() - started - generate_s
    build_peak = max(peak_bytes(), rss_bytes())
    held = settle() - base
    kind = "ivf" if isinstance(pooled, faiss.IndexIVF) else "flat"
    out: dict[str, Any] = {
        "documents": docs,
        "vectors": int(pooled.ntotal),
        "index_type": kind,
        "factory": "IDMap2,Flat (IP)" if kind == "flat" else f"IVF{pooled.nlist},Flat (IP)",
        "build_s": round(build_s, 2),
        "generate_vectors_s_not_in_build": round(generate_s, 2),
        "retrains": retrains,
        "rss_growth_MB": round(held / MB, 1),
        "peak_rss_growth_during_build_MB": round((build_peak - base) / MB, 1),
    }
    if kind == "ivf":
        out.update(nlist=int(pooled.nlist), nprobe=int(pooled.nprobe), trained_at=trained_at)
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        path = os.path.join(tmp, "passages.faiss")
        faiss.write_index(pooled, path)
        out["serialized_MB"] = round(os.path.getsize(path) / MB, 2)
        out["serialized_bytes_per_vector"] = round(os.path.getsize(path) / max(1, pooled.ntotal), 1)
        if out["serialized_MB"] * 2.2 < args.memory_budget_gib * GIB / MB - (rss_bytes() - base) / MB:
            # CollectionIndex.save: write_bytes(faiss.serialize_index(index).tobytes()), then read back to hash
            before = settle()
            reset_peak()
            t0 = time.perf_counter()
            Path(path).write_bytes(faiss.serialize_index(pooled).tobytes())
            collection_index.sha256_hex(Path(path).read_bytes())
            out["save_s"] = round(time.perf_counter() - t0, 2)
            out["save_peak_over_index_MB"] = round((peak_bytes() - before) / MB, 1)
        else:
            out["save_peak_over_index_MB"] = "not measured: over the memory budget"
    queries = real.queries
    alt: Any = None
    if args.sq8 and kind == "ivf":
        t0 = time.perf_counter()
        alt = faiss.index_factory(DIM, f"IVF{pooled.nlist},SQ8", faiss.METRIC_INNER_PRODUCT)
        alt.cp.niter = 10
        alt.cp.min_points_per_centroid = 1
        pool, first = [], 0  # the first documents' vectors (copies of every member in turn)
        while sum(len(v) for v in pool) < 50 * pooled.nlist and first < docs:
            pool.append(real.block(first, min(first + BLOCK, docs))[0])
            first += BLOCK
        pool = np.vstack(pool)
        sample = min(len(pool), 50 * pooled.nlist)
        alt.train(pool[np.sort(np.random.default_rng(0).choice(len(pool), size=sample, replace=False))])
        alt.nprobe = pooled.nprobe
        del pool
        before = settle()
        for vectors, ids, _ in real.blocks(docs):
            alt.add_with_ids(vectors, ids)
        del vectors, ids
        out["sq8"] = {
            "factory": f"IVF{alt.nlist},SQ8 (IP)",
            "build_s_incl_generation": round(time.perf_counter() - t0, 2),
            "training_sample": int(sample),
            "rss_growth_MB": round((settle() - before) / MB, 1),
        }
    # exact neighbours: the same vectors, every list probed (flat: the index itself)
    t0 = time.perf_counter()
    if kind == "ivf":
        _, truth = pooled.search(queries, K, params=faiss.SearchParametersIVF(nprobe=pooled.nlist))
    else:
        _, truth = pooled.search(queries, K)
    out["exact_search_s"] = round(time.perf_counter() - t0, 2)
    depth = collection_index.POOL_DEPTH
    exact: Any = None
    if kind == "ivf" and pooled.ntotal <= args.flat_max:  # the exact index `auto` did not pick, side by side
        before = settle()
        exact = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
        for vectors, ids, _ in real.blocks(docs):
            exact.add_with_ids(vectors, ids)
        del vectors, ids
        out["flat"] = {"factory": "IDMap2,Flat (IP)", "rss_growth_MB": round((settle() - before) / MB, 1)}
    timed = {"auto": pooled} | ({"sq8": alt} if alt is not None else {}) | ({"flat": exact} if exact else {})
    found: dict[str, list[np.ndarray]] = {name: [] for name in timed}
    times: dict[str, list[float]] = {name: [] for name in timed}
    ndis: dict[str, int] = {name: 0 for name in timed}
    faiss.omp_set_num_threads(1)
    names = list(timed)
    for query in queries[:5]:  # warm-up
        for name in names:
            timed[name].search(query.reshape(1, -1), depth)
    for i, query in enumerate(queries):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            q = query.reshape(1, -1)
            faiss.cvar.indexIVF_stats.reset()
            t0 = time.perf_counter()
            _, ids = timed[name].search(q, depth)
            times[name].append(1000 * (time.perf_counter() - t0))
            ndis[name] += int(faiss.cvar.indexIVF_stats.ndis)
            found[name].append(ids[0, :K])
    for name in names:
        entry = out if name == "auto" else out[name]
        entry.update(ms_stats(times[name]), queries=len(queries), k=depth)
        entry["recall_at_10"] = round(recall(np.vstack(found[name]), truth), 4)
        ivf = isinstance(timed[name], faiss.IndexIVF)
        entry["distances_per_query"] = round(ndis[name] / len(queries)) if ivf else int(pooled.ntotal)
    if kind == "ivf":  # what recall costs: more lists probed, same index
        out["nprobe_sweep"] = []
        for nprobe in (IVF_NPROBE, 2 * IVF_NPROBE, 4 * IVF_NPROBE):
            params = faiss.SearchParametersIVF(nprobe=nprobe)
            lat, got = [], []
            for query in queries[:100]:
                t0 = time.perf_counter()
                _, ids = pooled.search(query.reshape(1, -1), depth, params=params)
                lat.append(1000 * (time.perf_counter() - t0))
                got.append(ids[0, :K])
            out["nprobe_sweep"].append(
                {"nprobe": nprobe, "recall_at_10": round(recall(np.vstack(got), truth[:100]), 4)} | ms_stats(lat)
            )
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    # adding one more contract to the built index (what `Collection.add` does to the pooled index per member)
    vectors, ids, _ = real.block(docs, docs + 1)
    t0 = time.perf_counter()
    pooled.add_with_ids(vectors, ids)
    out["add_one_contract_ms"] = round(1000 * (time.perf_counter() - t0), 2)
    out["peak_rss_growth_MB"] = round((max(peak_bytes(), build_peak) - base) / MB, 1)
    del alt, exact
    held_before_trim = settle() - base
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)  # what of the growth is free heap the allocator kept
    out["rss_growth_with_one_more_contract_MB"] = round(held_before_trim / MB, 1)
    out["rss_growth_after_malloc_trim_MB"] = round((rss_bytes() - base) / MB, 1)
    return out


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / truth.shape[1] for a, b in zip(found, truth)]))


def child_routing(real: Real, docs: int, args: argparse.Namespace) -> dict[str, Any]:
    base = settle()
    reset_peak()
    started = time.perf_counter()
    cindex = collection_index.CollectionIndex(Path(args.tmp) / "unused", embedder=None)  # type: ignore[arg-type]
    cindex.card_vectors = np.vstack(
        [real.card_block(first, min(first + BLOCK, docs)) for first in range(0, docs, BLOCK)]
    ).astype(np.float32)
    for d in range(docs):
        member = d % real.members
        name = real.names[member] if d < real.members else f"{real.names[member]} copy {d}"
        cindex.ids.append(f"{d:064x}")
        cindex.names.append(name)
        cindex.cards.append(card_text(name, real.texts[member]))
        cindex.slots.append(d)
        cindex.counts.append(int(real.counts[member]))
    cards_s = time.perf_counter() - started
    started = time.perf_counter()
    cindex._index_cards()
    index_s = time.perf_counter() - started
    held = settle() - base
    times, named = [], 0
    for question, query in zip(real.questions[:5], real.queries[:5]):
        cindex.route(question, query)
    for question, query in zip(real.questions, real.queries):
        t0 = time.perf_counter()
        route = cindex.route(question, query)
        times.append(1000 * (time.perf_counter() - t0))
        named += bool(route.named)
    dense = []
    for query in real.queries:
        t0 = time.perf_counter()
        _ = cindex.card_vectors @ query
        dense.append(1000 * (time.perf_counter() - t0))
    return {
        "documents": docs,
        "cards_s": round(cards_s, 2),
        "index_cards_s": round(index_s, 2),
        "rss_growth_MB": round(held / MB, 1),
        "peak_rss_growth_MB": round((peak_bytes() - base) / MB, 1),
        "card_vectors_MB": round(cindex.card_vectors.nbytes / MB, 2),
        "route": ms_stats(times) | {"questions": len(times), "named_share": round(named / len(times), 3)},
        "card_matmul": ms_stats(dense),
    }


def child_bm25(real: Real, docs: int, args: argparse.Namespace) -> dict[str, Any]:
    import bm25s

    base = settle()
    reset_peak()
    corpus: list[list[str]] = []
    for d in range(docs):  # the members' token lists, shared: the lists themselves are not what is measured
        corpus.extend(tok or ["\x00"] for tok in real.tokens[d % real.members])
    lists_bytes = settle() - base
    reset_peak()
    before = rss_bytes()
    started = time.perf_counter()
    bm25 = bm25s.BM25()
    bm25.index(corpus, show_progress=False)
    build_s = time.perf_counter() - started
    del corpus
    held = settle() - before
    peak = peak_bytes() - before
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        bm25.save(tmp, allow_pickle=False, show_progress=False)
        saved = sum(f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file())
    depth = collection_index.POOL_DEPTH
    times = []
    terms = [tokenize(q) for q in real.questions]
    for question in terms[:5]:
        bm25.get_scores(question)
    for question in terms:
        t0 = time.perf_counter()
        scores = bm25.get_scores(question)
        top = np.argpartition(-scores, depth - 1)[:depth]
        sorted(top, key=lambda r: -scores[r])
        times.append(1000 * (time.perf_counter() - t0))
    return {
        "documents": docs,
        "passages": real.passages(docs),
        "build_s": round(build_s, 2),
        "rss_growth_MB": round(held / MB, 1),
        "peak_rss_growth_during_build_MB": round(peak / MB, 1),
        "corpus_lists_MB_not_counted": round(lists_bytes / MB, 1),
        "saved_MB": round(saved / MB, 2),
        "nnz": int(bm25.scores["data"].shape[0]),
        "query": ms_stats(times) | {"questions": len(times), "k": depth},
    }


CHILDREN = {"dense": child_dense, "routing": child_routing, "bm25": child_bm25}


def run_child(kind: str, docs: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", kind, "--docs", str(docs), "--data", str(args.data)]
    cmd += ["--tmp", str(args.tmp), "--memory-budget-gib", str(args.memory_budget_gib)]
    cmd += ["--flat-max", str(args.flat_max)] + ([] if args.sq8 else ["--no-sq8"])
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        return {"documents": docs, "failed": done.stderr.strip().splitlines()[-1:] or [f"rc {done.returncode}"]}
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["measured"] = True
    row["child_wall_s"] = round(time.perf_counter() - started, 1)
    return row


# -- the parent: real data, then the sizes ----------------------------------------------------------------------
def prepare(args: argparse.Namespace) -> dict[str, Any]:
    """Writes the real collection's data for the children to `args.data`; returns what the report needs of it."""
    import faiss

    from docpipe.ingest import build
    from docpipe.pipeline import DocPipe

    before = rss_bytes()
    dp = DocPipe()
    coll = dp.collection(args.collection)
    if not coll.exists or not coll.documents:
        print(f"building collection {args.collection} from {args.folder} (through the API)", flush=True)
        coll.add(args.folder)
    cindex = dp.collection_service.sync(coll)
    vectors, counts, tokens, texts, pages = [], [], [], [], 0
    tokens_rss = 0
    for doc_id in (
        cindex.ids
    ):  # what `dp.collection_service.stored_vectors` and `dp.collection_service.stored_passage_texts` read, in one go
        parts = build.stored_parts(doc_id, store=dp.store, fingerprint=dp.fingerprint)
        assert parts is not None, doc_id
        doc, passages, v = parts
        vectors.append(np.asarray(v, dtype=np.float32))
        counts.append(len(v))
        t0 = rss_bytes()
        tokens.append([tokenize(p) for p in passages])
        tokens_rss += rss_bytes() - t0
        texts.append(doc.text)
        pages += len(doc.pages)
    all_vectors = np.vstack(vectors)
    assert cindex.card_vectors is not None
    questions = list(json.loads(NQ_QUESTIONS.read_text()).values())
    natural = len(questions)
    cuad = [json.loads(line)["question"] for line in (args.folder / "annotations.jsonl").read_text().splitlines()]
    rng = np.random.default_rng(args.seed)
    questions += [cuad[i] for i in sorted(rng.choice(len(cuad), size=args.queries - len(questions), replace=False))]
    queries = np.asarray(dp.embedder.embed(questions), dtype=np.float32)
    process_rss = rss_bytes()  # python + docpipe + torch embedder + the real collection loaded
    # Noise: a copy as near its original as a real passage is to its nearest other real passage (median).
    flat = faiss.IndexFlatIP(DIM)
    flat.add(all_vectors)
    sims, _ = flat.search(all_vectors, 2)
    nn = float(np.median(sims[:, 1]))
    noise = args.noise if args.noise is not None else math.sqrt(1 / nn**2 - 1) / math.sqrt(DIM)
    check = all_vectors + noise * rng.standard_normal(all_vectors.shape, dtype=np.float32)
    check /= np.linalg.norm(check, axis=1, keepdims=True)
    copy_cos = float(np.median(np.sum(check * all_vectors, axis=1)))
    # The stored collection's own pooled index (the product's, no copies): its recall against exact search.
    _, truth = flat.search(queries, K)
    pooled = cindex._pooled
    _, got = pooled.search(queries, collection_index.POOL_DEPTH)
    real_recall = recall(got[:, :K], _ids_to_rows(cindex, truth))
    _, truth_deep = flat.search(queries, collection_index.POOL_DEPTH)
    real_recall_deep = recall(got, _ids_to_rows(cindex, truth_deep))
    times: dict[str, list[float]] = {"product": [], "flat": []}
    faiss.omp_set_num_threads(1)
    for i, query in enumerate(np.vstack([queries[:5], queries])):
        for name in ("product", "flat")[i % 2 :] + ("product", "flat")[: i % 2]:
            index = pooled if name == "product" else flat
            t0 = time.perf_counter()
            index.search(query.reshape(1, -1), collection_index.POOL_DEPTH)
            if i >= 5:
                times[name].append(1000 * (time.perf_counter() - t0))
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    args.data.mkdir(parents=True, exist_ok=True)
    np.savez(
        args.data / "real.npz",
        vectors=all_vectors,
        counts=np.asarray(counts),
        card_vectors=cindex.card_vectors.astype(np.float32),
        queries=queries,
    )
    meta = {
        "noise": noise,
        "seed": args.seed,
        "names": cindex.names,
        "texts": texts,
        "tokens": tokens,
        "questions": questions,
    }
    (args.data / "real.json").write_text(json.dumps(meta))
    return {
        "collection": args.collection,
        "docpipe_home": "DOCPIPE_HOME" if os.environ.get("DOCPIPE_HOME") else "the default store",
        "members": len(counts),
        "pages": pages,
        "passage_vectors": int(len(all_vectors)),
        "passages_per_contract": round(len(all_vectors) / len(counts), 2),
        "pages_per_contract": round(pages / len(counts), 2),
        "tokens_per_passage": round(float(np.mean([len(t) for doc in tokens for t in doc])), 1),
        "pooled_index_type": cindex.pooled_type,
        "pooled_index_size": cindex.size,
        "pooled_index_nlist": int(getattr(cindex._pooled, "nlist", 0)),
        "pooled_recall_at_10_real_questions": round(real_recall, 4),
        "pooled_recall_at_200_real_questions": round(real_recall_deep, 4),
        "pooled_search_one_query_k200": {"product_index": ms_stats(times["product"]), "flat": ms_stats(times["flat"])},
        "token_lists_B_per_passage": round(tokens_rss / len(all_vectors)),
        "nearest_real_neighbour_cosine_median": round(nn, 4),
        "noise_sigma_per_dimension": round(noise, 5),
        "copy_to_original_cosine_median": round(copy_cos, 4),
        "queries": {
            "total": len(questions),
            "natural_questions_dev": natural,
            "cuad_collection_dev_sample": len(questions) - natural,
        },
        "process_rss_MB": {
            "before_docpipe": round(before / MB, 1),
            "with_embedder_and_collection_loaded": round(process_rss / MB, 1),
        },
    }


def _ids_to_rows(cindex: Any, rows: np.ndarray) -> np.ndarray:
    """Returns the pooled ids of rows of the members' vectors stacked in card order."""
    counts = np.asarray(cindex.counts)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    member = np.searchsorted(starts, rows, side="right") - 1
    slots = np.asarray(cindex.slots, dtype=np.int64)[member]
    return (slots << collection_index._SLOT_SHIFT) + (rows - starts[member])


def extrapolate_dense(rows: dict[int, dict], target: int, schedule: list[int]) -> dict[str, Any]:
    """Returns the dense figures at `target` documents from the largest measured size: memory linear in vectors,
    latency by the distances computed per query (nprobe x vectors / lists, plus the lists)."""
    measured = [r for r in rows.values() if "p50_ms" in r and r.get("index_type") == "ivf"]
    last = max(measured, key=lambda r: r["documents"])
    vectors = int(round(last["vectors"] * target / last["documents"]))
    lists = ivf_lists(schedule[-1])
    scale = vectors / last["vectors"]
    dist = IVF_NPROBE * vectors / lists * (last["distances_per_query"] / (IVF_NPROBE * last["vectors"] / last["nlist"]))
    # time per distance from the largest measured size (includes the coarse search over the lists)
    per = last["p50_ms"] / (last["distances_per_query"] + last["nlist"])
    out = {
        "documents": target,
        "measured": False,
        "extrapolated_from_documents": last["documents"],
        "index_type": "ivf",
        "vectors": vectors,
        "nlist": lists,
        "trained_at": schedule[-1],
        "factory": f"IVF{lists},Flat (IP)",
        "serialized_MB": round(last["serialized_MB"] * scale, 1),
        "rss_growth_MB": round(last["rss_growth_MB"] * scale, 1),
        "distances_per_query": round(dist),
        "p50_ms": round(per * (dist + lists), 3),
        "p95_ms": round(last["p95_ms"] / last["p50_ms"] * per * (dist + lists), 3),
        "recall_at_10": f"not measured (nprobe {IVF_NPROBE} of {lists:,} lists, against {last['nlist']:,} measured)",
        "build_s": round(last["build_s"] * scale * math.sqrt(lists / last["nlist"]), 0),
        "how": "memory x vectors ratio; latency = measured time per distance x (distances + lists); "
        "build x vectors ratio x sqrt(lists ratio)",
    }
    if "sq8" in last:
        out["sq8"] = {
            "rss_growth_MB": round(last["sq8"]["rss_growth_MB"] * scale, 1),
            "p50_ms": round(last["sq8"]["p50_ms"] / last["p50_ms"] * out["p50_ms"], 3),
        }
    return out


def extrapolate_linear(rows: dict[int, dict], target: int, keys: list[str]) -> dict[str, Any]:
    measured = [r for r in rows.values() if r.get("measured")]
    last = max(measured, key=lambda r: r["documents"])
    scale = target / last["documents"]
    out: dict[str, Any] = {"documents": target, "measured": False, "extrapolated_from_documents": last["documents"]}
    for key in keys:
        node: Any = last
        for part in key.split("."):
            node = node[part]
        out[key] = round(node * scale, 2)
    out["how"] = f"linear in documents from {last['documents']:,}"
    return out


def capacity(result: dict) -> dict[str, Any]:
    """Returns how many contracts one machine holds with the auto index: RAM for passage vectors + passage
    bm25s + cards + the process, per contract from the largest measured sizes; at rest, and through the
    transient peaks of a growing collection (an IVF retraining, a save, a bm25s rebuild)."""
    real = result["real_collection"]
    measured = [r for r in result["dense"].values() if r.get("measured") and "rss_growth_MB" in r]
    dense = max(measured, key=lambda r: r["documents"])
    bm25 = max((r for r in result["bm25_passages"].values() if r.get("measured")), key=lambda r: r["documents"])
    cards = max((r for r in result["routing"].values() if r.get("measured")), key=lambda r: r["documents"])
    per_vector = dense["serialized_bytes_per_vector"]
    passages = dense["vectors"] / dense["documents"]
    index_B = per_vector * passages
    rss_B = dense["rss_growth_MB"] * MB / dense["documents"]
    bm25_B = bm25["rss_growth_MB"] * MB / bm25["documents"]
    card_B = cards["rss_growth_MB"] * MB / cards["documents"]
    overhead = real["process_rss_MB"]["with_embedder_and_collection_loaded"] * MB
    free = MACHINE_GIB * GIB - overhead
    retrain = max((r for row in measured for r in row["retrains"]), key=lambda r: r["at_vectors"])
    retrain_extra = retrain["peak_over_rss_before_MB"] * MB / (retrain["at_vectors"] * per_vector)  # x index
    saves = [r for r in measured if isinstance(r.get("save_peak_over_index_MB"), float)]
    save_row = max(saves, key=lambda r: r["documents"])
    save_extra = save_row["save_peak_over_index_MB"] / save_row["serialized_MB"]
    # bm25s rebuild: the new index's build peak beside the old index, plus the fresh token lists
    # `build_bm25` makes (measured per passage in the parent; the benchmark shares them, so adds them here)
    bm25_extra_B = (
        bm25["peak_rss_growth_during_build_MB"] * MB / bm25["documents"] + real["token_lists_B_per_passage"] * passages
    )
    transient_B = max(retrain_extra * index_B, save_extra * index_B, bm25_extra_B)
    at_rest = index_B + bm25_B + card_B
    out: dict[str, Any] = {
        "machine_GiB": MACHINE_GIB,
        "process_overhead_MB": round(overhead / MB),
        "passages_per_contract": round(passages, 1),
        "pages_per_contract": real["pages_per_contract"],
        "from_sizes_documents": {"dense": dense["documents"], "bm25": bm25["documents"], "cards": cards["documents"]},
        "bytes_per_contract": {
            "dense_index": round(index_B),
            "dense_rss_measured_incl_allocator_slack": round(rss_B),
            "bm25s_passages": round(bm25_B),
            "card": round(card_B),
        },
        "transient_extra_bytes_per_contract": {
            "ivf_retrain": round(retrain_extra * index_B),
            "save": round(save_extra * index_B),
            "bm25s_rebuild": round(bm25_extra_B),
        },
        "dense_transient_x_index": {"retrain": round(1 + retrain_extra, 2), "save": round(1 + save_extra, 2)},
        "contracts_at_rest_index_bytes": int(free / at_rest),
        "contracts_at_rest_measured_rss": int(free / (rss_B + bm25_B + card_B)),
        "contracts_through_peaks": int(free / (at_rest + transient_B)),
    }
    out["pages_through_peaks"] = int(out["contracts_through_peaks"] * real["pages_per_contract"])
    if "sq8" in dense:
        sq8_B = per_vector * passages * (DIM + 8) / (4 * DIM + 8)  # codes + ids instead of floats + ids
        out["sq8_alternative"] = {
            "dense_index_B_per_contract": round(sq8_B),
            "contracts_at_rest": int(free / (sq8_B + bm25_B + card_B)),
            "recall_at_10": dense["sq8"]["recall_at_10"],
            "note": "not in the product (`_retrain` reads float codes back out of the lists); bytes from the "
            "index layout (384 + 8 a vector): its measured RSS growth is understated, as it is built after the "
            "auto index and reuses the heap that index's retrainings freed",
        }
    out["arithmetic"] = (
        f"({MACHINE_GIB} GiB = {MACHINE_GIB * GIB / MB:,.0f} MB - {overhead / MB:,.0f} MB process) / "
        f"({index_B:,.0f} B dense + {bm25_B:,.0f} B bm25s + {card_B:,.0f} B card per contract of "
        f"{passages:.0f} passages) = {out['contracts_at_rest_index_bytes']:,} contracts at rest "
        f"({out['contracts_at_rest_measured_rss']:,} with the dense index's measured RSS, "
        f"{rss_B:,.0f} B a contract); keeping room for the largest transient "
        f"({transient_B:,.0f} B a contract: IVF retrain x{1 + retrain_extra:.1f} the index, save "
        f"x{1 + save_extra:.1f}, bm25s rebuild) {out['contracts_through_peaks']:,}"
    )
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10^3 and 10^4 documents only (a few minutes)")
    p.add_argument("--sizes", default=None, help="comma-separated documents (default 1000,10000,100000)")
    p.add_argument("--max-dense-docs", type=int, default=20_000, help="measure the dense index up to this many")
    p.add_argument("--memory-budget-gib", type=float, default=8.0, help="skip a child projected above this peak")
    p.add_argument("--collection", default=DEFAULT_COLLECTION)
    p.add_argument("--folder", type=Path, default=DEFAULT_FOLDER, help="added to the collection when it is empty")
    p.add_argument("--queries", type=int, default=200, help="questions: all 41 natural ones + a cuad sample")
    p.add_argument("--noise", type=float, default=None, help="per-dimension sigma (default: calibrated)")
    p.add_argument("--flat-max", type=int, default=1_000_000, help="time exact flat beside auto up to this many")
    p.add_argument("--no-sq8", dest="sq8", action="store_false", help="skip the IVF-SQ8 alternative")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    p.add_argument("--docs", type=int, help=argparse.SUPPRESS)
    p.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--tmp", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = args.sizes or ",".join(str(s) for s in (QUICK_SIZES if args.quick else DEFAULT_SIZES))
    args.sizes = sorted(int(float(s)) for s in sizes.split(","))
    return args


def project(rows: dict[int, dict], docs: int, key: str) -> float | None:
    """Returns the peak RSS (MB) projected for `docs` from the largest measured size, linearly."""
    measured = [r for r in rows.values() if r.get("measured") and key in r]
    if not measured:
        return None
    last = max(measured, key=lambda r: r["documents"])
    return last[key] * docs / last["documents"]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        result = CHILDREN[args.child](Real(args.data), args.docs, args)
        print(json.dumps(result))
        return 0
    import bm25s
    import faiss

    started = time.perf_counter()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    budget_mb = args.memory_budget_gib * GIB / MB
    with tempfile.TemporaryDirectory(prefix="collection_scale.") as tmp:
        args.tmp = Path(tmp)
        args.data = args.tmp / "data"
        real = prepare(args)
        print(
            f"real: {real['members']} contracts, {real['passage_vectors']:,} passages, {real['pages']:,} pages; "
            f"noise sigma {real['noise_sigma_per_dimension']} (copy cosine {real['copy_to_original_cosine_median']}, "
            f"nearest real neighbour {real['nearest_real_neighbour_cosine_median']}) "
            f"in {time.perf_counter() - started:.0f} s",
            flush=True,
        )
        loaded = Real(args.data)
        dense: dict[int, dict] = {}
        routing: dict[int, dict] = {}
        bm25: dict[int, dict] = {}
        for docs in args.sizes:
            print(f"N = {docs:,} documents ({loaded.passages(docs):,} passages)", flush=True)
            measure_at = min(docs, args.max_dense_docs)
            if measure_at not in dense:
                dense[measure_at] = run_child("dense", measure_at, args)  # it stops itself over the budget
                print(f"  dense {measure_at:,}: {_brief(dense[measure_at])}", flush=True)
            if measure_at < docs:
                dense[docs] = extrapolate_dense(dense, docs, retrain_schedule(loaded, docs))
                print(f"  dense {docs:,}: extrapolated {_brief(dense[docs])}", flush=True)
            for name, rows, key, keys in (
                ("routing", routing, "peak_rss_growth_MB", ["rss_growth_MB", "route.p50_ms", "route.p95_ms"]),
                (
                    "bm25",
                    bm25,
                    "peak_rss_growth_during_build_MB",
                    ["rss_growth_MB", "saved_MB", "build_s", "query.p50_ms", "query.p95_ms"],
                ),
            ):
                projected = project(rows, docs, key)
                if projected is not None and projected > budget_mb:
                    rows[docs] = extrapolate_linear(rows, docs, keys)
                    rows[docs]["skipped_because"] = f"projected peak {projected:,.0f} MB > {budget_mb:,.0f} MB budget"
                    print(f"  {name} {docs:,}: extrapolated {rows[docs]}", flush=True)
                else:
                    rows[docs] = run_child(name, docs, args)
                    print(f"  {name} {docs:,}: {_brief(rows[docs])}", flush=True)
    result = {
        "benchmark": "collection_scale",
        "command": "python benchmarks/collection_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "ram_GiB": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB, 1),
            "faiss": version("faiss-cpu"),
            "bm25s": bm25s.__version__,
            "faiss_threads_build": faiss.omp_get_max_threads(),
            "faiss_threads_one_query": 1,
            "load_average_at_start": load_at_start,
        },
        "memory_budget_GiB": args.memory_budget_gib,
        "units": {
            "MB": "10^6 bytes",
            "ms": "milliseconds of wall time, one query at a time",
            "s": "seconds of wall time",
            "rss_growth_MB": "RSS after minus before, in a fresh child process (after gc)",
            "peak_rss_growth_MB": "VmHWM minus RSS at the start of the measurement",
            "B": "bytes",
        },
        "docpipe_defaults": {
            "auto_flat_below": AUTO_FLAT_BELOW,
            "ivf_nprobe": IVF_NPROBE,
            "ivf_lists": "4 sqrt(N at training), at most N/39; k-means 10 iterations on 50 points a list",
            "retrain_growth": collection_index.RETRAIN_GROWTH,
            "pool_depth": collection_index.POOL_DEPTH,
        },
        "real_collection": real,
        "dense": {str(k): v for k, v in sorted(dense.items())},
        "routing": {str(k): v for k, v in sorted(routing.items())},
        "bm25_passages": {str(k): v for k, v in sorted(bm25.items())},
    }
    result["dense"] = {k: v for k, v in result["dense"].items()}
    try:
        result["capacity"] = capacity(result)
    except (KeyError, ValueError, ZeroDivisionError) as exc:
        result["capacity"] = {"error": repr(exc)}
    result["runtime_s"] = round(time.perf_counter() - started, 1)
    result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report(result, args.sizes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


def _brief(row: dict) -> str:
    keep = ("index_type", "vectors", "build_s", "rss_growth_MB", "serialized_MB", "p50_ms", "p95_ms", "recall_at_10")
    parts = {k: row[k] for k in keep if k in row}
    for key in ("route", "query", "failed", "aborted"):
        if key in row:
            parts[key] = row[key]
    return json.dumps(parts)


def _fmt(row: dict, key: str, spec: str) -> str:
    """Returns row[key] formatted; a dotted key reads nested values (or an extrapolated row's flat copy)."""
    node: Any = row.get(key, row)
    if node is row:
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
    return format(node, spec) if isinstance(node, int | float) and not isinstance(node, bool) else "-"


def report(result: dict, sizes: list[int]) -> None:
    print(
        f"\n{'docs':>8} {'type':>9} {'vectors':>10} {'build s':>8} {'MB':>8} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'rec@10':>6} {'route ms':>8} {'bm25 ms':>8} {'bm25 MB':>8}  measured?"
    )
    for docs in sizes:
        d = result["dense"].get(str(docs), {})
        r = result["routing"].get(str(docs), {})
        b = result["bm25_passages"].get(str(docs), {})
        flags = "".join(
            f"{n}:{'m' if row.get('measured') else 'x'} " for n, row in (("dense", d), ("route", r), ("bm25", b))
        )
        print(
            f"{docs:>8,} {d.get('index_type', '-'):>9} {_fmt(d, 'vectors', ',d'):>10} {_fmt(d, 'build_s', '.1f'):>8} "
            f"{_fmt(d, 'rss_growth_MB', ',.0f'):>8} {_fmt(d, 'p50_ms', '.2f'):>7} {_fmt(d, 'p95_ms', '.2f'):>7} "
            f"{_fmt(d, 'recall_at_10', '.3f'):>6} {_fmt(r, 'route.p50_ms', '.1f'):>8} "
            f"{_fmt(b, 'query.p50_ms', '.1f'):>8} {_fmt(b, 'rss_growth_MB', ',.0f'):>8}  {flags}"
        )
    cap = result.get("capacity", {})
    if "arithmetic" in cap:
        print(f"\ncapacity: {cap['arithmetic']}")
    print(f"whole run {result['runtime_s']} s")


if __name__ == "__main__":
    sys.exit(main())
