"""``/v1/marks`` (issue 27): reviewers' marks over REST on the real FastAPI app (its test client), with per-user
keys: set, read and cleared in the caller's matter only (another matter's key gets 404 for the document, a
reader 403 for a change), every change in the access log without its comment, bad bodies refused with a message
that says what to send, and a review job's download showing the matter's marks as they are now."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from openpyxl import load_workbook
from support.contracts import PARTIES, agreement_pdf

from docpipe import DocPipe, Settings
from docpipe.access.keys import KeyStore
from docpipe.access.log import AccessLog
from docpipe.server import ServeOptions, create_app

LAW = "Which law governs the agreement?"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    home = tmp_path / "home"
    dp = DocPipe(Settings.preset("test", home=home))
    keys = KeyStore(home)
    grants = {"alice": {"deal-x": "write"}, "carol": {"deal-x": "read"}, "bob": {"deal-y": "admin"}}
    secrets = {user: keys.create(user, grant)[0] for user, grant in grants.items()}
    with TestClient(create_app(dp, ServeOptions(ui=False)), base_url="http://127.0.0.1") as client:
        yield {"client": client, "keys": secrets, "home": home, "dp": dp}


def _as(world: dict[str, Any], user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {world['keys'][user]}"}


def _upload(world: dict[str, Any], user: str, data: bytes, name: str) -> str:
    reply = world["client"].post(
        "/v1/documents",
        params={"name": name},
        content=data,
        headers={**_as(world, user), "Content-Type": "application/pdf"},
    )
    assert reply.status_code == 200, reply.text
    return str(reply.json()["id"])


def _pdf(n: int = 0) -> bytes:
    return agreement_pdf(*PARTIES[n])


def test_a_mark_is_set_read_and_cleared_in_its_matter_only(world: dict[str, Any]) -> None:
    client = world["client"]
    alice, bob, carol = (_as(world, u) for u in ("alice", "bob", "carol"))
    data = _pdf()  # generated PDFs differ from run to run: these bytes, twice
    doc = _upload(world, "alice", data, "northwind.pdf")
    body = {"document_id": doc, "column": LAW, "status": "corrected", "value": "Delaware", "comment": "privileged"}

    put = client.put("/v1/marks", json=body, headers=alice)
    assert put.status_code == 200, put.text
    mark = put.json()
    assert (mark["status"], mark["value"], mark["user"], mark["column"]) == ("corrected", "Delaware", "alice", LAW)
    assert mark["when"].endswith("Z") and abs(mark["time"] - time.time()) < 60

    listed = client.get("/v1/marks", headers=carol).json()  # a reader of the matter sees it
    assert listed["matter"] == "deal-x" and [m["value"] for m in listed["marks"]] == ["Delaware"]
    assert client.get("/v1/marks", params={"document_id": doc}, headers=alice).json()["marks"] == listed["marks"]

    # Bob's matter does not hold the document: 404 for every route, nothing listed, nothing changed.
    assert client.get("/v1/marks", headers=bob).json()["marks"] == []
    for reply in (
        client.get("/v1/marks", params={"document_id": doc}, headers=bob),
        client.put("/v1/marks", json={**body, "value": "Texas"}, headers=bob),
        client.request("DELETE", "/v1/marks", params={"document_id": doc, "column": LAW}, headers=bob),
        client.get("/v1/marks", headers={**bob, "X-Matter": "deal-x"}),
    ):
        assert reply.status_code == 404, reply.text
    # The same bytes in Bob's matter are Bob's document: his marks are apart from Alice's.
    assert _upload(world, "bob", data, "contract.pdf") == doc
    assert client.get("/v1/marks", params={"document_id": doc}, headers=bob).json()["marks"] == []
    assert client.put("/v1/marks", json={**body, "value": "Texas"}, headers=bob).status_code == 200
    assert [m["value"] for m in client.get("/v1/marks", headers=alice).json()["marks"]] == ["Delaware"]

    # Carol reads but may not mark.
    assert client.put("/v1/marks", json=body, headers=carol).status_code == 403

    params = {"document_id": doc, "column": LAW}
    cleared = client.request("DELETE", "/v1/marks", params=params, headers=alice)
    assert cleared.status_code == 200 and cleared.json()["cleared"] is True
    assert client.request("DELETE", "/v1/marks", params=params, headers=alice).json()["cleared"] is False
    assert client.get("/v1/marks", headers=alice).json()["marks"] == []
    assert [m["value"] for m in client.get("/v1/marks", headers=bob).json()["marks"]] == ["Texas"]

    log = AccessLog(world["home"]).read()
    lines = [e for e in log if e["action"] in ("mark", "unmark", "marks")]
    assert [(e["user"], e["matter"], e["action"]) for e in lines if e["outcome"] == "ok"][:3] == [
        ("alice", "deal-x", "mark"),
        ("carol", "deal-x", "marks"),
        ("alice", "deal-x", "marks"),
    ]
    assert any(e["action"] == "mark" and e["detail"] == f"corrected: {LAW}" and e["document"] == doc for e in lines)
    assert any(e["action"] == "unmark" and e["user"] == "alice" for e in lines)
    assert "privileged" not in str(log)  # the comment is not logged
    assert any(e["outcome"] == "denied" and e["user"] == "bob" for e in log)


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"status": "approved"}, 422, "'accepted', 'corrected' or 'flagged'"),
        ({"status": None}, 422, "status"),
        ({"status": "corrected", "value": None}, 422, "a correction needs the corrected value"),
        ({"status": "corrected", "value": "  "}, 422, "a correction needs the corrected value"),
        ({"value": "x"}, 422, "a value goes with a correction only"),
        ({"comment": "x" * 4001}, 422, "comment"),
        ({"comment": "a\x00b"}, 422, "control characters"),
        ({"column": ""}, 422, "column"),
        ({"column": "q" * 2001}, 422, "column"),
        ({"document_id": "../../etc/passwd"}, 404, "no document with id"),
        ({"document_id": "0" * 64}, 404, "no document with id"),
        ({"document_id": "x" * 65}, 422, "document_id"),
        ({"user": "mallory"}, 422, "user"),  # who marks is the key's user, never the body's
    ],
)
def test_bad_marks_are_refused_with_what_to_send(
    world: dict[str, Any], change: dict[str, Any], status: int, says: str
) -> None:
    doc = _upload(world, "alice", _pdf(), "northwind.pdf")
    body = {"document_id": doc, "column": LAW, "status": "flagged", **change}
    reply = world["client"].put("/v1/marks", json=body, headers=_as(world, "alice"))
    assert reply.status_code == status, reply.text
    assert says in reply.text
    assert world["client"].get("/v1/marks", headers=_as(world, "alice")).json()["marks"] == []


def test_bad_queries_are_refused(world: dict[str, Any]) -> None:
    client, alice = world["client"], _as(world, "alice")
    too_many = [("document_id", "x")] * 1001
    assert "at most 1000" in client.get("/v1/marks", params=too_many, headers=alice).text
    assert client.request("DELETE", "/v1/marks", params={"document_id": "ab" * 32}, headers=alice).status_code == 422
    assert client.get("/v1/marks").status_code == 401


def test_a_review_jobs_download_shows_the_marks_as_they_are_now(world: dict[str, Any]) -> None:
    client, alice = world["client"], _as(world, "alice")
    assert client.post("/v1/collections", json={"name": "deal"}, headers=alice).status_code in (200, 201)
    files = [("file", (f"c{n}.pdf", _pdf(n), "application/pdf")) for n in range(2)]
    added = client.post("/v1/collections/deal/documents", files=files, headers=alice)
    assert added.status_code == 200, added.text
    doc = added.json()["added"][0]["id"]
    job = client.post("/v1/collections/deal/review", json={"questions": [LAW]}, headers=alice).json()
    deadline = time.monotonic() + 120
    while (state := client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["state"]) not in ("done", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert state == "done"
    body = {"document_id": doc, "column": LAW, "status": "flagged", "comment": "=cmd|' /C calc'!A0"}
    assert client.put("/v1/marks", json=body, headers=alice).status_code == 200  # after the job finished

    xlsx = client.get(f"/v1/jobs/{job['id']}/grid", params={"format": "xlsx"}, headers=alice)
    assert xlsx.status_code == 200, xlsx.text
    book = load_workbook(io.BytesIO(xlsx.content))
    rows = list(book["Marks"].iter_rows(values_only=True))
    assert rows[1][1:5] == (LAW, "Flagged", None, "=cmd|' /C calc'!A0")
    assert book["Marks"].cell(row=2, column=5).quotePrefix  # text, never a formula
    grid = client.get(f"/v1/jobs/{job['id']}/grid", params={"format": "json"}, headers=alice).json()
    marked = [c["mark"] for row in grid["cells"] for c in row if c["mark"]]
    assert [(m["status"], m["user"]) for m in marked] == [("flagged", "alice")]
    status = client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["grid"]
    assert [c["mark"]["status"] for row in status["cells"] for c in row if c["mark"]] == ["flagged"]
