"""A collection's review grid as a Ray Data pipeline (``dp.review(collection, ..., executor="ray")``).

    members -> plan (tasks: open the index, retrieve each column's sections, build the requests, look the cells
               up in the cell cache; offline cells answered here)
            -> generate (actors, each holding an engine: docpipe's own engine, or ray.data.llm's vLLM processor on
               GPUs, see `docpipe.review.ray_llm`), then the reply parsed and its quotes verified
            -> driver (cells cached as they arrive, progress, the grid and its manifest)

Every step calls the local executor's functions (`docpipe.review.run`: `row_contexts`, `row_requests`,
`model_cell`, `docpipe.review.offline.offline_row`, `finish_grid`) on the same `DocPipe` settings, so a cell has the same prompt, cache
key and parsing wherever it ran, and a grid run on Ray and then locally (or the reverse) takes every finished cell
from the cache. Only the driver writes the cell cache; workers read it, so on a cluster of several nodes the cache
must be one they all reach (``cache_url`` redis://...), which is checked at start-up.
"""

from __future__ import annotations

import functools
import json
import logging
import pickle
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from docpipe.answer.core import cache_call, context_budget
from docpipe.collection.cluster import check_shared_store, connect
from docpipe.errors import ConfigError, DocpipeError
from docpipe.review.grid import Cell, Column, ReviewGrid, Row
from docpipe.review.offline import offline_row
from docpipe.review.ray_rows import cell_row, worker_pipeline
from docpipe.review.review import with_marks
from docpipe.review.run import (
    EngineIdentity,
    PendingCell,
    ReviewCancelled,
    ReviewProgress,
    _now,
    _shared_budget,
    finish_grid,
    model_cell,
    resolve_layout,
    row_contexts,
    row_requests,
)

if TYPE_CHECKING:
    import pandas as pd

    from docpipe.collection.handle import Collection
    from docpipe.settings import Settings

__all__ = ["engine_identity", "review_on_ray"]

logger = logging.getLogger(__name__)

# What planning one document holds (its index: vectors, BM25, sections): reserved per task, so Ray places no
# more plans on a node than fit (and planning stays a task pool of its own, not fused into the engine actors).
_PLAN_MEMORY = 512 << 20


def engine_identity(settings: Settings) -> EngineIdentity | None:
    """Returns the name, model and context window the grid's engines will have, without loading one (None: no
    language model, the offline checklist finding), as `docpipe.engine.load_engine` would choose them."""
    from docpipe.engine import resolve_backend

    engine = settings.engine
    # On the cluster, GPUs are the replicas' (ray.num_gpus_per_replica), not the driver's.
    backend = resolve_backend(engine, gpu=settings.ray.num_gpus_per_replica > 0)
    if backend == "extractive":
        return None
    if backend == "echo":
        return EngineIdentity("echo", "echo")
    if backend == "openai":
        from docpipe.engine import load_engine

        remote = load_engine(engine)  # a client only: asks the server for its model and window
        assert remote is not None
        return EngineIdentity(remote.name, remote.model, getattr(remote, "max_model_len", None))
    from docpipe.engine.vllm import engine_args, settings_args

    args = engine_args(engine.model, **settings_args(engine))
    return EngineIdentity("vllm", engine.model, int(args["max_model_len"]))


class _ReadOnlyCache:
    """The cell cache as a worker sees it: lookups go to the real cache, writes are handed to the driver."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.writes: list[dict[str, Any]] = []

    def get(self, key: str) -> Any:
        return self._real.get(key)

    def put(self, key: str, value: dict[str, Any], *, document_id: str, matter: str | None) -> None:
        self.writes.append({"key": key, "value": value, "document_id": document_id, "matter": matter})


def _plan(row: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    """Stage 1 (a Ray task per document): its cells, finished (cached, offline, failed) or as requests. Never
    raises: a document's surprise fails its row with the reason, and the other rows go on."""
    try:
        return _plan_row(row, **kw)
    except Exception as exc:  # noqa: BLE001 - one row's surprise must not stop the grid
        logger.exception("planning the row of %s failed", row["name"])
        note = f"unexpected error ({type(exc).__name__}: {exc})"
        cells = range(len(kw["columns"]))
        return [cell_row(int(row["r"]), c, "cell", cell=Cell("failed", note=note), row_error=note) for c in cells]


def _plan_row(row: dict[str, Any], **kw: Any) -> list[dict[str, Any]]:
    r = int(row["r"])
    columns: list[Column] = kw["columns"]
    dp = worker_pipeline(kw["factory"], kw["settings_json"])
    settings = dp.settings
    try:
        doc = dp.document(row["doc_id"], password=kw["password"], name=row["name"], matter=kw["matter"])
        if doc is None:
            raise ConfigError(
                f"{row['name']} ({row['doc_id'][:12]}) is no longer in the store: add the file to the collection again"
            )
        index = dp.index(doc, password=kw["password"])
    except DocpipeError as exc:
        return [
            cell_row(r, c, "cell", cell=Cell("failed", note=str(exc)), row_error=str(exc)) for c in range(len(columns))
        ]
    reader = _ReadOnlyCache(dp.cache) if kw["use_cache"] else None
    opener = (lambda: reader) if reader is not None else None
    contexts = row_contexts(index, columns, kw["vectors"], settings=settings, budget=kw["per_cell_budget"])
    identity: EngineIdentity | None = kw["identity"]
    out: list[dict[str, Any]] = []
    if identity is None:
        found: list[tuple[int, Cell]] = []
        work = functools.partial(
            offline_row,
            r,
            index,
            columns,
            contexts,
            kw["vectors"],
            dp.embedder,
            settings,
            dp.fingerprint,
            opener,  # type: ignore[arg-type]
            lambda _r, c, cell, _name: found.append((c, cell)),
        )
        dp.answering.offline(index, work)  # no engine: the grid planned offline cells
        writes = reader.writes if reader is not None else []
        return [cell_row(r, c, "cell", cell=cell, writes=writes if i == 0 else []) for i, (c, cell) in enumerate(found)]
    for item in row_requests(
        r, index, columns, contexts, engine=identity, settings=settings, fingerprint=dp.fingerprint,
        mode=kw["mode"], layout=kw["layout"], shared_budget=kw["shared_budget"],
    ):  # fmt: skip
        stored = cache_call(opener, "get", item.key) if opener is not None else None  # type: ignore[arg-type]
        if stored is not None:
            cell = Cell.from_dict(stored)
            cell.cached = True
            out.append(cell_row(r, item.column, "cell", cell=cell))
            continue
        payload = pickle.dumps((item.question, item.request, item.hits), protocol=pickle.HIGHEST_PROTOCOL)
        out.append(cell_row(r, item.column, "pending", key=item.key, payload=payload, doc_id=doc.id))
    return out


class _Generate:
    """Stage 2 (a Ray actor holding one engine): answers a batch of pending cells in one engine call and turns
    each reply into a cell (quotes verified against the sections the cell was given)."""

    def __init__(
        self,
        factory: Callable[[Settings], Any],
        settings_json: str,
        identity: EngineIdentity,
        names: dict[str, str],
        matter: str | None,
    ) -> None:
        self.dp = worker_pipeline(factory, settings_json)
        self.engine = self.dp.engine
        if self.engine is None or (self.engine.name, self.engine.model) != (identity.name, identity.model):
            found = f"{self.engine.name} {self.engine.model}" if self.engine else "no engine"
            raise ConfigError(
                f"a Ray worker loaded {found}, not the {identity.name} {identity.model} the grid planned for"
            )
        self.identity = identity
        self.names = names
        self.matter = matter

    @functools.lru_cache(maxsize=64)  # noqa: B019 - one actor, a bounded set of documents per batch
    def _doc(self, doc_id: str) -> Any:
        return self.dp.document(doc_id, name=self.names.get(doc_id), matter=self.matter, authorized=True)

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        rows = batch.to_dict("records")
        pending = [i for i, row in enumerate(rows) if row["kind"] == "pending"]
        items = []
        for i in pending:
            question, request, hits = pickle.loads(rows[i]["payload"])
            doc = self._doc(rows[i]["doc_id"])
            items.append(
                PendingCell(int(rows[i]["r"]), int(rows[i]["c"]), question, request, rows[i]["key"], hits, doc)
            )
        if items:
            try:
                results = self.engine.generate([item.request for item in items])
            except DocpipeError as exc:  # the engine refused the batch: its cells fail (not cached), others go on
                results = None
                for i, item in zip(pending, items):
                    rows[i] |= cell_row(
                        item.row, item.column, "cell", cell=Cell("failed", note=f"The engine failed: {exc}")
                    )
            for i, item, result in zip(pending, items, results or ()):
                cell = model_cell(item, result, engine=self.identity, fingerprint=self.dp.fingerprint)
                tokens = {
                    "prompt": result.prompt_tokens,
                    "completion": result.completion_tokens,
                    "cached": result.extra.get("cached_tokens"),
                }
                rows[i] |= cell_row(item.row, item.column, "computed", cell=cell, key=item.key, tokens=tokens)
        import pandas as pd

        out = pd.DataFrame(rows)
        out["payload"] = b""
        return out


def review_on_ray(
    dp: Any,
    coll: Collection,
    columns: list[Column],
    *,
    mode: str,
    layout: str | None,
    password: str | None,
    use_cache: bool,
    progress: Callable[[ReviewProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> ReviewGrid:
    """Returns the grid of the collection's members x `columns`, filled on Ray (see the module docstring)."""
    settings = dp.settings
    members = coll.documents
    rows = [Row(m.id, m.name) for m in members]
    ray = connect(settings.ray.address, num_cpus=settings.ray.num_cpus)
    root = settings.store_root().expanduser().resolve()
    nodes = check_shared_store(ray, root)
    if nodes > 1 and use_cache and not (settings.cache_url or "").startswith(("redis://", "rediss://")):
        raise ConfigError(
            f"a review on a Ray cluster of {nodes} nodes needs a cell cache every node reaches: set cache_url to a "
            "Redis server (DOCPIPE_CACHE_URL=redis://HOST:6379/0); the default SQLite cache is one machine's"
        )
    layout = resolve_layout(layout, settings, mode)
    identity = engine_identity(settings)
    started, created = time.perf_counter(), _now()
    vectors = dp.embedder.embed([c.query for c in columns])
    per_cell_budget = min(settings.analysis.budget_tokens, context_budget(settings, identity))
    settings_json = settings.model_dump_json()
    plan_kwargs = {
        "factory": type(dp),
        "settings_json": settings_json,
        "columns": columns,
        "vectors": vectors,
        "identity": identity,
        "mode": mode,
        "layout": layout,
        "per_cell_budget": per_cell_budget,
        "shared_budget": _shared_budget(settings, identity),
        "password": password,
        "matter": coll.matter,
        "use_cache": use_cache,
    }
    import ray.data

    dataset = ray.data.from_items(
        [{"r": r, "doc_id": m.id, "name": m.name} for r, m in enumerate(members)], override_num_blocks=len(members)
    ).flat_map(_plan, fn_kwargs=plan_kwargs, num_cpus=1, memory=_PLAN_MEMORY)
    if identity is not None:
        batch_size = settings.ray.batch_size or settings.review.batch_size or settings.engine.max_batch_size
        if identity.name == "vllm" and settings.ray.num_gpus_per_replica > 0:  # the replicas run vLLM on GPUs
            from docpipe.review.ray_llm import vllm_generation_stage

            dataset = vllm_generation_stage(
                dataset,
                settings,
                identity,
                factory=type(dp),
                batch_size=batch_size,
                mode=mode,
                names=_names(members),
                matter=coll.matter,
            )
        else:
            dataset = dataset.map_batches(
                _Generate,
                fn_constructor_kwargs={
                    "factory": type(dp),
                    "settings_json": settings_json,
                    "identity": identity,
                    "names": _names(members),
                    "matter": coll.matter,
                },
                batch_size=batch_size,
                batch_format="pandas",
                compute=ray.data.ActorPoolStrategy(size=settings.ray.replicas),
                num_cpus=1,
            )
    cells: list[list[Cell | None]] = [[None] * len(columns) for _ in rows]
    counts = {"done": 0, "cached": 0, "failed": 0}
    tokens = {"prompt": 0, "completion": 0}
    prefix_cached: list[int] = []
    total = len(rows) * len(columns)
    opener = (lambda: dp.cache) if use_cache else None  # the driver loads no engine: the workers do
    stopped = ""
    try:
        for row in _rows(dataset, cancel):
            _take(row, rows, cells, counts, tokens, prefix_cached, opener, coll.matter, total, progress)
    except ReviewCancelled:
        raise
    except Exception as exc:  # Ray gave up on a task (its retries spent) or the cluster went away
        stopped = f"The Ray run stopped before this cell was done ({type(exc).__name__}: {exc}); run the grid again to resume."
        logger.warning("%s", stopped)
    missing = [(r, c) for r in range(len(rows)) for c in range(len(columns)) if cells[r][c] is None]
    for r, c in missing:  # never silently empty: a cell Ray did not return is failed with the reason
        cells[r][c] = Cell(
            "failed", note=stopped or "The Ray run returned no result for this cell; run the grid again."
        )
    grid = finish_grid(
        rows,
        columns,
        cells,
        engine=identity,
        settings=settings,
        fingerprint=dp.fingerprint,
        mode=mode,
        layout=layout,
        tokens=tokens,
        prefix_cached=prefix_cached,
        started=started,
        created=created,
        collection=coll.name,
        matter=coll.matter,
    )
    return with_marks(grid, dp.store, coll.matter)


def _take(
    row: dict[str, Any],
    rows: list[Row],
    cells: list[list[Cell | None]],
    counts: dict[str, int],
    tokens: dict[str, int],
    prefix_cached: list[int],
    opener: Any,
    matter: str | None,
    total: int,
    progress: Callable[[ReviewProgress], None] | None,
) -> None:
    """Records one finished cell on the driver: cached (the driver is the cache's only writer), counted, told."""
    r, c = int(row["r"]), int(row["c"])
    cell = Cell.from_dict(json.loads(row["cell"]))
    if row["row_error"] and not rows[r].error:
        rows[r] = Row(rows[r].document_id, rows[r].name, error=row["row_error"])
    if opener is not None:
        for write in json.loads(row["writes"]):
            cache_call(
                opener, "put", write["key"], write["value"], document_id=write["document_id"], matter=write["matter"]
            )
        if row["kind"] == "computed" and cell.status != "failed":
            cache_call(opener, "put", row["key"], cell.to_dict(), document_id=rows[r].document_id, matter=matter)
    used = json.loads(row["tokens"])
    if used:
        tokens["prompt"] += int(used.get("prompt") or 0)
        tokens["completion"] += int(used.get("completion") or 0)
        if used.get("cached") is not None:
            prefix_cached.append(int(used["cached"]))
    cells[r][c] = cell
    counts["done"] += 1
    counts["cached"] += cell.cached
    counts["failed"] += cell.status == "failed"
    if progress is not None:
        progress(ReviewProgress(counts["done"], total, counts["cached"], counts["failed"], rows[r].name, r, c, cell))


def _names(members: list[Any]) -> dict[str, str]:
    return {m.id: m.name for m in members}


def _rows(dataset: Any, cancel: threading.Event | None) -> Iterator[dict[str, Any]]:
    """Yields the pipeline's rows as they finish; stops with `ReviewCancelled` when `cancel` is set (the cells
    already returned are cached; batches still running on the cluster are dropped)."""
    done = 0
    for row in dataset.iter_rows():
        done += 1
        yield row
        if cancel is not None and cancel.is_set():
            raise ReviewCancelled(f"review cancelled after {done} cells; run it again to resume from the cache")
