"""`docpipe eval-playbook DIR --playbook FILE`: a playbook run over a CUAD data room, each verdict held against
the verdict CUAD's expert answers give (`terms.jsonl`).

The truth of a (contract, rule) pair:

- a rule over a key term CUAD answers (governing law, the agreement, effective and expiration dates, the
  renewal term, the notice that stops a renewal, termination for convenience as Yes/No): the rule's own test
  applied to CUAD's normalized answer (`docpipe.playbook.judge`'s comparison, so the two cannot differ in how
  they read a bound); no answer is the rule's ``if_absent``; a partial date the test cannot place is not scored;
- a rule over a clause category: CUAD's Yes/No label; a required clause labelled No is ``missing``, a forbidden
  one labelled Yes ``deviates``;
- a question rule, or a term CUAD does not answer: not scored (listed).

Per rule and overall (every scored pair pooled; and apart, the rules over key terms and over clauses):

- **trust**: of the pairs docpipe calls ``meets``, the share that truly meet (undefined without one);
- **catch**: of the pairs that truly deviate or miss, the share docpipe calls ``deviates``, ``missing`` or
  ``needs review``;
- **workload**: the share of pairs left as ``needs review``;

beside the naive anchor of the same pairs, every pair ``needs review`` (trust undefined, catch 1.0, workload 1.0).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.eval.room import add_room
from docpipe.eval.terms import load_terms

if TYPE_CHECKING:
    from docpipe.pipeline import DocPipe
    from docpipe.playbook.report import PlaybookReport
    from docpipe.playbook.schema import Playbook, Rule

__all__ = ["PLAYBOOK_TARGETS", "evaluate_playbook", "format_playbook_report", "truth"]

PLAYBOOK_TARGETS = {"trust": 0.97, "catch": 0.95, "term_workload": 0.35}
_BAD = ("deviates", "missing")
# The key terms CUAD answers, and the field of terms.jsonl that holds the answer.
_GOLD_FIELD = {
    "governing_law": "governing_law",
    "agreement_date": "agreement_date",
    "effective_date": "effective_date",
    "expiration_date": "expiration_date",
    "renewal_term": "renewal_term",
    "notice_period": "notice_period_to_terminate_renewal",
}


def _gold_value(rule: Rule, record: dict[str, Any]) -> tuple[bool, Any]:
    """Returns (scored, the gold `Value` or None for no answer) of a term rule's term in `record`."""
    from docpipe.values.jurisdictions import canonical_jurisdiction
    from docpipe.values.kinds import Value

    if rule.term == "termination_for_convenience":
        label = (record.get("yes_no") or {}).get("Termination For Convenience")
        return label is not None, Value("yes_no", bool(label), "Yes" if label else "No") if label else None
    field = _GOLD_FIELD.get(rule.term)
    if field is None:
        return False, None
    gold = record.get(field) or {}
    if rule.term == "governing_law":
        answer = gold.get("answer")
        if not answer:
            return True, None
        places = [canonical_jurisdiction(part) for part in str(answer).replace(";", ",").split(",")]
        place = canonical_jurisdiction(str(answer)) or next((p for p in places if p), None)
        if place is None:
            return False, None  # CUAD's answer names no place ("[* * *]"): nothing to hold the rule against
        return True, Value("jurisdiction", place, place)
    normalized = gold.get("normalized")
    if normalized is None:
        # An answer CUAD could not normalize ("4/30/[][]": a date with its year blacked out) is a term the
        # contract has, at a value no rule can place: not scored; no answer at all is no term.
        return (not gold.get("answer")), None
    if rule.term in ("renewal_term", "notice_period"):
        days = normalized.get("days") if isinstance(normalized, dict) else None
        if not isinstance(days, int | float):
            return False, None
        return True, Value("duration", {"days": days}, f"{days} days")
    if normalized == "perpetual":
        return True, Value("date", "perpetual", "perpetual")
    return True, Value("date", str(normalized), str(normalized))


def truth(rule: Rule, record: dict[str, Any]) -> str | None:
    """Returns the verdict CUAD's answers give `rule` on the contract of `record` (module docstring), or None
    when the pair is not scored."""
    from docpipe.playbook.judge import _compare

    if rule.form == "question":
        return None
    if rule.form == "clause":
        labels = {k.casefold(): v for k, v in (record.get("yes_no") or {}).items()}
        label = labels.get(rule.clause.casefold())
        if label is None:
            return None
        if rule.required:
            return "meets" if label else "missing"
        return "deviates" if label else "meets"
    scored, value = _gold_value(rule, record)
    if not scored:
        return None
    if value is None:
        if rule.is_ is not None:
            return "meets" if rule.is_ is False else "deviates"
        return "meets" if rule.if_absent == "meets" else "missing"
    fits, _ = _compare(rule, value)
    if fits is None:
        return None
    return "meets" if fits else "deviates"


def _figures(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Returns trust, catch, workload and counts of (truth, called) pairs."""
    called_meets = [t for t, c in pairs if c == "meets"]
    bad = [c for t, c in pairs if t in _BAD]
    n = len(pairs)
    return {
        "pairs": n,
        "truly_meets": sum(t == "meets" for t, _ in pairs),
        "truly_bad": len(bad),
        "called": {s: sum(c == s for _, c in pairs) for s in ("meets", "deviates", "missing", "needs_review")},
        "trust": round(sum(t == "meets" for t in called_meets) / len(called_meets), 4) if called_meets else None,
        "catch": round(sum(c != "meets" for c in bad) / len(bad), 4) if bad else None,
        "workload": round(sum(c == "needs_review" for _, c in pairs) / n, 4) if n else None,
        "exact": round(sum(t == c for t, c in pairs) / n, 4) if n else None,
    }


def evaluate_playbook(
    dp: DocPipe,
    folder: Path,
    playbook: Playbook,
    *,
    collection: str = "eval-collection",
    mode: str = "auto",
    workers: int | None = None,
    progress: bool = False,
    report_out: list[PlaybookReport] | None = None,
) -> dict[str, Any]:
    """Returns the figures of `playbook` over the data room in `folder` against its terms.jsonl (module
    docstring). The contracts are added to `collection` first (those stored are not ingested again); the
    playbook's run is timed alone. `report_out` receives the report when given."""
    from docpipe.playbook.run import check

    folder = Path(folder)
    records = {record["file"]: record for record in load_terms(folder)}  # checked, in the manifest's order
    files = list(records)
    added = add_room(dp, folder, files, collection=collection, workers=workers, progress=progress)
    started = time.perf_counter()
    report = check(dp, playbook, added.collection, mode=mode)
    seconds = time.perf_counter() - started
    if report_out is not None:
        report_out.append(report)
    file_of = {doc_id: file for file, doc_id in added.doc_of.items()}
    per_rule: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[tuple[str, str]]] = {"all": [], "term": [], "clause": []}
    not_scored = []
    for k, rule in enumerate(playbook.rules):
        pairs = []
        for row, verdicts in zip(report.rows, report.verdicts):
            record = records.get(file_of.get(row.document_id, ""))
            known = truth(rule, record) if record is not None else None
            if known is not None:
                pairs.append((known, verdicts[k].status))
        if not pairs:
            not_scored.append(rule.id)
            continue
        per_rule[rule.id] = {"title": rule.title, "form": rule.form, "severity": rule.severity, **_figures(pairs)}
        pooled["all"].extend(pairs)
        pooled[rule.form].extend(pairs)  # question rules are never scored
    naive = _figures([(t, "needs_review") for t, _ in pooled["all"]])
    return {
        "contracts": len(report.rows),
        "rules": len(playbook.rules),
        "scored_rules": len(per_rule),
        "not_scored": not_scored,
        "playbook": {"name": playbook.name, "sha256": playbook.sha256},
        "overall": _figures(pooled["all"]),
        "term_rules": _figures(pooled["term"]),
        "clause_rules": _figures(pooled["clause"]),
        "naive_all_needs_review": naive,
        "per_rule": per_rule,
        "targets": PLAYBOOK_TARGETS,
        "seconds": round(seconds, 1),
        "engine": report.manifest.engine,
        "mode": report.manifest.mode,
    }


def format_playbook_report(report: dict[str, Any]) -> str:
    """Returns the figures as a table a terminal shows."""

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        f"{report['playbook']['name']}: {report['rules']} rules ({report['scored_rules']} scored) over "
        f"{report['contracts']} contracts in {report['seconds']} s ({report['engine']}, {report['mode']})",
        "",
        f"{'':32} {'pairs':>6} {'trust':>6} {'catch':>6} {'workload':>8} {'exact':>6}",
    ]

    def line(name: str, f: dict[str, Any]) -> str:
        return (
            f"{name[:32]:32} {f['pairs']:>6} {share(f['trust']):>6} {share(f['catch']):>6} "
            f"{share(f['workload']):>8} {share(f['exact']):>6}"
        )

    for rule_id, figures in report["per_rule"].items():
        lines.append(line(rule_id, figures))
    lines.append("")
    lines.append(line("overall", report["overall"]))
    lines.append(line("  rules over key terms", report["term_rules"]))
    lines.append(line("  rules over clauses", report["clause_rules"]))
    lines.append(line("naive: all needs review", report["naive_all_needs_review"]))
    targets = report["targets"]
    lines.append(
        f"\ntargets: trust >= {targets['trust']}, catch >= {targets['catch']}, workload on key-term rules <= "
        f"{targets['term_workload']}"
    )
    if report["not_scored"]:
        lines.append(f"not scored (CUAD does not answer them): {', '.join(report['not_scored'])}")
    return "\n".join(lines)
