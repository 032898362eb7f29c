"""Key-term evaluation on a folder in cuad-dev or cuad-collection-dev format (manifest.csv, pdf/ and terms.jsonl,
CUAD's expert key-term answers per contract): `docpipe eval-terms`.

The contracts the manifest lists are added to a collection, `DocPipe.terms` reads the collection's key terms
into a review grid, and each grid row (found by its document id, the row of a file named as the manifest
names it) is scored against its terms.jsonl record by the rules of `docpipe.eval.terms_score`, field by field:
agreement, effective and expiration date, renewal term, notice period (to terminate renewal), governing law
and parties. The naive anchor (`docpipe.eval.terms_anchor`) is scored the same way in the same run, on the same
extracted text (`Document.text`). The report gives each field's figures, the anchor's, the targets and whether
each is met, the misses for whoever tunes the readers, and the seconds the terms step took per contract.

Cells are read without the cell cache, so that the figures and the timings are those of the readers as they
are. A contract that could not be added (its reason is in ``ingest.failed``) counts as giving no value.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import InputError
from docpipe.eval.room import add_room, manifest_files, percentiles
from docpipe.eval.terms_anchor import ANCHOR_METHOD, anchor_terms
from docpipe.eval.terms_score import FIELDS, Given, score_contracts

if TYPE_CHECKING:
    from docpipe.collection.handle import Collection
    from docpipe.pipeline import DocPipe
    from docpipe.review.grid import ReviewGrid
    from docpipe.review.run import ReviewProgress

__all__ = [
    "TARGETS",
    "evaluate_terms",
    "format_terms_report",
    "grid_values",
    "load_terms",
    "row_seconds",
    "terms_report",
]

logger = logging.getLogger(__name__)

#: The accuracy each field should reach (parties: the mean F1), and the share of contracts without a gold answer
#: where no value should be given, on every field.
TARGETS: dict[str, float] = {
    "agreement_date": 0.90,
    "effective_date": 0.85,
    "expiration_date": 0.70,
    "renewal_term": 0.75,
    "notice_period": 0.80,
    "governing_law": 0.95,
    "parties": 0.85,
}
NONE_WHEN_ABSENT_TARGET = 0.80
_NEEDS = "a folder in cuad-collection-dev format (manifest.csv, pdf/ and terms.jsonl)"


def load_terms(folder: Path) -> list[dict[str, Any]]:
    """Returns the records of the folder's terms.jsonl, in the manifest's order; an `InputError` says what the
    folder needs when a file is missing, names the file and line of a line that is not a record, and names a
    record whose contract the manifest does not list."""
    path = folder / "terms.jsonl"
    if not path.is_file():
        raise InputError(f"{folder} has no terms.jsonl: point eval-terms at {_NEEDS}", path=str(folder))
    files = manifest_files(folder)
    if files is None:
        raise InputError(f"{folder} has no manifest.csv: point eval-terms at {_NEEDS}", path=str(folder))
    records: dict[str, dict[str, Any]] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get("file"), str):
                    raise ValueError('not an object with a "file"')
            except ValueError as exc:
                raise InputError(
                    f"{path}:{number} is not a key-terms record ({exc}): each line is one contract's JSON object "
                    'with "file" and its key terms',
                    path=str(path),
                ) from exc
            if record["file"] not in files:
                raise InputError(
                    f"{path}:{number} names {record['file']}, which manifest.csv does not list", path=str(path)
                )
            records[record["file"]] = record
    return [records[f] for f in files if f in records]


def evaluate_terms(
    dp: DocPipe,
    folder: Path,
    *,
    collection: str = "eval-terms",
    limit: int | None = None,
    misses: int = 0,
    workers: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Returns docpipe's and the anchor's figures per field, the targets met, up to `misses` misses per field
    and the terms step's seconds (module docstring), after adding the folder's contracts (the first `limit`
    with `limit`) to `collection` (documents already stored are not ingested again)."""
    folder = Path(folder)
    records = load_terms(folder)
    if limit:
        records = records[:limit]
    if not records:
        raise InputError(f"{folder / 'terms.jsonl'} has no records: nothing to evaluate", path=str(folder))
    started = time.perf_counter()
    files = [r["file"] for r in records]
    added = add_room(dp, folder, files, collection=collection, workers=workers, progress=progress)
    ids = list(dict.fromkeys(added.doc_of[f] for f in files if f in added.doc_of))
    if not ids:
        reasons = "; ".join(f"{name}: {reason}" for name, reason in added.report.failed[:3])
        raise InputError(f"none of the {len(files)} contracts could be added to collection {collection}: {reasons}")
    coll = added.collection
    grid, seconds = _read_terms(dp, coll, ids, progress=progress)
    given = grid_values(grid, [added.doc_of.get(f, "") for f in files])
    texts = {doc_id: coll.document(doc_id).text for doc_id in ids}
    anchored: list[dict[str, Given | None]] = []
    for record in records:
        doc_id = added.doc_of.get(record["file"])
        anchored.append({f: Given(v) for f, v in anchor_terms(texts[doc_id]).items()} if doc_id else {})
    return {
        **terms_report(records, given, anchored, seconds=seconds, misses=misses),
        "ingest": added.ingest_summary(),
        "settings": {"extractor": dp.settings.extraction.extractor, "fingerprint": dp.fingerprint},
        "seconds": round(time.perf_counter() - started, 1),
    }


def terms_report(
    records: list[dict[str, Any]],
    given: list[dict[str, Given | None]],
    anchored: list[dict[str, Given | None]],
    *,
    seconds: list[float],
    misses: int = 0,
) -> dict[str, Any]:
    """Returns the scored part of the report: docpipe's figures per field (`given`, one dict per record), the
    anchor's (`anchored`), the targets and whether each is met, up to `misses` misses per field, and the
    seconds of the terms step (`seconds`, one per contract)."""
    figures, missed = score_contracts(records, given, misses=misses)
    anchor_figures, _ = score_contracts(records, anchored)
    return {
        "contracts": len(records),
        "fields": figures,
        "anchor": {
            "method": ANCHOR_METHOD,
            "fields": {
                f: {k: v for k, v in figures_of.items() if "present_only" not in k}
                for f, figures_of in anchor_figures.items()
            },
        },
        "targets": _targets(figures),
        "misses": missed,
        "terms_seconds": {"total": round(sum(seconds), 2), "per_contract": percentiles(seconds)},
    }


def _read_terms(dp: DocPipe, coll: Collection, ids: list[str], *, progress: bool) -> tuple[ReviewGrid, list[float]]:
    """Returns the key-terms grid of the documents `ids` and each row's seconds (`row_seconds`). The
    collection is read whole when it holds just these documents, else the documents one by one."""
    docs: Any = coll if {m.id for m in coll.documents} == set(ids) else [coll.document(i) for i in ids]
    finished: dict[int, float] = {}
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit="cell", desc="key terms", leave=False)

    def tell(event: ReviewProgress) -> None:
        if event.row >= 0:
            finished[event.row] = time.perf_counter()
        if bar is not None:
            bar.total = event.total
            bar.update(event.done - bar.n)

    started = time.perf_counter()
    grid = dp.terms(docs, use_cache=False, progress=tell)
    total = time.perf_counter() - started
    if bar is not None:
        bar.close()
    return grid, row_seconds(started, finished, len(grid.rows), total)


def row_seconds(started: float, finished: dict[int, float], rows: int, total: float) -> list[float]:
    """Returns the seconds of each of `rows` rows: the time from the row finished before it (or the start) to
    its own last cell, rows taken in the order they finished, from the progress events' times (`finished`:
    row -> when its last cell came). Without an event for every row, each row gets the mean."""
    if rows and len(finished) == rows:
        ends = sorted(finished.values())
        return [end - before for before, end in zip([started, *ends], ends)]
    return [total / rows] * rows if rows else []


def grid_values(grid: ReviewGrid, doc_ids: list[str]) -> list[dict[str, Given | None]]:
    """Returns, for each contract (its document id; "" when it could not be added), the value its grid row
    gives for each field (`docpipe.eval.terms_score.FIELDS`, found by the column's `term`), None for none."""
    row_of = {row.document_id: r for r, row in enumerate(grid.rows) if row.document_id}
    column_of = {column.term: c for c, column in enumerate(grid.columns) if column.term}
    absent = sorted(set(FIELDS) - set(column_of))
    if absent:
        logger.warning("the key-terms grid has no column for %s: scored as giving no value", ", ".join(absent))
    out: list[dict[str, Given | None]] = []
    for doc_id in doc_ids:
        r = row_of.get(doc_id)
        values: dict[str, Given | None] = {}
        for field in FIELDS:
            c = column_of.get(field)
            cell = grid.cells[r][c] if r is not None and c is not None else None
            values[field] = Given(cell.value.normalized, cell.status) if cell and cell.value else None
        out.append(values)
    return out


def _targets(figures: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Returns each field's targets and whether they are met (None: not measured, no contract to measure on)."""

    def met(value: float | None, target: float) -> bool | None:
        return None if value is None else value >= target

    return {
        field: {
            "accuracy": {"target": target, "met": met(figures[field]["accuracy"], target)},
            "none_when_absent": {
                "target": NONE_WHEN_ABSENT_TARGET,
                "met": met(figures[field]["none_when_absent"], NONE_WHEN_ABSENT_TARGET),
            },
        }
        for field, target in TARGETS.items()
    }


def format_terms_report(report: dict[str, Any]) -> str:
    """Returns the report as a plain-text table for a terminal: docpipe beside the anchor, field by field, the
    targets, then the misses and the seconds."""

    def cell(value: float | None, width: int = 9) -> str:
        return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"

    def mark(met: bool | None) -> str:
        return {True: "met", False: "MISSED", None: "n/a"}[met]

    lines = [
        f"Key terms: {report['contracts']} contracts, docpipe beside the naive anchor",
        "",
        f"{'':<17}{'accuracy (parties: mean F1)':<43}| {'none when CUAD has none':<34}|",
        f"{'field':<17}{'n gold':>7}{'docpipe':>9}{'present':>9}{'anchor':>9}{'target':>8} |{'n absent':>9}"
        f"{'docpipe':>9}{'present':>9}{'anchor':>8} | targets",
    ]
    for field, ours in report["fields"].items():
        anchor = report["anchor"]["fields"][field]
        target = report["targets"][field]
        lines.append(
            f"{field:<17}{ours['n_gold']:>7}{cell(ours['accuracy'])}{cell(ours['accuracy_present_only'])}"
            f"{cell(anchor['accuracy'])}{target['accuracy']['target']:>8.2f} |{ours['n_absent']:>9}"
            f"{cell(ours['none_when_absent'])}{cell(ours['none_when_absent_present_only'])}"
            f"{cell(anchor['none_when_absent'], 8)} | {mark(target['accuracy']['met'])}, "
            f"{mark(target['none_when_absent']['met'])}"
        )
    lines.append(
        "\npresent: only the cells shown as present count as giving a value; the none-when-absent target is "
        f"{NONE_WHEN_ABSENT_TARGET:.2f} on every field"
    )
    for field, rows in report["misses"].items():
        lines.append(f"\nmisses, {field}:")
        for row in rows:
            status = f" [{row['status']}]" if row["status"] not in (None, "present") else ""
            lines.append(
                f"  {row['contract_id'][:60]}: gold {json.dumps(row['gold'], ensure_ascii=False)}, "
                f"docpipe {json.dumps(row['predicted'], ensure_ascii=False)}{status}"
            )
    speed = report["terms_seconds"]
    per = speed["per_contract"]
    if per:
        lines.append(
            f"\nkey terms per contract: p50 {per['p50']:.2f} s, p95 {per['p95']:.2f} s; {speed['total']:.1f} s in all"
        )
    failed = report["ingest"]["failed"]
    if failed:
        lines.append(f"{len(failed)} contracts could not be added (no value given): {failed[0]['file']}, ...")
    lines.append(f"{report['seconds']} s")
    return "\n".join(lines)
