"""`docpipe eval-terms`: the scoring rules on hand-made values and gold, the naive anchor on a made-up contract,
the report from a hand-made grid, the errors a wrong folder gets, the command line, and the whole run over a
folder in cuad-collection-dev format built from the project's own sample."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_cli

from docpipe import DocPipe, Settings
from docpipe.cli.parser import build_parser
from docpipe.errors import InputError
from docpipe.eval.terms import (
    TARGETS,
    evaluate_terms,
    format_terms_report,
    grid_values,
    load_terms,
    row_seconds,
    terms_report,
)
from docpipe.eval.terms_anchor import anchor_terms
from docpipe.eval.terms_score import (
    FIELDS,
    Given,
    date_right,
    duration_right,
    gold_of,
    law_right,
    parties_f1,
    party_words,
    score_contracts,
)
from docpipe.review.grid import Cell, Column, ReviewGrid, ReviewManifest, Row
from docpipe.values.kinds import Value

ROOT = Path(__file__).resolve().parents[2]

# -- the rules -----------------------------------------------------------------------------------------------------


def test_a_date_is_right_when_it_starts_with_the_gold() -> None:
    assert date_right("2006-07-11", "2006-07-11")
    assert not date_right("2006-07", "2006-07-11")  # a full gold date needs the full date
    assert not date_right("2006-07-12", "2006-07-11")
    assert date_right("2020-03-31", "2020") and date_right("2020", "2020")  # a year-only gold needs the year
    assert date_right("2019-06-30", "2019-06") and not date_right("2019", "2019-06")
    assert date_right("perpetual", "perpetual") and not date_right("2030-01-01", "perpetual")
    assert not date_right("perpetual", "2020") and not date_right(None, "2020")


def test_a_duration_is_right_within_three_percent() -> None:
    year = {"days": 365, "successive": True}
    assert duration_right({"days": 360, "count": 12, "unit": "month"}, year)  # 12 months = 1 year
    assert duration_right({"days": 365, "count": 1, "unit": "year"}, {"days": 360, "successive": False})
    assert duration_right({"days": 103}, {"days": 100}) and duration_right({"days": 97}, {"days": 100})
    assert not duration_right({"days": 104}, {"days": 100}) and not duration_right({"days": 96}, {"days": 100})
    assert not duration_right({"days": 30, "count": 1, "unit": "month"}, year)
    assert duration_right({"perpetual": True}, {"perpetual": True})
    assert not duration_right({"days": 36500}, {"perpetual": True})  # a perpetual gold needs perpetual
    assert not duration_right({"perpetual": True}, year)
    assert not duration_right(None, year) and not duration_right("1 year", year)


@pytest.mark.parametrize(
    ("value", "gold"),
    [
        ("New York", "New York"),
        ("State of New York", "New York"),
        ("the laws of the State of Delaware", "Delaware"),
        ("Commonwealth of Massachusetts", "Massachusetts"),
        ("Ontario", "Ontario, Canada"),
        ("Ontario, Canada", "Province of Ontario, Canada"),
        ("NEW YORK", "new york"),
        ("China", "People's Republic of China"),
        ("People\u2019s Republic of China", "People's Republic of China; United Nations Convention on Contracts"),
        ("England and Wales", "England; Wales"),  # either ";" part
        ("Wales", "England, United Kingdom; Wales, United Kingdom"),
        ("England", "England and Wales, UK"),
    ],
)
def test_governing_law_that_names_the_gold(value: str, gold: str) -> None:
    assert law_right(value, gold)


@pytest.mark.parametrize(
    ("value", "gold"),
    [
        ("New Jersey", "New York"),
        ("Newark", "New York"),  # whole words, not characters
        ("Canada", "Ontario, Canada"),  # the first comma part only
        ("State of", "New York"),  # nothing left to compare
        (None, "New York"),
    ],
)
def test_governing_law_that_does_not(value: Any, gold: str) -> None:
    assert not law_right(value, gold)


def test_party_names_lose_defined_names_and_suffixes() -> None:
    assert party_words('I-ESCROW, INC.  ("i-Escrow" )') == ["i", "escrow"]
    assert party_words("Harbor & Vale Logistics L.L.C.") == ["harbor", "vale", "logistics"]
    assert party_words("The Coca-Cola Company") == ["coca", "cola"]
    assert party_words('[ * * * ] ("Provider")') == []


def test_a_gold_party_is_found_when_sixty_percent_of_its_words_are_in_one_name() -> None:
    gold = [party_words("Alpha Beta Gamma Delta Epsilon Holdings Inc.")]  # 6 words
    assert parties_f1([{"name": "Alpha Beta Gamma Delta", "role": ""}], gold) == 1.0  # 4 of 6
    assert parties_f1([{"name": "Alpha Beta Gamma Zeta", "role": ""}], gold) == 0.0  # 3 of 6: 50%
    # 60% of the words in ONE predicted name: two names holding half each do not add up.
    split = [{"name": "Alpha Beta Gamma", "role": ""}, {"name": "Delta Epsilon Holdings", "role": ""}]
    assert parties_f1(split, gold) == 0.0
    exactly = [party_words("One Two Three Four Five")]
    assert parties_f1([{"name": "One Two Three", "role": ""}], exactly) == 1.0  # 3 of 5 is 60%


def test_parties_f1_per_contract() -> None:
    gold = [party_words('NORTHWIND ANALYTICS, INC. ("Provider")'), party_words("Harbor & Vale Logistics LLC")]
    both = [{"name": "Northwind Analytics, Inc.", "role": "Provider"}, {"name": "Harbor & Vale Logistics LLC"}]
    assert parties_f1(both, gold) == 1.0
    one_and_a_stranger = [{"name": "Northwind Analytics Inc"}, {"name": "Bank of Oregon"}]
    assert parties_f1(one_and_a_stranger, gold) == pytest.approx(0.5)  # precision 1/2, recall 1/2
    assert parties_f1([{"name": "Northwind Analytics"}], gold) == pytest.approx(2 * 1 * 0.5 / 1.5)
    assert parties_f1(["Northwind Analytics", "Harbor Vale Logistics"], gold) == 1.0  # plain names too
    assert parties_f1([], gold) == 0.0 and parties_f1(None, gold) == 0.0


def test_the_gold_is_present_absent_or_unscored() -> None:
    record = {
        "agreement_date": {"answer": "7/11/06", "normalized": "2006-07-11"},
        "effective_date": {"answer": "[]/[]/20[]", "normalized": None},  # the annotators left it unknown
        "expiration_date": {"answer": None, "normalized": None},
        "renewal_term": {"answer": "perpetual", "normalized": {"perpetual": True}},
        "governing_law": {"answer": "[* * *]"},  # redacted
        "parties": {"answer": '[ * * * ] ("Provider"); Acme', "names": ['[ * * * ] ("Provider")', "Acme Inc."]},
    }
    assert gold_of(record, "agreement_date") == ("present", "2006-07-11")
    assert gold_of(record, "effective_date") == ("unscored", "[]/[]/20[]")
    assert gold_of(record, "expiration_date") == ("absent", None)
    assert gold_of(record, "renewal_term") == ("present", {"perpetual": True})
    assert gold_of(record, "notice_period") == ("absent", None)  # no such key at all
    assert gold_of(record, "governing_law")[0] == "unscored"
    assert gold_of(record, "parties") == ("present", [["acme"]])  # the name-less gold name is dropped
    assert gold_of({"parties": {"answer": "[***]", "names": ["[***]"]}}, "parties")[0] == "unscored"


def _record(n: int, **gold: Any) -> dict[str, Any]:
    return {"contract_id": f"c{n}", "file": f"pdf/c{n}.pdf", **gold}


def test_accuracy_none_when_absent_and_the_present_only_figures() -> None:
    law = {"governing_law": {"answer": "New York"}}
    none = {"governing_law": {"answer": None}}
    records = [_record(1, **law), _record(2, **law), _record(3, **law), _record(4, **none), _record(5, **none)]
    given: list[dict[str, Given | None]] = [
        {"governing_law": Given("New York")},
        {"governing_law": Given("New York", "uncertain")},  # shown as uncertain: still given
        {"governing_law": Given("Delaware")},
        {"governing_law": None},
        {"governing_law": Given("Texas", "uncertain")},
    ]
    figures, misses = score_contracts(records, given, misses=5)
    law_figures = figures["governing_law"]
    assert law_figures["n_gold"] == 3 and law_figures["accuracy"] == pytest.approx(0.6667)
    assert law_figures["accuracy_present_only"] == pytest.approx(0.3333)
    assert law_figures["n_absent"] == 2 and law_figures["none_when_absent"] == 0.5
    assert law_figures["none_when_absent_present_only"] == 1.0
    assert [m["contract_id"] for m in misses["governing_law"]] == ["c3", "c5"]  # wrong, and given where none is
    assert misses["governing_law"][1] == {"contract_id": "c5", "gold": None, "predicted": "Texas",
                                          "status": "uncertain"}  # fmt: skip
    assert figures["parties"] == {
        "accuracy": None, "n_gold": 0, "none_when_absent": 1.0, "n_absent": 5, "accuracy_present_only": None,
        "none_when_absent_present_only": 1.0, "n_unscored": 0,
    }  # fmt: skip
    assert score_contracts(records, given, misses=1)[1]["governing_law"][0]["contract_id"] == "c3"
    assert score_contracts(records, given)[1] == {}


# -- the anchor ----------------------------------------------------------------------------------------------------

CONTRACT = """DISTRIBUTION AGREEMENT

This Distribution Agreement (the "Agreement") is made as of June 21, 1999 (the "Effective Date")
by and between Acme Widgets, Inc., a Delaware corporation ("Acme"), and Bolt Supply LLC ("Bolt").

1. Term. The initial term ends on June 20, 2002. This Agreement shall automatically renew for successive
two (2) year periods unless either party gives written notice of non-renewal at least ninety (90) days
prior to the expiration of the then-current term.

2. Law. This Agreement shall be governed by the laws of the State of New York, without regard to its
conflict of laws rules.
"""


def test_the_anchor_reads_a_made_up_contract() -> None:
    assert anchor_terms(CONTRACT) == {
        "agreement_date": "1999-06-21",
        "effective_date": "1999-06-21",
        "governing_law": "New York",
        "renewal_term": {"days": 730, "count": 2, "unit": "year"},
        "notice_period": {"days": 90, "count": 90, "unit": "day"},
    }  # no expiration date, no parties: the anchor does not try


def test_the_anchor_knows_one_date_form_and_reads_nothing_else() -> None:
    assert anchor_terms("Effective Dec. 1, 2020 between")["effective_date"] == "2020-12-01"
    assert anchor_terms("made on JUNE 3rd, 2001")["agreement_date"] == "2001-06-03"
    # Naive: other forms are passed over, for the first "Month D, YYYY" after them.
    assert "agreement_date" not in anchor_terms("Dated 6/21/99 between A and B")
    assert anchor_terms("the 21st day of June, 1999; the term ends June 20, 2002.")["agreement_date"] == "2002-06-20"
    late = "x" * 3000 + " June 21, 1999"
    assert "agreement_date" not in anchor_terms(late)  # the opening 3,000 characters only
    assert anchor_terms("under the laws of its jurisdiction of organization.") == {}
    assert anchor_terms("governed by the laws of England and Wales")["governing_law"] == "England"
    assert anchor_terms("renewals. The term is five years.") == {}  # not within one sentence
    assert "renewal_term" not in anchor_terms("renews for periods of two (2) years")  # "for N years" only
    notice = anchor_terms("by notice given thirty (30) days before the end of the term")["notice_period"]
    assert notice == {"days": 30, "count": 30, "unit": "day"}


# -- the report from a hand-made grid -----------------------------------------------------------------------------


def _grid(rows: list[Row], values: list[dict[str, tuple[str, Any] | None]]) -> ReviewGrid:
    kinds = {"parties": "parties", "governing_law": "jurisdiction", "renewal_term": "duration"}
    terms = ["document_title", *FIELDS, "venue"]
    columns = [Column(t, t, t, kind=kinds.get(t, "date"), term=t) for t in terms]
    cells = []
    for row_values in values:
        row = []
        for term in terms:
            given = row_values.get(term)
            if given is None:
                row.append(Cell("not_found"))
            else:
                status, normalized = given
                value = Value(kinds.get(term, "date"), normalized, str(normalized))
                row.append(Cell(status, value=value))  # type: ignore[arg-type]
        cells.append(row)
    manifest = ReviewManifest("extractive", None, None, "extractive", "terms", "1", "f", "i")
    return ReviewGrid(rows, columns, cells, manifest)


RECORDS = [
    _record(
        1,
        agreement_date={"answer": "3/3/25", "normalized": "2025-03-03"},
        renewal_term={"answer": "1 year", "normalized": {"days": 365, "successive": True}},
        governing_law={"answer": "Delaware"},
        parties={"answer": "A; B", "names": ["Northwind Analytics, Inc.", "Harbor & Vale Logistics LLC"]},
    ),
    _record(2, agreement_date={"answer": "[]/[]/2020", "normalized": "2020"}, governing_law={"answer": None}),
    _record(3, agreement_date={"answer": "1/1/10", "normalized": "2010-01-01"}),
]


def test_grid_values_follow_the_rows_by_document_id_and_the_columns_by_term() -> None:
    rows = [Row("id-2", "c2.pdf"), Row("id-1", "c1.pdf")]  # not in the records' order
    grid = _grid(
        rows,
        [
            {"agreement_date": ("present", "2020-06-30"), "governing_law": ("uncertain", "Texas")},
            {
                "agreement_date": ("present", "2025-03-03"),
                "renewal_term": ("present", {"days": 360, "count": 12, "unit": "month"}),
                "governing_law": ("present", "State of Delaware"),
                "parties": ("uncertain", [{"name": "Northwind Analytics", "role": "Provider"}]),
            },
        ],
    )
    given = grid_values(grid, ["id-1", "id-2", ""])  # c3 could not be added: no row
    assert given[0]["agreement_date"] == Given("2025-03-03", "present")
    assert given[0]["parties"] == Given([{"name": "Northwind Analytics", "role": "Provider"}], "uncertain")
    assert given[1]["governing_law"] == Given("Texas", "uncertain") and given[1]["expiration_date"] is None
    assert all(value is None for value in given[2].values())
    anchored = [{f: Given(v) for f, v in anchor_terms(CONTRACT).items()}, {}, {}]
    report = terms_report(RECORDS, given, anchored, seconds=[1.0, 2.0, 3.0], misses=2)
    fields = report["fields"]
    assert fields["agreement_date"]["accuracy"] == pytest.approx(0.6667)  # c3 gave none
    assert fields["renewal_term"]["accuracy"] == 1.0  # 12 months = 1 year
    law = fields["governing_law"]
    assert law["accuracy"] == 1.0 and law["n_absent"] == 2 and law["none_when_absent"] == 0.5  # c2 gave Texas
    assert law["none_when_absent_present_only"] == 1.0  # Texas only as uncertain
    assert fields["parties"]["accuracy"] == 0.6667 and fields["parties"]["accuracy_present_only"] == 0
    assert report["targets"]["governing_law"] == {
        "accuracy": {"target": 0.95, "met": True},
        "none_when_absent": {"target": 0.80, "met": False},
    }
    assert report["targets"]["notice_period"]["accuracy"]["met"] is None  # no gold: not measured
    assert set(report["targets"]) == set(TARGETS) == set(FIELDS)
    assert report["anchor"]["fields"]["agreement_date"]["accuracy"] == 0.0  # 1999 is not 2025
    assert "accuracy_present_only" not in report["anchor"]["fields"]["parties"]
    assert report["terms_seconds"] == {"total": 6.0, "per_contract": {"p50": 2.0, "p95": 3.0, "mean": 2.0}}
    assert [m["contract_id"] for m in report["misses"]["agreement_date"]] == ["c3"]
    text = format_terms_report({**report, "ingest": {"failed": []}, "seconds": 7.0})
    assert re.search(r"renewal_term\s+1\s+1\.00\s+1\.00\s+0\.00\s+0\.75", text), text
    assert "misses, agreement_date:" in text and "p50 2.00 s" in text
    assert json.loads(json.dumps(report)) == report  # JSON-ready


def test_row_seconds_from_the_progress_events() -> None:
    assert row_seconds(10.0, {1: 11.5, 0: 13.0, 2: 16.0}, 3, 6.0) == [1.5, 1.5, 3.0]
    assert row_seconds(10.0, {0: 11.0}, 3, 6.0) == [2.0, 2.0, 2.0]  # no event for every row: the mean
    assert row_seconds(10.0, {}, 0, 0.0) == []


# -- the folder ----------------------------------------------------------------------------------------------------


def _folder(tmp_path: Path, records: list[dict[str, Any]], files: list[str] | None = None) -> Path:
    folder = tmp_path / "room"
    folder.mkdir(exist_ok=True)
    with (folder / "manifest.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["contract_id", "file", "title", "pdf_pages", "records", "pdf_sha256"])
        for file in files if files is not None else [r["file"] for r in records]:
            writer.writerow([Path(file).stem, file, "", 1, 1, ""])
    (folder / "terms.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return folder


def test_a_folder_without_terms_or_manifest_says_what_it_needs(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"has no terms\.jsonl: .*manifest\.csv, pdf/ and terms\.jsonl"):
        load_terms(tmp_path)
    folder = _folder(tmp_path, RECORDS)
    (folder / "manifest.csv").unlink()
    with pytest.raises(InputError, match=r"has no manifest\.csv: .*cuad-collection-dev format"):
        load_terms(folder)


def test_a_line_that_is_not_a_record_names_the_file_and_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path, RECORDS)
    with (folder / "terms.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("\n[1, 2]\n")
    with pytest.raises(InputError, match=rf"{re.escape(str(folder / 'terms.jsonl'))}:5 is not a key-terms record"):
        load_terms(folder)
    (folder / "terms.jsonl").write_text('{"file": "pdf/c1.pdf"\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"terms\.jsonl:1 is not a key-terms record"):
        load_terms(folder)
    folder = _folder(tmp_path, RECORDS, files=["pdf/c1.pdf"])
    with pytest.raises(InputError, match=r"terms\.jsonl:2 names pdf/c2\.pdf, which manifest\.csv does not list"):
        load_terms(folder)


def test_records_come_in_the_manifests_order(tmp_path: Path) -> None:
    folder = _folder(tmp_path, RECORDS, files=["pdf/c3.pdf", "pdf/c9.pdf", "pdf/c1.pdf", "pdf/c2.pdf"])
    assert [r["contract_id"] for r in load_terms(folder)] == ["c3", "c1", "c2"]


# -- the command line ----------------------------------------------------------------------------------------------


def test_the_parser_accepts_eval_terms() -> None:
    args = build_parser().parse_args(
        ["eval-terms", "room", "--json", "--collection", "terms-x", "--limit", "3", "--misses", "5", "--workers", "2"]
    )
    assert (args.command, args.folder, args.collection, args.limit, args.misses, args.workers, args.json) == (
        "eval-terms", Path("room"), "terms-x", 3, 5, 2, True,
    )  # fmt: skip
    defaults = build_parser().parse_args(["eval-terms", "room"])
    assert (defaults.collection, defaults.limit, defaults.misses, defaults.json) == ("eval-terms", None, 0, False)


def test_the_command_names_what_the_folder_needs(tmp_path: Path) -> None:
    result = run_cli(tmp_path / "home", "eval-terms", tmp_path, "--preset", "test", "--json")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("docpipe: error: ") and result.stderr.count("\n") == 1
    assert "terms.jsonl" in result.stderr and "manifest.csv" in result.stderr


# -- end to end ----------------------------------------------------------------------------------------------------

SAMPLE_GOLD = {
    "contract_id": "master_services_agreement",
    "file": "pdf/master_services_agreement.pdf",
    "agreement_date": {"answer": "3/3/25", "normalized": "2025-03-03"},
    "effective_date": {"answer": "3/3/25", "normalized": "2025-03-03"},
    "expiration_date": {"answer": "3/3/28", "normalized": "2028-03-03"},
    "renewal_term": {"answer": "successive 1 year", "normalized": {"days": 365, "successive": True}},
    "notice_period_to_terminate_renewal": {"answer": "60 days", "normalized": {"days": 60, "successive": False}},
    "governing_law": {"answer": "Delaware"},
    "document_name": {"answer": "MASTER SERVICES AGREEMENT"},
    "parties": {
        "answer": 'Northwind Analytics, Inc. ("Provider"); Harbor & Vale Logistics LLC ("Customer")',
        "names": ['Northwind Analytics, Inc. ("Provider")', 'Harbor & Vale Logistics LLC ("Customer")'],
    },
}


def _documented_example() -> dict[str, Any]:
    page = (ROOT / "docs" / "cli-json.md").read_text(encoding="utf-8")
    section = page.split("## `docpipe eval-terms --json`", 1)[1]
    return json.loads(re.search(r"^```json\n(.*?)^```", section, re.M | re.S)[1])  # type: ignore[index]


def test_the_documented_example_has_the_reports_keys() -> None:
    example = _documented_example()
    report = terms_report([SAMPLE_GOLD], [{}], [{}], seconds=[0.5])
    assert set(report) | {"ingest", "settings", "seconds"} == set(example)
    assert set(report["fields"]["parties"]) == set(example["fields"]["parties"])
    assert set(report["anchor"]["fields"]["parties"]) == set(example["anchor"]["fields"]["parties"])
    assert set(report["targets"]["parties"]) == set(example["targets"]["parties"])


@pytest.fixture
def sample_room(tmp_path: Path, sample_pdf: Path) -> Path:
    """Returns a folder in cuad-collection-dev format holding the project's sample contract and its gold."""
    folder = _folder(tmp_path, [SAMPLE_GOLD])
    (folder / "pdf").mkdir()
    shutil.copy(sample_pdf, folder / SAMPLE_GOLD["file"])
    return folder


def test_eval_terms_end_to_end_on_the_sample(sample_room: Path, tmp_path: Path) -> None:
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    report = evaluate_terms(dp, sample_room, misses=3)
    assert report["contracts"] == 1 and report["ingest"]["failed"] == []
    for field, figures in report["fields"].items():
        assert figures["n_gold"] == 1 and figures["n_absent"] == 0, field
        assert 0.0 <= figures["accuracy"] <= 1.0 and figures["accuracy_present_only"] <= figures["accuracy"]
    anchor = report["anchor"]["fields"]
    assert anchor["agreement_date"]["accuracy"] == anchor["governing_law"]["accuracy"] == 1.0
    assert anchor["notice_period"]["accuracy"] == 1.0  # "sixty (60) days before the end"
    # "renews automatically for successive renewal terms of one (1) year each" is not "for N years".
    assert anchor["renewal_term"]["accuracy"] == 0.0
    assert anchor["parties"]["accuracy"] == anchor["expiration_date"]["accuracy"] == 0.0
    assert report["terms_seconds"]["per_contract"]["p50"] > 0
    assert "eval-terms" == report["ingest"]["collection"]

    result = run_cli(tmp_path / "home", "eval-terms", sample_room, "--preset", "test", "--json", "--misses", "2")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert set(printed) == set(_documented_example())
    assert printed["fields"] == report["fields"]  # the same readers, the same figures
    text = run_cli(tmp_path / "home", "eval-terms", sample_room, "--preset", "test")
    assert text.returncode == 0 and "governing_law" in text.stdout and "anchor" in text.stdout
