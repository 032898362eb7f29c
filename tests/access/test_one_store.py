"""One store, seen the same way from the command line and from `docpipe serve`: a collection ingested with the CLI is
there over REST, a grid the CLI computed is reused by a REST review job, the CLI's `--matter` keeps a matter's
collection from every other matter's key, and what the CLI does to a matter's documents is in the access log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_cli
from support.contracts import CONTRACTS, contract
from support.server import Client, new_key, serving

from docpipe import AccessLog

pytestmark = pytest.mark.integration

QUESTION = "Which law governs this agreement?"
PRIVATE = {"umbrella-nda.pdf": contract("Mutual NDA", "Umbrella Holdings", "ten (10)", "Ohio")}


def cli(home: Path, *args: object) -> str:
    done = run_cli(home, "--preset", "test", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made on the command line only: the room in the store's own matter, a private deal in deal-x."""
    root = tmp_path_factory.mktemp("one-store")
    folder, private = root / "room", root / "private"
    for target, files in ((folder, CONTRACTS), (private, PRIVATE)):
        target.mkdir()
        for name, data in files.items():
            (target / name).write_bytes(data)
    home = root / "home"
    cli(home, "ingest", "--collection", "room", folder)
    cli(home, "ingest", "--matter", "deal-x", "--collection", "private-room", private)
    grid = json.loads(cli(home, "review", "--collection", "room", "-q", QUESTION, "--format", "json"))
    assert len(grid["rows"]) == len(CONTRACTS)
    return home


@pytest.fixture(scope="module")
def open_server(home: Path) -> Iterator[Client]:
    """`docpipe serve` on the same store without keys: its single local user works in the store's own matter."""
    with serving(home, "--engine", "extractive", "--no-ui", token=None) as served:
        yield Client(served, "")


def test_the_cli_collection_is_the_servers(open_server: Client) -> None:
    collections = open_server.get("/v1/collections").json()
    names = [c["name"] for c in collections["collections"]]
    assert names == ["room"]  # deal-x's collection is not the store's own
    documents = open_server.get("/v1/documents").json()["documents"]
    assert sorted(d["name"] for d in documents) == sorted(CONTRACTS)
    asked = open_server.post("/v1/collections/room/ask", json={"question": QUESTION, "each": False})
    assert asked.status_code == 200, asked.text
    [answer] = asked.json()["answers"]
    assert answer["citations"] and {c["document_name"] for c in answer["citations"]} <= set(CONTRACTS)


def test_cells_the_cli_computed_are_reused_by_a_rest_job(open_server: Client) -> None:
    started = open_server.review("room", questions=[QUESTION])
    assert started.status_code in (200, 202), started.text
    job = open_server.wait(started.json()["id"], "done")
    assert job["progress"]["cached"] == job["progress"]["total"] == len(CONTRACTS)


def test_a_matters_collection_is_seen_by_its_keys_only(home: Path, open_server: Client) -> None:
    # Keys turn the store into a shared server: the local user is gone, each key sees its matters.
    olga = new_key(home, "olga", "deal-x:read")
    bob = new_key(home, "bob", "deal-y:read")
    with serving(home, "--engine", "extractive", "--no-ui", token=None) as served:
        mine = Client(served, olga, "deal-x")
        assert [c["name"] for c in mine.get("/v1/collections").json()["collections"]] == ["private-room"]
        assert [d["name"] for d in mine.get("/v1/documents").json()["documents"]] == list(PRIVATE)
        theirs = Client(served, bob, "deal-y")
        assert theirs.get("/v1/collections").json()["collections"] == []
        assert theirs.get("/v1/collections/private-room").status_code == 404
        assert Client(served, bob, "deal-x").get("/v1/collections").status_code == 404


def test_the_cli_acts_in_a_matter_only_on_what_it_holds(home: Path) -> None:
    # The matter's collection is not the store's own, and a file reviewed by path stays in the own matter.
    refused = run_cli(home, "--preset", "test", "ask", "--collection", "private-room", QUESTION)
    assert refused.returncode != 0 and "no collection named 'private-room'" in refused.stderr
    refused = run_cli(home, "--preset", "test", "review", "--matter", "deal-x", home.parent / "private", "-q", QUESTION)
    assert refused.returncode != 0 and "a collection of the matter" in refused.stderr
    bad = run_cli(home, "--preset", "test", "ls", "--matter", "../x")
    assert bad.returncode != 0 and "matter" in bad.stderr
    listed = cli(home, "ls", "--matter", "deal-x")
    assert "umbrella-nda.pdf" in listed and "acme-supply.pdf" not in listed
    answer = cli(home, "ask", "--matter", "deal-x", "--collection", "private-room", QUESTION)
    assert "umbrella-nda.pdf" in answer


def test_what_the_cli_does_in_a_matter_is_in_the_access_log(home: Path) -> None:
    cli(home, "ask", "--matter", "deal-x", "--collection", "private-room", "What is the notice period?")
    entries = [e for e in AccessLog(home).read() if e["user"] == "owner"]
    actions = {(e["matter"], e["action"]) for e in entries}
    assert ("default", "collection_add") in actions and ("default", "review") in actions
    assert ("deal-x", "collection_add") in actions and ("deal-x", "ask") in actions
    added = [e for e in entries if e["matter"] == "deal-x" and e["action"] == "collection_add"]
    assert len(added) == len(PRIVATE) and all(e["document"] and e["outcome"] == "ok" for e in added)
    assert all("os user" in e.get("detail", "") for e in entries)
