"""`docpipe eval-collection DIR --each`: "which contracts ...?" questions over a data room, asked of each contract
(`docpipe.review.each`) and answered from pooled passages, scored against CUAD's Yes/No labels (`terms.jsonl`).

For each of CUAD's 33 Yes/No categories one plain question, "Which contracts have <the clause>?", is asked of
the room both ways in one run:

- **each**: one review-grid column over every contract (all 33 columns in one grid); `found` are the contracts
  it lists as found, `to check` those it lists as candidates. Recall is the share of the contracts CUAD labels
  Yes that are in found or to check; precision the share of found that CUAD labels Yes.
- **pooled**: the same question answered from the best passages of a few contracts (`ask` with `each=False`);
  its contracts are those its citations name, scored the same way (recall over all, precision over them).

Offline the targets are recall >= 0.90 and the found list's precision >= 0.80 (issue 27). The overall figures
pool every (category, contract) pair; per category figures are listed beside them, with the share of pairs
listed (the reviewer's workload) and, for clause scores from 1 to 8, the recall and precision a list cut there
would have.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import InputError
from docpipe.eval.room import add_room, manifest_files

if TYPE_CHECKING:
    from docpipe.pipeline import DocPipe

__all__ = ["EACH_TARGETS", "each_questions", "evaluate_each", "format_each_report"]

EACH_TARGETS = {"recall": 0.90, "found_precision": 0.80}

# How a reviewer names the clause of each Yes/No category in a plain question.
_PLAIN = {
    "Rofr/Rofo/Rofn": "a right of first refusal, first offer or first negotiation",
    "Ip Ownership Assignment": "an assignment of intellectual property ownership",
    "Joint Ip Ownership": "joint ownership of intellectual property",
    "Unlimited/All-You-Can-Eat-License": "an unlimited, all-you-can-eat license",
    "Irrevocable Or Perpetual License": "an irrevocable or perpetual license",
    "Affiliate License-Licensor": "a license granted by the licensor's affiliates",
    "Affiliate License-Licensee": "a license that extends to the licensee's affiliates",
    "Revenue/Profit Sharing": "revenue or profit sharing",
    "No-Solicit Of Customers": "a no-solicitation of customers clause",
    "No-Solicit Of Employees": "a no-solicitation of employees clause",
    "Competitive Restriction Exception": "an exception to a competitive restriction",
    "Post-Termination Services": "post-termination services",
    "Covenant Not To Sue": "a covenant not to sue",
    "Third Party Beneficiary": "a third-party beneficiary clause",
    "Uncapped Liability": "uncapped liability",
    "Cap On Liability": "a cap on liability",
    "Warranty Duration": "a warranty duration",
}


def each_questions(categories: list[str]) -> dict[str, str]:
    """Returns the plain "Which contracts have ...?" question of each category."""
    return {c: f"Which contracts have {_PLAIN.get(c, f'a {c.lower()} clause')}?" for c in categories}


def _labels(folder: Path) -> dict[str, dict[str, bool]]:
    path = folder / "terms.jsonl"
    if not path.is_file():
        raise InputError(f"no terms.jsonl in {folder}: --each scores against CUAD's Yes/No labels kept there")
    labels: dict[str, dict[str, bool]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            labels[record["file"]] = record.get("yes_no") or {}
    return labels


def _score(labelled: set[str], found: set[str], to_check: set[str]) -> dict[str, Any]:
    listed = found | to_check
    return {
        "labelled": len(labelled),
        "found": len(found),
        "to_check": len(to_check),
        "found_right": len(found & labelled),
        "listed_right": len(listed & labelled),
        "recall": round(len(listed & labelled) / len(labelled), 4) if labelled else None,
        "found_precision": round(len(found & labelled) / len(found), 4) if found else None,
    }


def _overall(rows: dict[str, dict[str, Any]], contracts: int) -> dict[str, Any]:
    labelled = sum(r["labelled"] for r in rows.values())
    found = sum(r["found"] for r in rows.values())
    listed = found + sum(r["to_check"] for r in rows.values())
    return {
        "listed_share": round(listed / (contracts * len(rows)), 4) if rows and contracts else None,
        "labelled": labelled,
        "found": found,
        "to_check": sum(r["to_check"] for r in rows.values()),
        "recall": round(sum(r["listed_right"] for r in rows.values()) / labelled, 4) if labelled else None,
        "found_precision": round(sum(r["found_right"] for r in rows.values()) / found, 4) if found else None,
    }


def _by_score(scored: list[tuple[float, bool]]) -> list[dict[str, Any]]:
    """Returns, for clause scores from 1 to 8, the share of labelled cells scoring at least it (the recall a
    list cut there would have) and the share of the cells scoring at least it that are labelled (precision)."""
    labelled = sum(yes for _, yes in scored)
    rows = []
    for cut in (1.0, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0, 5.0, 5.5, 6.0, 7.0, 8.0):
        above = [yes for score, yes in scored if score >= cut]
        rows.append(
            {
                "score": cut,
                "cells": len(above),
                "recall": round(sum(above) / labelled, 4) if labelled else None,
                "precision": round(sum(above) / len(above), 4) if above else None,
            }
        )
    return rows


def evaluate_each(
    dp: DocPipe,
    folder: Path,
    *,
    collection: str = "eval-collection",
    limit: int | None = None,
    pooled: bool = True,
    workers: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Returns recall and found precision per category and overall for the questions asked of each contract,
    beside the pooled answers (module docstring). `limit` keeps the first N categories."""
    from docpipe.review.each import answer_each, each_columns, each_question

    folder = Path(folder)
    labels = _labels(folder)
    files = manifest_files(folder) or sorted(labels)
    added = add_room(dp, folder, files, collection=collection, workers=workers, progress=progress)
    name_of = {doc_id: file for file, doc_id in added.doc_of.items()}
    categories = sorted({c for yes_no in labels.values() for c in yes_no})[: limit or None]
    questions = each_questions(categories)
    per_contract = {c: each_question(q) or q for c, q in questions.items()}
    started = time.perf_counter()
    columns = each_columns(list(per_contract.values()), dp.answering.embedder, dp.settings)
    grid = dp.review(added.collection, columns=columns, mode="auto")
    each_seconds = time.perf_counter() - started
    file_of_row = [name_of.get(row.document_id, "") for row in grid.rows]
    scored: list[tuple[float, bool]] = []  # every (category, contract) cell: its best clause score, CUAD's label
    each_rows: dict[str, dict[str, Any]] = {}
    pooled_rows: dict[str, dict[str, Any]] = {}
    pooled_seconds = 0.0
    for c, category in enumerate(categories):
        labelled = {f for f, yes_no in labels.items() if yes_no.get(category) and f in added.doc_of}
        answer = answer_each(questions[category], grid, c, collection=added.collection.name, settings=dp.settings)
        assert answer.each is not None
        by_name = {row.name: file for row, file in zip(grid.rows, file_of_row)}
        found = {by_name[n] for n in answer.each["found"]}
        to_check = {by_name[n] for n in answer.each["to_check"]}
        each_rows[category] = {"question": questions[category], **_score(labelled, found, to_check)}
        for row, file in zip(grid.cells, file_of_row):
            if file:
                score = row[c].score
                scored.append((0.0 if score is None else float(score), file in labelled))
        if pooled:
            started = time.perf_counter()
            got = dp.ask(added.collection, questions[category], each=False)
            pooled_seconds += time.perf_counter() - started
            cited = {name_of[c.document_id] for c in got.citations if c.document_id in name_of}
            pooled_rows[category] = _score(labelled, cited, set())
    return {
        "contracts": len(added.doc_of),
        "categories": len(categories),
        "each": {
            "overall": _overall(each_rows, len(added.doc_of)),
            "categories": each_rows,
            "seconds": round(each_seconds, 1),
        },
        "pooled": (
            {
                "overall": _overall(pooled_rows, len(added.doc_of)),
                "categories": pooled_rows,
                "seconds": round(pooled_seconds, 1),
            }
            if pooled
            else None
        ),
        "by_score": _by_score(scored),
        "targets": EACH_TARGETS,
        "found_score": dp.settings.review.each_found_score,
        "engine": grid.manifest.engine,
    }


def format_each_report(report: dict[str, Any]) -> str:
    """Returns the report as a table: per category and overall, asked of each contract beside pooled."""

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    pooled = report.get("pooled") or {}
    lines = [
        f'"Which contracts ...?" over {report["contracts"]} contracts, {report["categories"]} CUAD Yes/No categories '
        f"(engine: {report['engine']}; found at clause score >= {report['found_score']})",
        "",
        f"{'category':38s} {'yes':>4s} | {'found':>5s} {'check':>5s} {'recall':>6s} {'prec.':>6s} | pooled recall prec.",
    ]
    rows = [*report["each"]["categories"].items(), ("OVERALL", report["each"]["overall"])]
    for name, row in rows:
        other = pooled.get("categories", {}).get(name) if name != "OVERALL" else pooled.get("overall")
        tail = f"{share(other['recall']):>6s} {share(other['found_precision']):>5s}" if other else "     -     -"
        lines.append(
            f"{name[:38]:38s} {row['labelled']:>4d} | {row['found']:>5d} {row['to_check']:>5d} "
            f"{share(row['recall']):>6s} {share(row['found_precision']):>6s} |  {tail}"
        )
    lines += [
        "",
        "cells at or above a clause score: "
        + "; ".join(
            f"{r['score']}: {r['cells']} cells, recall {share(r['recall'])}, precision {share(r['precision'])}"
            for r in report.get("by_score", [])
        ),
    ]
    overall = report["each"]["overall"]
    lines += [
        f"asked of each contract, {share(overall['listed_share'])} of the (category, contract) pairs are listed "
        "(found or to check); pooled, " + share((pooled.get("overall") or {}).get("listed_share"))
    ]
    targets = report["targets"]
    lines += [
        "",
        f"targets offline: recall >= {targets['recall']:.2f}, found precision >= {targets['found_precision']:.2f}; "
        f"asked of each contract in {report['each']['seconds']} s"
        + (f", pooled answers in {pooled['seconds']} s" if pooled else ""),
    ]
    return "\n".join(lines)
