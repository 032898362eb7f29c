"""The rows a review grid's Ray pipeline passes between its stages (`cell_row`) and the pipeline each worker
process answers with (`worker_pipeline`): shared by `docpipe.review.ray_grid` and `docpipe.review.ray_llm`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docpipe.cells import Cell
    from docpipe.settings import Settings

__all__ = ["cell_row", "worker_pipeline"]


@functools.lru_cache(maxsize=2)
def worker_pipeline(factory: Callable[[Settings], Any], settings_json: str) -> Any:
    """One pipeline per worker process, on the shared store: the driver's own class (`DocPipe`, handed over by
    reference), so a worker answers with the same object the local executor uses."""
    from docpipe.settings import Settings

    return factory(Settings.model_validate_json(settings_json))


def cell_row(r: int, c: int, kind: str, *, cell: Cell | None = None, **extra: Any) -> dict[str, Any]:
    """Returns one row of the grid's Ray pipeline: cell (r, c) as `kind` (``cell`` finished, ``pending`` for
    the engine, ``computed`` by it), with what the stage that made it hands on."""
    return {
        "r": r,
        "c": c,
        "kind": kind,
        "cell": json.dumps(cell.to_dict()) if cell is not None else "",
        "key": extra.get("key", ""),
        "payload": extra.get("payload", b""),
        "row_error": extra.get("row_error", ""),
        "writes": json.dumps(extra.get("writes", [])),
        "tokens": json.dumps(extra.get("tokens", {})),
        "doc_id": extra.get("doc_id", ""),
    }
