"""A data room on disk as the evaluations over a collection read it (`docpipe eval-collection`,
`docpipe eval-terms`): the contracts its ``manifest.csv`` lists, added to a collection of the store, and the
percentiles their timings are reported with."""

from __future__ import annotations

import csv
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from docpipe.collection.handle import AddProgress, Collection
    from docpipe.collection.reports import AddReport
    from docpipe.pipeline import DocPipe

__all__ = ["AddedRoom", "add_room", "manifest_files", "percentiles"]


def manifest_files(folder: Path) -> list[str] | None:
    """Returns the ``file`` column of the folder's manifest.csv (paths relative to `folder`, e.g.
    ``pdf/x.pdf``), in its order; None when the folder has no manifest.csv."""
    manifest = folder / "manifest.csv"
    if not manifest.is_file():
        return None
    with manifest.open(encoding="utf-8", newline="") as handle:
        return [row["file"] for row in csv.DictReader(handle)]


@dataclass(frozen=True, slots=True)
class AddedRoom:
    """The contracts of a data room in a collection: `doc_of` maps each file (as the manifest names it) that
    was added to its document id; the files that failed are in `report.failed` with the reason."""

    collection: Collection
    report: AddReport
    doc_of: dict[str, str]
    seconds: float

    def ingest_summary(self) -> dict[str, Any]:
        """Returns what a report says of the ingestion: the collection, the failures, the pages extracted,
        the seconds and the documents the collection holds."""
        summary = {**self.report.to_dict(), "seconds": round(self.seconds, 1)}
        summary.pop("added")
        summary.pop("present")
        summary["documents"] = len(self.collection.documents)
        return summary


def add_room(
    dp: DocPipe,
    folder: Path,
    files: list[str],
    *,
    collection: str,
    workers: int | None = None,
    progress: bool = False,
) -> AddedRoom:
    """Adds `files` (relative to `folder`) to the collection `collection` (documents already stored are not
    ingested again), with a progress bar on stderr when `progress`; a file that fails does not stop the others."""
    started = time.perf_counter()
    coll = dp.collection(collection)
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(files), unit="contract", desc="collection", leave=False)

    def tell(event: AddProgress) -> None:
        if bar is not None and event.kind == "file":
            bar.update(1)

    report = coll.add([folder / f for f in files], workers=workers, progress=tell)
    if bar is not None:
        bar.close()
    seconds = time.perf_counter() - started
    by_name = {m.name: m for m in coll.documents}
    doc_of = {f: by_name[Path(f).name].id for f in files if Path(f).name in by_name}
    return AddedRoom(coll, report, doc_of, seconds)


def percentiles(values: list[float]) -> dict[str, float]:
    """Returns the median, the 95th percentile (nearest rank) and the mean of `values`; {} for none."""
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 4),
        "p95": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 4),
        "mean": round(statistics.fmean(ordered), 4),
    }
