"""`docpipe terms` and typed `docpipe review` as users run them: the table, its workbook and calendar, and every
wrong input refused before any work with the fix in the message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_cli

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "master_services_agreement.pdf"
FAST = {"DOCPIPE_EMBEDDING__MODEL": "hashing", "DOCPIPE_ENGINE__BACKEND": "extractive"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli") / "home"


def test_terms_prints_typed_values_and_writes_a_workbook_and_a_calendar(home: Path) -> None:
    out = run_cli(home, "terms", SAMPLE, "--terms", "governing_law,expiration_date,notice_deadline", "--json", env=FAST)
    assert out.returncode == 0, out.stderr
    grid = json.loads(out.stdout)
    values = {c["term"]: cell["value"]["normalized"] for c, cell in zip(grid["columns"], grid["cells"][0])}
    assert values == {"governing_law": "Delaware", "expiration_date": "2028-03-03", "notice_deadline": "2028-01-03"}

    xlsx, ics = home.parent / "terms.xlsx", home.parent / "deadlines.ics"
    out = run_cli(home, "terms", SAMPLE, "-o", xlsx, "--ics", ics, env=FAST)
    assert out.returncode == 0, out.stderr
    assert f"wrote {xlsx}" in out.stderr and f"wrote {ics}" in out.stderr
    from icalendar import Calendar
    from openpyxl import load_workbook

    events = [e for e in Calendar.from_ical(ics.read_bytes()).walk("VEVENT")]
    assert sorted(str(e.get("dtstart").dt) for e in events) == ["2028-01-03", "2028-03-03"]
    sheet = load_workbook(xlsx)["Review"]
    header = [c.value for c in sheet[1]]
    assert header[0] == "Document" and "Expiration date" in header
    expiry = sheet.cell(row=2, column=header.index("Expiration date") + 1).value
    assert str(expiry)[:10] == "2028-03-03"  # a real date, not text


def test_typed_questions_and_a_columns_file_in_review(home: Path, tmp_path: Path) -> None:
    columns = tmp_path / "columns.toml"
    columns.write_text(
        '[[column]]\nterm = "parties"\n\n[[column]]\nquestion = "Notice to terminate?"\nkind = "duration"\n'
    )
    out = run_cli(
        home, "review", SAMPLE, "--columns", columns, "-q", "Governing law?::jurisdiction", "--json", env=FAST
    )
    assert out.returncode == 0, out.stderr
    grid = json.loads(out.stdout)
    assert [(c["key"], c["kind"]) for c in grid["columns"]] == [
        ("Parties", "parties"),
        ("Notice to terminate?", "duration"),
        ("Governing law?", "jurisdiction"),
    ]
    assert grid["cells"][0][0]["value"]["normalized"][0]["role"] == "Provider"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["terms", SAMPLE, "--terms", "cap"], "no key term 'cap'"),
        (["terms"], "read the key terms of a collection or of files"),
        (["terms", SAMPLE, "-o", "terms.pdf"], "cannot tell the format of terms.pdf"),
        (["terms", SAMPLE, "--json", "--format", "csv"], "--json and --format csv disagree"),
        (["review", SAMPLE, "-q", "Law?::country"], "unknown kind 'country'"),
        (["review", SAMPLE, "-q", "Who?::choice[A]"], "at least two options"),
        (["review", SAMPLE, "--columns", "missing.toml"], "cannot read the columns file"),
    ],
)
def test_wrong_input_is_refused_with_the_fix(home: Path, args: list[object], message: str) -> None:
    out = run_cli(home, *args, env=FAST)
    assert out.returncode != 0
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_terms_lists_the_key_terms_and_their_kinds(tmp_path: Path) -> None:
    out = run_cli(tmp_path / "home", "terms", "--list")
    assert out.returncode == 0
    rows = [line.split() for line in out.stdout.splitlines()]
    assert ["notice_deadline", "date"] == rows[9][:2] and ["governing_law", "jurisdiction"] == rows[10][:2]
