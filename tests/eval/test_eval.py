"""`docpipe eval-retrieval` on real CUAD contracts: recall at context budgets beside the naive baseline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from docpipe.eval.retrieval import evaluate_retrieval, format_report, normalise_span

EVAL = Path(__file__).resolve().parents[2].parent / "shared" / "eval" / "cuad-dev"


def test_spans_compare_as_casefolded_alphanumerics() -> None:
    assert normalise_span("Section 12.3 — “Termination”") == "section123termination"
    assert normalise_span("ＡＢＣ ﬁ") == "abcfi"  # NFKC


def test_folder_without_annotations_is_a_clear_error(tmp_path: Path) -> None:
    from docpipe import DocPipe, InputError, Settings

    with pytest.raises(InputError, match="annotations.jsonl"):
        evaluate_retrieval(DocPipe(Settings.preset("test", home=tmp_path)), tmp_path)


@pytest.mark.integration
def test_eval_reports_recall_at_budgets_beside_the_baseline(tmp_path: Path) -> None:
    if not (EVAL / "annotations.jsonl").exists():
        pytest.skip(f"CUAD evaluation data not found at {EVAL}")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "docpipe",
            "eval-retrieval",
            str(EVAL),
            "--limit",
            "3",
            "--json",
            "--extractor",
            "pypdfium2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**__import__("os").environ, "DOCPIPE_HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    budgets = ["2048", "4096", "8192", "16384"]
    assert list(report["recall_at_budget"]) == budgets
    assert list(report["baseline"]["recall_at_budget"]) == budgets
    assert report["contracts"] == 3 and report["pairs"] > 20
    ours = [report["recall_at_budget"][b] for b in budgets]
    naive = [report["baseline"]["recall_at_budget"][b] for b in budgets]
    assert ours == sorted(ours) and all(0.0 <= r <= 1.0 for r in ours)
    # Small-to-big hybrid beats whole-chunk dense retrieval within a 4k-token context.
    assert ours[1] > naive[1]
    assert set(report["long_subset"]) >= {"contracts", "pairs", "recall_at_budget", "baseline"}
    assert "Parties" in report["per_category"]
    assert set(report["per_category"]["Parties"]) >= {"pairs", "recall_at_budget", "baseline"}
    text = format_report(report)
    assert "baseline" in text and "16k" in text
