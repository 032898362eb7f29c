"""Playbook checks over a real `docpipe serve` (127.0.0.1, per-user keys, no language model: the offline readers
fill the cells): a playbook held against a collection as a job (per matter, its report with the job, downloaded
as XLSX, CSV, Markdown and JSON, served again by a restarted server, its cells from the cache when run again),
and each new input abused (oversized bodies and playbooks, malformed TOML, unknown keys, too many rules, job ids,
another matter's key, a reader's key)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.contracts import CONTRACTS, contract, lines_pdf
from support.server import SOCKET_S, Client, assert_error, connect, new_key, read_until_closed, serving

from docpipe import AccessLog, Settings
from docpipe.playbook import parse_playbook
from docpipe.playbook.run import playbook_columns
from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES, MAX_RULES
from docpipe.server.routers.review_jobs import CHECK_BODY_BYTES

pytestmark = pytest.mark.integration

BAD_IDS = ["..", "..%2F..%2Fjobs", "%2e%2e", "x" * 32, "A" * 32, "0" * 31, "0" * 33, "0" * 32 + "%00", "%20" + "0" * 32]
LAW_RULE = """
[[rule]]
id = "governing-law"
title = "Governed by an approved law"
severity = "high"
term = "governing_law"
allowed = ["New York", "Delaware"]
"""


def long_contract(n: int) -> bytes:
    """Returns contract `n` of 40 articles (about 4 pages): a review of many questions over a few takes seconds."""
    lines = [f"MASTER AGREEMENT NUMBER {n}", f"This Agreement is made between Supplier {n} Inc. and Buyer {n} LLC."]
    for a in range(1, 41):
        lines.append(f"ARTICLE {a} OBLIGATIONS")
        lines.append(f"{a}.1 The obligations of Supplier {n} under this Article {a} last {a + n} days after notice.")
        lines.append(f"{a}.2 Each party shall perform its duties under Article {a} in good faith and at its own cost.")
    return lines_pdf(*lines)


def rules(count: int) -> str:
    """Returns a playbook of `count` distinct clause rules (a rule may name a clause others name)."""
    return "".join(
        f'[[rule]]\nid = "rule-{n}"\ntitle = "Rule {n}"\nseverity = "low"\nclause = "Cap on Liability"\nrequired = true\n'
        for n in range(count)
    )


@pytest.fixture(scope="module")
def sample_playbook(repo_root: Path) -> str:
    return (repo_root / "samples" / "playbook.toml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("check") / "home"
    home.mkdir()
    keys = {
        "alice": new_key(home, "alice", "deal-x:write"),
        "carol": new_key(home, "carol", "deal-x:read"),
        "bob": new_key(home, "bob", "deal-y:write"),
    }
    with serving(home, "--engine", "extractive", "--no-ui", token=None) as served:
        alice = Client(served, keys["alice"])
        texas = "initech-services.pdf"
        alice.collection("deal-room", {"msa.pdf": sample_pdf.read_bytes(), texas: CONTRACTS[texas]})
        yield {"served": served, "home": home, "keys": keys}


def client(world: dict, user: str, matter: str | None = None) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def check(who: Client, name: str, playbook: str, **body: Any) -> Any:
    return who.post(f"/v1/collections/{name}/check", json={"playbook": playbook, **body})


def job_ids(who: Client) -> set[str]:
    return {j["id"] for j in who.get("/v1/jobs").json()["jobs"]}


def verdicts(report: dict, name: str) -> dict[str, str]:
    contract = next(c for c in report["contracts"] if c["name"] == name)
    return {rule: v["status"] for rule, v in contract["verdicts"].items()}


def test_a_check_job_runs_to_a_report_and_downloads(world: dict, sample_playbook: str) -> None:
    import openpyxl

    alice, carol = client(world, "alice"), client(world, "carol")
    book = parse_playbook(sample_playbook)
    started = check(alice, "deal-room", sample_playbook, mode="no_think")
    assert started.status_code == 202, started.text
    job = started.json()
    assert started.headers["location"] == job["url"] == f"/v1/jobs/{job['id']}"
    assert job["state"] in ("queued", "running") and job["collection"] == "deal-room" and job["user"] == "alice"
    assert job["request"] == {
        "type": "check",
        "playbook_name": book.name,
        "playbook_sha256": book.sha256,
        "rules": 18,
        "mode": "no_think",
        "layout": None,
        "password_given": False,
    }  # the playbook's text stays out of the job's listing: the report has it

    done = alice.wait(job["id"])
    assert done["state"] == "done", done
    progress = done["progress"]
    columns = len(playbook_columns(book, Settings.preset("test")).columns)  # each term and clause read once
    assert progress == {"done": 2 * columns, "total": 2 * columns, "cached": 0, "failed": 0}, progress
    assert done["failures"] == [] and done["error"] is None and done["grid"] is None
    report = done["report"]
    assert report["playbook"]["text"] == sample_playbook and report["playbook"]["sha256"] == book.sha256
    assert [c["name"] for c in report["contracts"]][0] == "initech-services.pdf"  # the worst contract first
    assert report["manifest"]["collection"] == "deal-room" and report["manifest"]["matter"] == "deal-x"
    msa, texas = verdicts(report, "msa.pdf"), verdicts(report, "initech-services.pdf")
    assert set(msa) == {r.id for r in book.rules}
    assert msa["governing-law"] == "meets" and texas["governing-law"] == "deviates", (msa, texas)
    assert msa["liability-capped"] == "meets" and msa["no-termination-for-convenience"] == "deviates", msa
    assert msa["no-set-off"] == "needs_review"  # a question with no model: a reviewer answers it
    law = next(c for c in report["contracts"] if c["name"] == "msa.pdf")["verdicts"]["governing-law"]
    assert law["pages"] == "p. 11" and "Delaware" in law["quotes"][0]["quote"] and law["quotes"][0]["verified"]
    assert report["summary"]["counts"] == done["summary"]["verdicts"]
    assert done["summary"]["contracts"] == 2 and done["summary"]["rules"] == 18
    assert (
        done["summary"]["text"] == report["summary"]["text"] and "2 contracts x 18 rules" in report["summary"]["text"]
    )

    # A reader of the matter sees and downloads the report, not the grid it was read from.
    assert carol.get(done["url"]).json()["report"] == report
    xlsx = carol.get(f"{done['url']}/report", params={"format": "xlsx"})
    assert xlsx.status_code == 200, xlsx.text
    assert xlsx.headers["content-type"] == "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    assert xlsx.headers["content-disposition"] == f'attachment; filename="check-deal-room-{job["id"][:8]}.xlsx"'
    workbook = openpyxl.load_workbook(io.BytesIO(xlsx.content))
    assert workbook.sheetnames == ["Summary", "Verdicts", "Citations", "Playbook"]
    sheet = workbook["Verdicts"]
    header = [c.value for c in sheet[1]]
    table = {row[0].value: {h: c.value for h, c in zip(header, row)} for row in sheet.iter_rows(min_row=2)}
    assert set(table) == {"msa.pdf", "initech-services.pdf"}
    assert table["initech-services.pdf"]["Governed by an approved law (high)"] == "Deviates"
    assert table["msa.pdf"]["Governed by an approved law (high)"] == "Meets"
    written = [row[0].value for row in workbook["Playbook"].iter_rows(min_row=2, max_row=19)]
    assert written == [r.id for r in book.rules]
    citations = json.dumps([[c.value for c in row] for row in workbook["Citations"].iter_rows()])
    assert "Delaware" in citations and "Texas" in citations
    summary = {row[0].value: row for row in workbook["Summary"].iter_rows(min_row=2) if row[0].value}
    assert str(summary["governing-law"][5].value) == "1"  # Deviates: the Texas contract

    rows = list(csv.DictReader(io.StringIO(carol.get(f"{done['url']}/report", params={"format": "csv"}).text)))
    assert len(rows) == 2 * 18 and {r["document"] for r in rows} == {"msa.pdf", "initech-services.pdf"}
    texas_law = next(r for r in rows if r["document"] == "initech-services.pdf" and r["rule"] == "governing-law")
    assert texas_law["verdict"] == "Deviates" and texas_law["fallback"].startswith("Propose New York law")
    md = carol.get(f"{done['url']}/report", params={"format": "md"})
    assert md.headers["content-type"].startswith("text/markdown") and md.text.startswith(f"# {book.name}")
    as_json = carol.get(f"{done['url']}/report", params={"format": "json"})
    assert as_json.headers["content-type"] == "application/json" and as_json.json() == report
    assert_error(carol.get(f"{done['url']}/report", params={"format": "exe"}), 422, "invalid_request", "format")
    # The report is the export: a check job has no grid to download, a review job no report.
    assert_error(carol.get(f"{done['url']}/grid"), 409, "no_grid", f"/v1/jobs/{job['id']}/report")
    assert_error(carol.get(f"{done['url']}/deadlines.ics"), 409, "no_grid", "report")
    review = alice.wait(alice.review("deal-room", questions=["Which law governs?"]).json()["id"])
    assert_error(carol.get(f"{review['url']}/report"), 409, "no_report", "a review job", "/grid")

    listed = carol.get("/v1/jobs").json()["jobs"]
    mine = next(j for j in listed if j["id"] == job["id"])
    assert mine["report"] is None and "playbook" not in mine["request"]

    # The report is kept with the job, private; the access log has the start (the question rules' hashes, never
    # their text), the read and the downloads.
    stored = world["home"] / "jobs" / job["id"] / "report.json"
    assert oct(stored.stat().st_mode & 0o777) == "0o600"
    audit = AccessLog(world["home"])
    events = [e for e in audit.read(user="alice") if e["action"] == "check_start"]
    asked = [r.question for r in book.rules if r.question]
    assert len(asked) == 3 and any(e["questions_hmac"] == [audit.question_hash(q) for q in asked] for e in events)
    assert any(job["id"] in e["detail"] and e["outcome"] == "ok" for e in events), events
    read = {e["action"] for e in audit.read(user="carol") if job["id"] in e.get("detail", "")}
    assert {"read_check", "download_check"} <= read, read
    log = world["served"].log.read_text(errors="replace")
    assert asked[0] not in log and "deal-room" not in log


def test_the_same_check_again_reads_every_cell_from_the_cache(world: dict, sample_playbook: str) -> None:
    """Cells go to the cell cache as they finish: a check posted again (after a crash, a cancel, or a change of
    mind) computes only what it lacks; here, nothing."""
    alice = client(world, "alice")
    alice.collection("cache-room", {"escrow.pdf": contract("Escrow Agreement", "Quetzal", "five (5)", "Vermont")})
    first = alice.wait(check(alice, "cache-room", sample_playbook).json()["id"])
    assert first["state"] == "done" and first["progress"]["cached"] == 0, first["progress"]
    second = alice.wait(check(alice, "cache-room", sample_playbook).json()["id"])
    assert second["state"] == "done", second
    total = first["progress"]["total"]
    assert second["progress"] == {"done": total, "total": total, "cached": total, "failed": 0}, second["progress"]
    assert len(second["report"]["manifest"]["cached_cells"]) == total
    strip = ("seconds", "manifest")
    assert {k: v for k, v in second["report"].items() if k not in strip} == {
        k: v for k, v in first["report"].items() if k not in strip
    }
    # Another playbook that reads a cell the first read (the governing law) takes it from the cache too.
    other = alice.wait(check(alice, "cache-room", LAW_RULE).json()["id"])
    assert other["progress"] == {"done": 1, "total": 1, "cached": 1, "failed": 0}, other["progress"]
    assert verdicts(other["report"], "escrow.pdf") == {"governing-law": "deviates"}


def test_deleting_a_contract_deletes_the_checks_that_quote_it(world: dict) -> None:
    alice = client(world, "alice")
    alice.collection("gone-room", {"gone.pdf": contract("Lease Agreement", "Umbrella", "ten (10)", "Ohio")})
    done = alice.wait(check(alice, "gone-room", LAW_RULE).json()["id"])
    other = alice.wait(check(alice, "deal-room", LAW_RULE).json()["id"])
    assert verdicts(done["report"], "gone.pdf") == {"governing-law": "deviates"}
    gone = alice.delete(f"/v1/documents/{done['report']['contracts'][0]['document_id']}")
    assert gone.status_code == 200 and gone.json()["review_jobs"] == 1, gone.text
    assert_error(alice.get(done["url"]), 404, "not_found")
    assert not (world["home"] / "jobs" / done["id"]).exists()
    assert alice.get(other["url"]).json()["state"] == "done"  # it never quoted that contract


def test_another_matters_key_gets_404_and_a_reader_cannot_start_one(world: dict) -> None:
    alice, carol, bob = client(world, "alice"), client(world, "carol"), client(world, "bob")
    done = alice.wait(check(alice, "deal-room", LAW_RULE).json()["id"])
    assert done["state"] == "done"
    url = done["url"]
    for who in (bob, client(world, "bob", "deal-y")):
        # Exactly what an id no job has gets: nothing tells that the job exists in another matter.
        missing = assert_error(who.get(url), 404, "not_found")
        unknown = assert_error(who.get(f"/v1/jobs/{'0' * 32}"), 404, "not_found")
        assert missing == unknown.replace("0" * 32, done["id"])
        assert_error(who.get(f"{url}/report"), 404, "not_found")
        assert_error(who.delete(url), 404, "not_found")
        assert done["id"] not in json.dumps(who.get("/v1/jobs").json())
    into = client(world, "bob", "deal-x")  # naming alice's matter does not help
    for response in (into.get(url), into.get(f"{url}/report"), check(into, "deal-room", LAW_RULE)):
        assert_error(response, 404, "not_found", "no matter")
    # Nor does checking alice's collection from bob's matter.
    assert_error(check(bob, "deal-room", LAW_RULE), 404, "not_found", "no collection")

    # A reader of the matter reads the report but may not start a check.
    before = job_ids(alice)
    assert_error(check(carol, "deal-room", LAW_RULE), 403, "forbidden", "needs write")
    assert job_ids(alice) == before
    assert carol.get(f"{url}/report", params={"format": "json"}).status_code == 200
    denied = [e for e in AccessLog(world["home"]).read(user="carol") if e["outcome"] == "denied"]
    assert any(e["action"] == "start_check" for e in denied), denied


@pytest.mark.parametrize(
    ("body", "status", "kind", "fragments"),
    [
        # The playbook's own limit, said before the TOML parser sees it (the library would say it as a 422).
        ({"playbook": "# padding\n" * (MAX_PLAYBOOK_BYTES // 10 + 1) + LAW_RULE}, 413, "body_too_large",
         ["the playbook is 262,", "at most 262,144 bytes (256 KiB)", "split it"]),
        ({"playbook": "[[rule]\nid = 'x'"}, 422, "invalid_request", ["not a TOML playbook", "line 1"]),
        ({"playbook": LAW_RULE + 'allowd = ["Texas"]\n'}, 422, "invalid_request",
         ["playbook:8: rule 'governing-law': unknown key 'allowd' in a rule", "use id, title"]),
        ({"playbook": rules(MAX_RULES + 1)}, 422, "invalid_request", ["101 rules", "at most 100", "split it"]),
        ({"playbook": rules(1).replace("Liability", "Liabilty")}, 422, "invalid_request",
         ["playbook:1: rule 'rule-0': unknown clause category 'Cap on Liabilty'", "Cap on Liability"]),
        ({"playbook": '[playbook]\nname = "x"\n'}, 422, "invalid_request", ["no [[rule]] tables"]),
        ({}, 422, "invalid_request", ["playbook"]),
        ({"playbook": 7}, 422, "invalid_request", ["playbook"]),
        ({"playbook": LAW_RULE, "mode": "fast"}, 422, "invalid_request", ["mode"]),
        ({"playbook": LAW_RULE, "engine": "vllm"}, 422, "invalid_request", ["engine"]),
        ({"playbook": LAW_RULE.replace("Delaware", "Dela\ud800ware")}, 400, "bad_unicode", ["not valid Unicode"]),
    ],
)  # fmt: skip
def test_a_bad_playbook_is_refused_before_any_job(
    world: dict, body: dict, status: int, kind: str, fragments: list[str]
) -> None:
    alice = client(world, "alice")
    before = job_ids(alice)
    response = alice.post(
        "/v1/collections/deal-room/check",
        content=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, status, kind, *fragments)
    assert job_ids(alice) == before


def test_a_playbook_at_the_limits_is_taken(world: dict) -> None:
    """The bounds refuse only what is over them: 100 rules, and 256 KiB of TOML even when every byte of its
    comments is sent as a JSON escape (\\u00e9: six bytes for two)."""
    alice = client(world, "alice")
    hundred = alice.wait(check(alice, "deal-room", rules(MAX_RULES)).json()["id"])
    assert hundred["state"] == "done" and hundred["summary"]["rules"] == MAX_RULES, hundred
    padding = "# " + "é" * 60 + "\n"  # 123 bytes a line
    playbook = padding * ((MAX_PLAYBOOK_BYTES - len(LAW_RULE)) // len(padding.encode())) + LAW_RULE
    assert MAX_PLAYBOOK_BYTES - 200 < len(playbook.encode()) <= MAX_PLAYBOOK_BYTES
    body = json.dumps({"playbook": playbook}).encode()  # ensure_ascii: every é is \\u00e9
    assert len(body) > 2.9 * MAX_PLAYBOOK_BYTES
    started = alice.post("/v1/collections/deal-room/check", content=body, headers={"Content-Type": "application/json"})
    assert started.status_code == 202, started.text
    assert alice.wait(started.json()["id"])["state"] == "done"


def test_a_body_over_what_a_playbook_takes_is_refused_before_it_is_read(world: dict) -> None:
    """The route's bound is below the server's JSON limit (1 MB): a body declared bigger is answered 413 at once,
    without the server waiting for a byte of it."""
    served = world["served"]
    size = CHECK_BODY_BYTES + 1
    assert size < 1024 * 1024  # below --max-json-kb: only the route's own bound refuses it
    with connect(served) as sock:
        sock.sendall(
            (
                "POST /v1/collections/deal-room/check HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {world['keys']['alice']}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {size}\r\nConnection: close\r\n\r\n"
            ).encode()
        )
        reply = read_until_closed(sock)  # within SOCKET_S, or the guard is missing
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), (head, SOCKET_S)
    message = json.loads(payload)["error"]["message"]
    assert f"this route takes at most {CHECK_BODY_BYTES // 1024:,} KiB" in message and "256 KiB of TOML" in message, (
        message
    )
    # A streamed body (no Content-Length) is cut at the same bound.
    alice = client(world, "alice")

    def chunks() -> Iterator[bytes]:
        yield b'{"playbook": "'
        for _ in range(size // 65536 + 1):
            yield b"#" * 65536

    streamed = alice.post(
        "/v1/collections/deal-room/check", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert_error(streamed, 413, "body_too_large", "256 KiB of TOML")


def test_malformed_and_unknown_job_ids_are_404_on_the_report(world: dict) -> None:
    alice = client(world, "alice")
    for bad in [*BAD_IDS, "%2E%2E", "..%2Fplanted"]:
        response = alice.get(f"/v1/jobs/{bad}/report")
        assert response.status_code in (404, 422), (bad, response.text)
        assert response.json()["error"]["type"] in ("not_found", "invalid_request"), response.text
    assert_error(alice.get(f"/v1/jobs/{'0' * 32}/report"), 404, "not_found", "no review job", "GET /v1/jobs")


def test_a_restarted_server_serves_the_report_and_resumes_a_check(tmp_path: Path, sample_pdf: Path) -> None:
    """The report is kept with the job: the next server serves it. A check left queued by a killed server (it
    waited behind a long review) runs at the next start, its playbook read again from the job's record."""
    home = tmp_path / "home"
    home.mkdir()
    key = new_key(home, "alice", "deal-x:write")
    many = [f"What does the agreement provide about matter number {n} and its notice?" for n in range(200)]
    with serving(home, "--engine", "extractive", "--no-ui", token=None, log_name="first.log") as first:
        alice = Client(first, key)
        alice.collection("room", {"msa.pdf": sample_pdf.read_bytes()})
        alice.collection("long-room", {f"long-{n}.pdf": long_contract(n) for n in range(8)})
        done = alice.wait(check(alice, "room", LAW_RULE).json()["id"])
        assert done["state"] == "done"
        blocker = alice.review("long-room", questions=many).json()
        alice.wait(blocker["id"], "running")
        queued = check(alice, "room", LAW_RULE + rules(1)).json()
        assert alice.get(queued["url"]).json()["state"] == "queued"
        dropped = check(alice, "room", rules(2)).json()  # a check cancelled while queued never runs
        assert alice.delete(dropped["url"]).json()["state"] == "cancelled"
        assert_error(alice.get(f"{dropped['url']}/report"), 409, "not_done", "cancelled", "it has no report")
        first.kill()
    record = json.loads((home / "jobs" / queued["id"] / "job.json").read_bytes())
    assert record["state"] == "queued" and record["request"]["type"] == "check"

    with serving(home, "--engine", "extractive", "--no-ui", token=None, log_name="second.log") as second:
        alice = Client(second, key)
        again = alice.get(done["url"]).json()
        assert again["state"] == "done" and again["report"] == done["report"]
        xlsx = alice.get(f"{done['url']}/report")
        assert xlsx.status_code == 200 and xlsx.content.startswith(b"PK"), xlsx.text
        alice.delete(blocker["url"])  # the resumed review goes first; the check need not wait for it
        resumed = alice.wait(queued["id"])
    assert resumed["state"] == "done" and resumed["resumed"] == 1, resumed
    assert verdicts(resumed["report"], "msa.pdf") == {"governing-law": "meets", "rule-0": "meets"}
