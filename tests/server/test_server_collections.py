"""Collections over a real `docpipe serve` (127.0.0.1, extractive answers, per-user keys): several contracts uploaded
into a collection in one request, asked and searched as one with every citation naming its contract; what
keys of another matter and read-only keys cannot do; and each new input abused (names, files, ids)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.contracts import CONTRACTS, NAMED_QUESTION, contract, lines_pdf
from support.server import Client, assert_error, new_key, serving

from docpipe import AccessLog

pytestmark = pytest.mark.integration

MAX_UPLOAD_MB = 0.05  # 51 KB: the generated contracts are about 2 KB, the "oversized" one is over it


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("collections") / "home"
    home.mkdir()
    keys = {
        "alice": new_key(home, "alice", "deal-x:write"),
        "carol": new_key(home, "carol", "deal-x:read"),
        "bob": new_key(home, "bob", "deal-y:write"),
    }
    args = ("--engine", "extractive", "--no-ui", "--max-upload-mb", str(MAX_UPLOAD_MB))
    with serving(home, *args, token=None) as served:
        yield {"served": served, "home": home, "keys": keys}


def client(world: dict, user: str, matter: str | None = None) -> Client:
    return Client(world["served"], world["keys"][user], matter)


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def collection_dirs(root: Path) -> set[str]:
    """Returns every folder under `root` that is (or would be) a collection's: the abuse tests' witness."""
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and "collections" in p.parts}


def test_a_collection_uploaded_in_one_request_is_asked_as_one(world: dict) -> None:
    alice, carol = client(world, "alice"), client(world, "carol")
    assert alice.create("deal-room").status_code == 201
    again = alice.create("deal-room")
    assert again.status_code == 200 and again.json()["documents"] == 0

    added = alice.add_files("deal-room", CONTRACTS)
    assert added.status_code == 200, added.text
    report = added.json()
    assert report["failed"] == [] and report["present"] == []
    assert sorted(m["name"] for m in report["added"]) == sorted(CONTRACTS)
    ids = {m["name"]: m["id"] for m in report["added"]}
    # They are documents of the matter too, under the same names.
    listed = {d["id"]: d["name"] for d in alice.get("/v1/documents").json()["documents"]}
    assert all(listed.get(doc_id) == name for name, doc_id in ids.items()), listed
    assert {c["name"]: c["documents"] for c in carol.get("/v1/collections").json()["collections"]} == {"deal-room": 3}
    members = carol.get("/v1/collections/deal-room").json()["documents"]
    assert sorted(m["name"] for m in members) == sorted(CONTRACTS) and all(m["pages"] == 1 for m in members)

    # The reader asks the collection; the contract the question names is the one cited first, quoting its term.
    asked = carol.post("/v1/collections/deal-room/ask", json={"question": NAMED_QUESTION})
    assert asked.status_code == 200, asked.text
    [answer] = asked.json()["answers"]
    assert answer["collection"] == "deal-room"
    citations = answer["citations"]
    assert citations and all(ids.get(c["document_name"]) == c["document_id"] for c in citations), citations
    assert citations[0]["document_name"] == "globex-license.pdf", citations
    globex = [c for c in citations if c["document_name"] == "globex-license.pdf"]
    assert any("thirty (30)" in c["quote"] for c in globex), [(c["document_name"], c["quote"]) for c in citations]
    assert all(c["pages"] == "p. 1" and c["heading"] for c in citations)
    # Stored, and read back by id like a document's answer.
    again = carol.get(f"/v1/answers/{answer['id']}")
    assert again.status_code == 200 and again.json()["citations"] == citations

    hits = carol.post("/v1/collections/deal-room/search", json={"query": "governing law of the agreement", "k": 6})
    assert hits.status_code == 200, hits.text
    found = hits.json()["hits"]
    assert found and all(ids.get(h["document_name"]) == h["document_id"] for h in found), found
    assert len({h["document_id"] for h in found}) >= 2  # across the contracts, each hit naming its own

    # Uploading the same contracts again adds nothing new.
    repeat = alice.add_files("deal-room", {"globex-license.pdf": CONTRACTS["globex-license.pdf"]}).json()
    assert repeat["added"] == [] and [m["id"] for m in repeat["present"]] == [ids["globex-license.pdf"]]

    # The access log has each document added and the question's hash, never its text; the server log neither.
    entries = AccessLog(world["home"]).read(user="alice")
    assert {e["document"] for e in entries if e["action"] == "collection_add" and e["outcome"] == "ok"} >= set(
        ids.values()
    )
    log = world["served"].log.read_text(errors="replace")
    assert NAMED_QUESTION not in log and "globex-license.pdf" not in log and "deal-room" not in log


def test_remove_a_member_then_delete_the_collection(world: dict) -> None:
    alice = client(world, "alice")
    assert alice.create("to-remove").status_code == 201
    added = alice.add_files("to-remove", {n: CONTRACTS[n] for n in ("acme-supply.pdf", "initech-services.pdf")}).json()
    acme = next(m["id"] for m in added["added"] if m["name"] == "acme-supply.pdf")
    gone = alice.delete(f"/v1/collections/to-remove/documents/{acme}")
    assert gone.status_code == 200 and gone.json()["documents"] == 1
    assert [m["name"] for m in alice.get("/v1/collections/to-remove").json()["documents"]] == ["initech-services.pdf"]
    assert_error(alice.delete(f"/v1/collections/to-remove/documents/{acme}"), 404, "not_found", "to-remove")
    assert acme in {d["id"] for d in alice.get("/v1/documents").json()["documents"]}  # still in the matter

    folder = world["home"] / "matters" / "deal-x" / "collections" / "to-remove"
    assert folder.is_dir()
    deleted = alice.delete("/v1/collections/to-remove")
    assert deleted.status_code == 200 and deleted.json() == {"matter": "deal-x", "deleted": "to-remove", "documents": 1}
    assert not folder.exists()
    assert_error(alice.get("/v1/collections/to-remove"), 404, "not_found")
    assert_error(alice.delete("/v1/collections/to-remove"), 404, "not_found")
    assert "to-remove" not in {c["name"] for c in alice.get("/v1/collections").json()["collections"]}


def test_another_matters_key_finds_no_collection_and_a_reader_changes_none(world: dict) -> None:
    alice, bob, carol = client(world, "alice"), client(world, "bob"), client(world, "carol")
    assert alice.create("walled").status_code == 201
    ids = [
        m["id"] for m in alice.add_files("walled", {"acme-supply.pdf": CONTRACTS["acme-supply.pdf"]}).json()["added"]
    ]
    for who in (bob, client(world, "bob", "deal-y")):
        assert "walled" not in {c["name"] for c in who.get("/v1/collections").json()["collections"]}
        missing = assert_error(who.get("/v1/collections/walled"), 404, "not_found")
        # Exactly what a name no matter uses gets: nothing tells that the collection exists elsewhere.
        assert missing == assert_error(who.get("/v1/collections/never-made"), 404, "not_found").replace(
            "never-made", "walled"
        )
        assert_error(who.post("/v1/collections/walled/search", json={"query": "notice"}), 404, "not_found")
        assert_error(who.post("/v1/collections/walled/ask", json={"question": "notice?"}), 404, "not_found")
        assert_error(who.add_files("walled", {"x.pdf": CONTRACTS["globex-license.pdf"]}), 404, "not_found")
        assert_error(who.add_ids("walled", ids), 404, "not_found")
        assert_error(who.delete(f"/v1/collections/walled/documents/{ids[0]}"), 404, "not_found")
        assert_error(who.delete("/v1/collections/walled"), 404, "not_found")
    # Naming alice's matter does not help: bob has no key for it.
    into = client(world, "bob", "deal-x")
    assert_error(into.get("/v1/collections/walled"), 404, "not_found", "no matter")
    assert_error(into.post("/v1/collections/walled/ask", json={"question": "notice?"}), 404, "not_found")
    assert_error(into.add_files("walled", {"x.pdf": CONTRACTS["globex-license.pdf"]}), 404, "not_found")
    # Carol reads deal-x: she may ask, not change.
    assert carol.post("/v1/collections/walled/ask", json={"question": "What is the notice period?"}).status_code == 200
    assert_error(carol.create("carols"), 403, "forbidden", "needs write")
    assert_error(carol.add_files("walled", {"x.pdf": CONTRACTS["globex-license.pdf"]}), 403, "forbidden")
    assert_error(carol.add_ids("walled", ids), 403, "forbidden")
    assert_error(carol.delete(f"/v1/collections/walled/documents/{ids[0]}"), 403, "forbidden")
    assert_error(carol.delete("/v1/collections/walled"), 403, "forbidden")
    assert [m["id"] for m in alice.get("/v1/collections/walled").json()["documents"]] == ids


BAD_NAMES = ["..", "../../outside", ".hidden", "a/b", "x" * 64, "a b", "deal\u202ex", "-dash", "", "é"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_collection_name_is_refused_and_creates_nothing(world: dict, name: str) -> None:
    alice = client(world, "alice")
    root = world["home"].parent
    before = collection_dirs(root)
    response = alice.create(name)
    assert_error(response, 400, "bad_input", "not a collection name")
    assert collection_dirs(root) == before
    assert not (root / "outside").exists() and not (world["home"] / "outside").exists()


@pytest.mark.parametrize("raw", ["..%2F..%2Foutside", "%2e%2e", ".hidden", "a%20b"])
def test_a_bad_name_in_the_path_is_refused_and_creates_nothing(world: dict, raw: str) -> None:
    alice = client(world, "alice")
    root = world["home"].parent
    before = collection_dirs(root)
    upload = alice.add_files(raw, {"acme-supply.pdf": CONTRACTS["acme-supply.pdf"]})
    ask = alice.post(f"/v1/collections/{raw}/ask", json={"question": "notice?"})
    for response in (upload, ask):
        # A name the router cannot match is no route (404); one it matches is checked (400).
        assert response.status_code in (400, 404), response.text
        assert response.json()["error"]["type"] in ("bad_input", "not_found"), response.text
    assert collection_dirs(root) == before
    assert not list(root.rglob("outside"))


def test_oversized_empty_and_non_pdf_files_fail_alone(world: dict) -> None:
    alice = client(world, "alice")
    assert alice.create("mixed").status_code == 201
    big = lines_pdf(*[f"Line {n} of a long schedule of prices " + "x" * 60 for n in range(1500)], compress=False)
    assert len(big) > MAX_UPLOAD_MB * 1024 * 1024  # a real PDF, refused for its size alone
    files = {
        "good.pdf": CONTRACTS["initech-services.pdf"],
        "huge.pdf": big,
        "notes.pdf": b"these are meeting notes, not a PDF\n" * 20,
        "empty.pdf": b"",
    }
    response = alice.add_files("mixed", files)
    assert response.status_code == 200, response.text
    report = response.json()
    assert [m["name"] for m in report["added"]] == ["good.pdf"]
    reasons = {f["file"]: f["reason"] for f in report["failed"]}
    assert set(reasons) == {"huge.pdf", "notes.pdf", "empty.pdf"}, reasons
    assert "upload limit" in reasons["huge.pdf"] and "--max-upload-mb" in reasons["huge.pdf"]
    assert "PDF" in reasons["notes.pdf"] and "empty" in reasons["empty.pdf"]
    assert not any(str(world["home"]) in r or "/tmp" in r for r in reasons.values()), reasons  # no server path
    assert [m["name"] for m in alice.get("/v1/collections/mixed").json()["documents"]] == ["good.pdf"]
    names = {d["name"] for d in alice.get("/v1/documents").json()["documents"]}
    assert not names & {"huge.pdf", "notes.pdf", "empty.pdf"}
    # Nothing of the refused files is left in the upload spool.
    assert not list((world["home"] / "tmp").glob("collection-*"))


def test_a_body_over_the_multi_file_limit_and_other_media_types_are_refused(world: dict) -> None:
    alice = client(world, "alice")
    assert alice.create("limits").status_code == 201
    over = b"x" * (int(MAX_UPLOAD_MB * 1024 * 1024) * 16 + 1)
    assert_error(alice.add_files("limits", {"a.pdf": over}), 413, "body_too_large")
    plain = alice.post("/v1/collections/limits/documents", content=b"ids", headers={"Content-Type": "text/plain"})
    assert_error(plain, 415, "unsupported_media_type")
    nothing = alice.post("/v1/collections/limits/documents", files=[("password", (None, "x"))])
    assert_error(nothing, 400, "bad_input", "nothing to add")
    assert alice.get("/v1/collections/limits").json()["documents"] == []


def test_ids_must_be_documents_of_the_callers_matter(world: dict) -> None:
    alice, bob = client(world, "alice"), client(world, "bob")
    assert alice.create("by-id").status_code == 201
    mine = alice.post(
        "/v1/documents",
        params={"name": "mine.pdf"},
        content=contract("Lease Agreement", "Umbrella Realty", "fifteen (15)", "Ohio"),
        headers={"Content-Type": "application/pdf"},
    ).json()["id"]
    theirs = bob.post(
        "/v1/documents",
        params={"name": "bobs.pdf"},
        content=contract("Loan Agreement", "Hooli Capital", "ten (10)", "Nevada", "Zanzibar clause."),
        headers={"Content-Type": "application/pdf"},
    ).json()["id"]
    # Another matter's document: 404, as if it did not exist, and nothing is added (not even alice's own).
    assert_error(alice.add_ids("by-id", [mine, theirs]), 404, "not_found", theirs[:12])
    multipart = alice.post("/v1/collections/by-id/documents", files=[("ids", (None, theirs))])
    assert_error(multipart, 404, "not_found")
    for bad in ["../../etc/passwd", mine.upper(), mine[:63], mine[:12], mine + "0", "", " " + mine]:
        assert_error(alice.add_ids("by-id", [bad]), 404, "not_found")
    assert_error(alice.add_ids("by-id", [5]), 422, "invalid_request")
    assert_error(alice.add_ids("by-id", [mine] * 257), 422, "invalid_request")
    assert alice.get("/v1/collections/by-id").json()["documents"] == []

    added = alice.add_ids("by-id", [mine])
    assert added.status_code == 200, added.text
    assert [(m["id"], m["name"]) for m in added.json()["added"]] == [(mine, "mine.pdf")]
    hits = alice.post("/v1/collections/by-id/search", json={"query": "Zanzibar Hooli"}).json()["hits"]
    assert all(h["document_id"] == mine for h in hits)


def test_deleting_a_document_takes_it_out_of_every_collection_of_the_matter(world: dict) -> None:
    alice = client(world, "alice")
    assert alice.create("shrinks").status_code == 201
    phrase = "Quetzalcoatl indemnity basket"
    gone = contract("Escrow Agreement", "Vandelay Industries", "five (5)", "Maine", phrase)
    report = alice.add_files("shrinks", {"escrow.pdf": gone, "acme.pdf": CONTRACTS["acme-supply.pdf"]}).json()
    doc_id = next(m["id"] for m in report["added"] if m["name"] == "escrow.pdf")
    assert alice.post("/v1/collections/shrinks/ask", json={"question": phrase}).status_code == 200
    assert alice.delete(f"/v1/documents/{doc_id}").status_code == 200
    assert [m["name"] for m in alice.get("/v1/collections/shrinks").json()["documents"]] == ["acme.pdf"]
    asked = alice.post("/v1/collections/shrinks/ask", json={"question": "Which law governs the agreement?"})
    assert asked.status_code == 200 and doc_id not in json.dumps(asked.json())
    # Its answers went with it, also the collection answer that quoted it.
    holders = [
        str(p.relative_to(world["home"]))
        for p in world["home"].rglob("*")
        if p.is_file()
        and "audit" not in p.parts
        and (doc_id.encode() in p.read_bytes() or b"Quetzalcoatl" in p.read_bytes())
    ]
    assert holders == [], holders


def test_which_contracts_is_asked_of_each_contract_over_rest(world: dict) -> None:
    alice, carol = client(world, "alice"), client(world, "carol")
    assert alice.create("each-room").status_code == 201
    assert alice.add_files("each-room", CONTRACTS).status_code == 200
    asked = carol.post(
        "/v1/collections/each-room/ask", json={"question": "Which contracts have a governing law clause?"}
    )
    assert asked.status_code == 200, asked.text
    [answer] = asked.json()["answers"]
    lists = answer["each"]
    assert sorted(sum(lists.values(), [])) == sorted(CONTRACTS)
    assert answer["text"].startswith("Asked of each of the 3 contracts of each-room")
    assert {c["document_name"] for c in answer["citations"]} == set(lists["found"] + lists["to_check"])
    pooled = carol.post(
        "/v1/collections/each-room/ask",
        json={"question": "Which contracts have a governing law clause?", "each": False},
    )
    assert pooled.status_code == 200 and pooled.json()["answers"][0]["each"] is None
    assert_error(
        carol.post("/v1/collections/each-room/ask", json={"question": "Governing law?", "each": "sometimes"}),
        422,
        "invalid_request",
        "each",
    )
