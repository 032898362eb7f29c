"""A collection's ingestion as a Ray Data pipeline (``Collection.add(..., executor="ray")``).

    files -> read + extract + section (tasks, one CPU each) -> embed + store (actors, one embedder each) -> driver

Each stage runs the local executor's own functions (`docpipe.ingest.build`): `read_source`, `extract` (the
same sandboxed worker with the same time and memory bounds), `prepare_index`, the same `EMBED_BATCH` embedding
and `finish_index`, so the store ends up holding the same documents, sections, passages and vectors, written by
whichever node did the work (the store is content-addressed and must be shared: `cluster.check_shared_store`).
The driver only records what each file became, as rows arrive: members are added as they finish, so a run that
stops (a node lost, Ctrl-C) and is run again resumes. A file that fails is reported with its reason; a task that
Ray could not finish even after its retries fails its files with Ray's reason, never silently.
"""

from __future__ import annotations

import functools
import logging
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.access.gate import check_access
from docpipe.access.store_key import store_sealer
from docpipe.collection.cluster import check_shared_store, connect
from docpipe.collection.reports import AddProgress
from docpipe.errors import DocpipeError
from docpipe.ingest import build
from docpipe.storage.store import Store, sha256_hex

if TYPE_CHECKING:
    import pandas as pd

    from docpipe.embed.base import Embedder
    from docpipe.ingest.build import Source
    from docpipe.settings import Settings
    from docpipe.types import Document

__all__ = ["ingest_on_ray"]

logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def _worker_settings(settings_json: str) -> Settings:
    from docpipe.settings import Settings

    return Settings.model_validate_json(settings_json)


@functools.lru_cache(maxsize=4)
def _worker_embedder(settings_json: str) -> Embedder:
    """One embedder per worker process: its tokenizer cuts passages, its weights (in the actors) embed them."""
    from docpipe.embed.base import load_embedder

    return load_embedder(_worker_settings(settings_json).embedding)


def _extract(
    row: dict[str, Any], *, settings_json: str, fingerprint: str, password: str | None, known: frozenset[str]
) -> dict[str, Any]:
    """Stage 1 (a Ray task): reads one file from shared storage, extracts it (or finds it stored) and cuts its
    sections and passages. Never raises: a failure becomes the row's error."""
    from docpipe.ingest.slots import ExtractionSlots

    out = {"i": row["i"], "label": row["label"], "kind": "failed", "doc_id": "", "error": "", "payload": b""}
    try:
        settings = _worker_settings(settings_json)
        store = Store(Path(row["store"]), sealer=store_sealer(settings))
        source: Source = row["data"] if row["data"] else row["path"]
        data, label = build.read_source(source, row["label"])
        out["label"] = label
        doc_id = out["doc_id"] = sha256_hex(data)
        if doc_id in known:
            out["kind"] = "skip"
            return out
        slots = ExtractionSlots(1, wait_s=settings.extraction.queue_wait_s)  # this task's own: one at a time
        stored = build.stored_parts(doc_id, store=store, fingerprint=fingerprint, vectors=False)
        if stored is not None:
            check_access(stored[0], password, data, name=label, slots=slots, settings=settings.extraction)
            out["kind"] = "ready"
            return out
        quiet = lambda _stage: None  # noqa: E731
        doc = build.extract(
            store, doc_id, data, label, password, settings=settings.extraction, fingerprint=fingerprint, progress=quiet
        )
        check_access(doc, password, data, name=label, slots=slots, settings=settings.extraction)
        prepared = build.prepare_index(doc, embedder=_worker_embedder(settings_json), settings=settings, progress=quiet)
        out["kind"], out["payload"] = "prepared", pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL)
    except DocpipeError as exc:
        out["error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - one file's surprise must not lose the others
        logger.exception("ingesting %s failed", row["label"])
        out["error"] = f"unexpected error ({type(exc).__name__}: {exc})"
    return out


class _Embed:
    """Stage 2 (a Ray actor): embeds the passages of a batch of prepared documents, `EMBED_BATCH` texts per
    call across documents as the local executor does, and stores each document's index."""

    def __init__(self, settings_json: str, fingerprint: str, store_root: str) -> None:
        self.settings_json = settings_json
        self.settings = _worker_settings(settings_json)
        self.embedder = _worker_embedder(settings_json)
        self.fingerprint = fingerprint
        self.store = Store(Path(store_root), sealer=store_sealer(self.settings))

    def __call__(self, batch: pd.DataFrame) -> pd.DataFrame:
        todo = [i for i, kind in enumerate(batch["kind"]) if kind == "prepared"]
        prepared = {i: pickle.loads(batch["payload"].iloc[i]) for i in todo}
        kinds, errors = list(batch["kind"]), list(batch["error"])
        if todo:
            texts = [t for i in todo for t in prepared[i].to_embed]
            try:
                vectors = build.embed_batches(self.embedder, texts)
            except Exception as exc:  # noqa: BLE001 - the batch's files fail with the reason; others go on
                for i in todo:
                    kinds[i], errors[i] = "failed", f"embedding failed ({type(exc).__name__}: {exc})"
                todo = []
            row = 0
            for i in todo:
                count = len(prepared[i].to_embed)
                try:
                    build.finish_index(
                        prepared[i],
                        vectors[row : row + count],
                        store=self.store,
                        embedder=self.embedder,
                        settings=self.settings,
                        fingerprint=self.fingerprint,
                    )
                    kinds[i] = "indexed"
                except DocpipeError as exc:
                    kinds[i], errors[i] = "failed", str(exc)
                row += count
        out = batch.drop(columns=["payload"])
        out["kind"], out["error"] = kinds, errors
        return out


def ingest_on_ray(
    files: Sequence[tuple[Source, str]],
    *,
    settings: Settings,
    fingerprint: str,
    password: str | None,
    known: set[str],
    on_done: Callable[[str, Document | None, str, bool], None],
    on_skip: Callable[[str, str], None],
    progress: Callable[[AddProgress], None] | None = None,
) -> None:
    """Ingests `files` on Ray (see the module docstring) with the callbacks of the local executor:
    `on_done(name, document or None, error, extracted)` for every file as its row reaches the driver,
    `on_skip(name, id)` for files whose id is in `known`."""
    tell = progress or (lambda _event: None)
    root = settings.store_root().expanduser().resolve()
    ray = connect(settings.ray.address, num_cpus=settings.ray.num_cpus)
    check_shared_store(ray, root)
    store = Store(root, sealer=store_sealer(settings))
    settings_json = settings.model_dump_json()  # without the store key: each worker reads its own
    items: list[dict[str, Any]] = []
    for i, (source, label) in enumerate(files):
        items.append(
            {
                "i": i,
                "path": str(Path(source).expanduser().resolve()) if isinstance(source, (str, Path)) else "",
                "data": b"" if isinstance(source, (str, Path)) else bytes(source),
                "label": label,
                "store": str(root),
            }
        )
    if not items:
        return
    import ray.data

    dataset = (
        ray.data.from_items(items, override_num_blocks=len(items))
        .map(
            _extract,
            fn_kwargs={
                "settings_json": settings_json,
                "fingerprint": fingerprint,
                "password": password,
                "known": frozenset(known),
            },
            num_cpus=1,
            # What one extraction may take (its worker's bound): Ray places no more of them on a node than its
            # memory holds. (Also keeps this stage a task pool of its own, not fused into the embedding actors.)
            memory=settings.extraction.memory_limit_mb * 2**20,
        )
        .map_batches(
            _Embed,
            fn_constructor_kwargs={"settings_json": settings_json, "fingerprint": fingerprint, "store_root": str(root)},
            batch_size=settings.ray.embed_batch_documents,
            batch_format="pandas",
            compute=ray.data.ActorPoolStrategy(size=settings.ray.embed_actors),
            num_cpus=settings.ray.embed_cpus,
        )
    )
    total, finished = len(items), 0
    reported: set[int] = set()
    try:
        for row in dataset.iter_rows():
            label, kind, doc_id, error = row["label"], row["kind"], row["doc_id"], row["error"]
            reported.add(int(row["i"]))
            finished += 1
            if kind == "skip":
                on_skip(label, doc_id)
                tell(AddProgress("file", finished, total, label))
                continue
            doc = None
            if kind in ("ready", "indexed"):
                stored = build.stored_parts(doc_id, store=store, fingerprint=fingerprint, vectors=False)
                if stored is None:
                    kind, error = "failed", "its index was written on a Ray node but is not in the store here"
                else:
                    doc = stored[0]
            on_done(label, doc if kind != "failed" else None, error if kind == "failed" else "", kind == "indexed")
            tell(AddProgress("file", finished, total, label, error if kind == "failed" else ""))
    except Exception as exc:  # Ray gave up on a task (its retries spent) or the cluster went away
        reason = f"the Ray run stopped before this file was done ({type(exc).__name__}: {exc}); run it again to resume"
        logger.warning("%s", reason)
        for item in items:
            if item["i"] not in reported:
                finished += 1
                on_done(item["label"], None, reason, False)
                tell(AddProgress("file", finished, total, item["label"], reason))
