"""Collections: a named set of stored documents asked as one (docpipe.pipeline.Collection, the routing and pooled
index of docpipe.retrieve.collection, the member records of docpipe.storage.collections).

Real parts: generated PDFs, the real extraction worker, FAISS, bm25s; the `test` preset's hashing embedder keeps
them fast (routing is lexical, over the documents' cards, whatever the embedder).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from support.contracts import PARTIES, agreement_pdf, lines_pdf

from docpipe import DocPipe, Settings
from docpipe.embed.hashing import HashingEmbedder
from docpipe.errors import ConfigError, InputError
from docpipe.ingest.build import stored_parts
from docpipe.ingest.sentences import document_texts
from docpipe.retrieve import collection as collection_module
from docpipe.retrieve.cards import strip_naming
from docpipe.retrieve.collection import CollectionIndex
from docpipe.storage.collections import CollectionStore, Member


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds (to show what adding a member costs)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return super().embed(texts)


@pytest.fixture
def room(tmp_path: Path) -> Path:
    folder = tmp_path / "room"
    (folder / "sub").mkdir(parents=True)
    for n, (seller, buyer, notice, law) in enumerate(PARTIES):
        where = folder / "sub" if n == 2 else folder
        (where / f"{seller.split()[0].lower()}_supply.pdf").write_bytes(agreement_pdf(seller, buyer, notice, law))
    (folder / "notes.txt").write_text("not a contract")
    return folder


@pytest.fixture
def pipe(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), embedder=CountingEmbedder())


def test_add_a_folder_reports_added_present_and_failed(pipe: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = pipe.collection("deal-x")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 this is not a PDF body")
    report = coll.add([room, broken, tmp_path / "missing.pdf"])
    # a file found in a folder goes by its path inside it
    assert sorted(m.name for m in report.added) == [
        "fabrikam_supply.pdf",
        "northwind_supply.pdf",
        "sub/wingtip_supply.pdf",
    ]
    failed = dict(report.failed)
    assert set(failed) == {"broken.pdf", str(tmp_path / "missing.pdf")}
    assert "no such file" in failed[str(tmp_path / "missing.pdf")]
    assert failed["broken.pdf"]  # the extraction's reason, not an empty string
    assert report.extracted_pages == 3 and not report.ok
    assert [m.name for m in coll.documents] == [m.name for m in report.added]
    assert "3 added, 0 already in it, 2 failed" in report.summary()
    assert [c.name for c in pipe.collections()] == ["deal-x"]


def test_members_are_recorded_in_batches_and_an_add_stopped_midway_keeps_what_finished(
    pipe: DocPipe, room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from docpipe.storage.collections import CollectionStore

    writes: list[int] = []
    real_add = CollectionStore.add

    def counting_add(self, name, members):  # the real method: counts the record's rewrites
        writes.append(len(members))
        return real_add(self, name, members)

    monkeypatch.setattr(CollectionStore, "add", counting_add)
    # Only the count and the end flush here: on a loaded machine two files can take longer than the 2 s flush.
    monkeypatch.setattr("docpipe.collection.handle._RECORD_SECONDS", 3600.0)
    coll = pipe.collection("deal-x")

    def stop_after_two(step) -> None:
        if step.kind == "file" and step.done == 2:
            raise KeyboardInterrupt  # Ctrl-C after the second file

    with pytest.raises(KeyboardInterrupt):
        coll.add(room, workers=1, progress=stop_after_two)
    assert len(coll.documents) == 2  # both finished files recorded, though the add stopped
    assert writes == [2]  # in one rewrite of the record, not one per file
    writes.clear()
    report = coll.add(room, workers=1)
    assert len(report.present) == 2 and len(report.added) == 1 and writes == [1]


def test_files_of_one_name_in_two_folders_stay_apart_and_a_failed_add_creates_nothing(
    pipe: DocPipe, room: Path, tmp_path: Path
) -> None:
    (room / "other").mkdir()
    (room / "other" / "northwind_supply.pdf").write_bytes(
        agreement_pdf("Umbrella Corp", "Initech LLC", "ten (10)", "Ohio")
    )
    coll = pipe.collection("deal-x")
    coll.add(room)
    assert {"northwind_supply.pdf", "other/northwind_supply.pdf"} <= {m.name for m in coll.documents}
    empty = tmp_path / "empty"
    empty.mkdir()
    report = pipe.collection("nothing").add(empty)
    assert report.failed == [(str(empty), "the folder holds no .pdf or .docx file")]
    assert not pipe.collection("nothing").exists and [c.name for c in pipe.collections()] == ["deal-x"]


def test_a_question_may_name_the_contract_by_its_file_name(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room)
    hits = pipe.search(coll, "fabrikam_supply.pdf: how much notice ends it for convenience?")
    assert hits and {h.document_name for h in hits} == {"fabrikam_supply.pdf"}


def test_adding_again_resumes_and_a_document_is_stored_once_for_every_collection(pipe: DocPipe, room: Path) -> None:
    first = pipe.collection("deal-x").add(room)
    again = pipe.collection("deal-x").add(room)
    assert len(again.present) == 3 and not again.added and again.extracted_pages == 0
    other = pipe.collection("portfolio").add(room / "northwind_supply.pdf")
    assert [m.id for m in other.added] == [m.id for m in first.added if m.name == "northwind_supply.pdf"]
    assert other.extracted_pages == 0  # in the store already: not extracted or embedded again
    assert len(pipe.store.document_ids()) == 3


def test_a_question_naming_a_contract_is_answered_from_it(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room)
    for seller, buyer, notice, _ in PARTIES:
        question = f"In the Supply Agreement between {seller} and {buyer}, how much notice ends it for convenience?"
        hits = pipe.search(coll, question)
        assert hits and {h.document_name.rsplit("/", 1)[-1] for h in hits} == {
            f"{seller.split()[0].lower()}_supply.pdf"
        }
        answer = pipe.ask(coll, question)
        assert answer.collection == "deal-x"
        assert answer.citations and all(c.verified for c in answer.citations)
        names = {c.document_name.rsplit("/", 1)[-1] for c in answer.citations}
        assert names == {f"{seller.split()[0].lower()}_supply.pdf"}
        assert any(notice in c.quote for c in answer.citations)


def consortium_pdf() -> bytes:
    """A cable consortium's agreement as such contracts are filed: a table of contents opens it, its parties are
    named only in the signature blocks, and exhibits run on for pages after them."""
    titles = ["DEFINITIONS AND INTERPRETATION", "BASIC PRINCIPLES OF THE NETWORK", "CONFIGURATION OF SEGMENTS"]
    contents = [f"{n} {title} {n + 2}" for n, title in enumerate(titles * 20)]
    clauses = [f"{n}.1 The Segment works listed for clause {n} are carried out by the Managing Group." for n in (1, 2)]
    signatures = ["IN WITNESS WHEREOF the parties have signed this Agreement."]
    for party in ("Halcyon Telecom plc", "Meridian Carrier Corp."):
        signatures += ["For and on behalf of", party, "By: ____________________"]
    exhibit = ["EXHIBIT A SEGMENT SPECIFICATION"] + [
        f"Route position {n}: fibre pair {n % 4}, repeater spacing 60 km, depth {200 + n * 15} m." for n in range(60)
    ]
    return lines_pdf("CABLE NETWORK AGREEMENT", "TABLE OF CONTENTS", *contents, *clauses, *signatures, *exhibit)


def test_a_contract_that_names_its_parties_only_where_they_sign_is_routed_by_them(pipe: DocPipe, room: Path) -> None:
    (room / "consortium.pdf").write_bytes(consortium_pdf())
    coll = pipe.collection("deal-x")
    coll.add(room)
    text = coll.document(next(m.id for m in coll.documents if m.name == "consortium.pdf")).text
    assert text.index("Halcyon") > 1500 and len(text) - text.index("Meridian") > 1000  # not on the card's ends
    index = pipe.collection_service.sync(coll)
    route = index.route("Consider the agreement between Halcyon Telecom plc and Meridian Carrier Corp.: who pays?")
    assert [coll.document(d).name for d in route.named] == ["consortium.pdf"]


def test_naming_words_are_left_out_of_the_search_inside_the_contract() -> None:
    card = "Supply Agreement between Northwind Traders Inc. and Contoso Pharmaceuticals LLC"
    rare = {"northwind", "contoso"}.__contains__
    question = "In the Supply Agreement between Northwind Traders and Contoso, how much notice ends it?"
    assert strip_naming(question, card, rare) == "In the , how much notice ends it?"
    # A word of the card that is common in the collection, alone, is part of the question, not a name.
    assert strip_naming("What does the agreement say about supply?", card, rare) == (
        "What does the agreement say about supply?"
    )


def test_a_question_naming_no_contract_ranks_across_all_and_every_citation_names_its_contract(
    pipe: DocPipe, room: Path
) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room)
    question = "Which law governs the agreement?"
    index = pipe.collection_service.sync(coll)
    assert index.route(question).named == ()
    hits = pipe.search(coll, question, k=30)
    assert len({h.document_id for h in hits}) == 3
    assert {h.document_id for h in hits if "governed by the laws" in h.text} == {m.id for m in coll.documents}
    assert all(h.document_name.endswith("_supply.pdf") for h in hits)
    answer = pipe.ask(coll, question)
    assert answer.collection == "deal-x" and len(answer.document_ids) >= 2
    assert answer.citations and all(c.document_id in answer.document_ids for c in answer.citations)
    for citation in answer.citations:  # each quote is verified in the contract it names
        doc = coll.document(citation.document_id)
        assert citation.verified and " ".join(citation.quote.split())[:40] in " ".join(doc.text.split())
    context = pipe.context(coll, question, budget_tokens=4000)
    assert context and all(h.document_id for h in context)
    # grouped by contract: once a contract's sections end, it does not come back
    seen: list[str] = []
    for hit in context:
        if not seen or seen[-1] != hit.document_id:
            assert hit.document_id not in seen
            seen.append(hit.document_id)


def test_adding_a_member_embeds_only_the_new_document(pipe: DocPipe, room: Path, tmp_path: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add([room / "northwind_supply.pdf", room / "fabrikam_supply.pdf"])
    embedder = pipe.embedder
    assert isinstance(embedder, CountingEmbedder)
    before = embedder.texts
    report = coll.add(room / "sub" / "wingtip_supply.pdf")
    index = pipe.collection_service.sync(coll)
    new = report.added[0]
    passages = index.counts[index.ids.index(new.id)]
    stored = stored_parts(new.id, store=pipe.store, fingerprint=pipe.fingerprint, vectors=False)
    assert stored is not None
    sentences = len(document_texts(stored[0].sections))
    # Its passages, its sentences (for offline answers) and its card, nothing of the others.
    assert embedder.texts - before == passages + sentences + 1
    assert index.size == sum(index.counts)


def test_removing_a_member_removes_it_from_routing_and_the_pooled_index(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room)
    gone = next(m for m in coll.documents if m.name == "sub/wingtip_supply.pdf")
    assert coll.remove(gone.name) and gone.id not in coll
    assert not coll.remove(gone.name)
    index = pipe.collection_service.sync(coll)
    assert gone.id not in index.ids and index.size == sum(index.counts)
    hits = pipe.search(coll, "Which law governs the agreement?", k=10)
    assert hits and gone.id not in {h.document_id for h in hits}
    seller, buyer = PARTIES[2][:2]
    answer = pipe.ask(coll, f"In the Supply Agreement between {seller} and {buyer}, what is the notice period?")
    assert gone.id not in {c.document_id for c in answer.citations}
    assert pipe.store.document_ids().count(gone.id) == 1  # still in the store


def test_deleting_a_document_from_the_store_drops_it_from_every_collection(pipe: DocPipe, room: Path) -> None:
    pipe.collection("a").add(room)
    pipe.collection("b", matter="deal-y").add(room / "northwind_supply.pdf")
    doc_id = next(m.id for m in pipe.collection("a").documents if m.name == "northwind_supply.pdf")
    assert pipe.delete_document(doc_id)
    assert doc_id not in pipe.collection("a") and doc_id not in pipe.collection("b", matter="deal-y")


def test_collections_of_one_matter_are_invisible_to_another(pipe: DocPipe, room: Path) -> None:
    pipe.collection("deal", matter="matter-a").add(room)
    assert [c.name for c in pipe.collections(matter="matter-a")] == ["deal"]
    assert pipe.collections(matter="matter-b") == [] and pipe.collections() == []
    assert len(pipe.collection("deal", matter="matter-b")) == 0
    with pytest.raises(InputError, match="holds no documents"):
        pipe.search(pipe.collection("deal", matter="matter-b"), "Which law governs?")


@pytest.mark.parametrize("name", ["../escape", "a/b", "/etc", "", "x" * 64, ".hidden", "dé"])
def test_a_collection_name_that_is_not_a_plain_name_is_refused(pipe: DocPipe, tmp_path: Path, name: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfigError, match="not a collection name"):
        pipe.collection(name)
    with pytest.raises(ConfigError, match="not a collection name"):
        CollectionStore(tmp_path / "home" / "collections").add(name, [Member("ab" * 32, "x.pdf")])
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert not (tmp_path / "escape").exists() and not (tmp_path / "home" / "escape").exists()


def test_an_unknown_member_is_a_clear_error(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room / "northwind_supply.pdf")
    with pytest.raises(InputError, match="is not in collection deal-x"):
        coll.document("contoso.pdf")
    assert coll.document(coll.documents[0].id[:10]).name == "northwind_supply.pdf"
    with pytest.raises(ConfigError, match="analyze runs the checklist over one document"):
        pipe.analyze(coll)


def test_the_collection_files_are_private_whatever_the_umask(pipe: DocPipe, room: Path) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        coll = pipe.collection("deal-x")
        coll.add(room)
        pipe.search(coll, "Which law governs the agreement?")  # the pooled BM25 index is saved too
    finally:
        os.umask(old)
    folder = pipe.collection_service.sync(coll).folder
    paths = [folder, *folder.rglob("*"), folder.parent / "collection.json"]
    assert (folder / "bm25").is_dir()
    for path in paths:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"


def test_the_index_is_read_back_not_rebuilt_and_a_damaged_one_is_rebuilt(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add(room)
    pipe.search(coll, "Which law governs the agreement?")  # builds and saves the pooled BM25 index too
    embedder = CountingEmbedder()
    fresh = DocPipe(pipe.settings, embedder=embedder)
    index = fresh.collection_service.sync(fresh.collection("deal-x"))
    assert embedder.texts == 0 and index.size == sum(index.counts) and len(index.ids) == 3
    assert not index.build_bm25(fresh.collection_service.stored_passage_texts)  # saved with the index: not built again
    folder = index.folder
    (folder / "passages.faiss").write_bytes(b"damaged")
    rebuilt = CollectionIndex.load(folder, embedder)
    assert rebuilt.ids == []  # unreadable: dropped, and built again from the members on next use
    again = DocPipe(pipe.settings, embedder=CountingEmbedder()).collection_service.sync(fresh.collection("deal-x"))
    assert len(again.ids) == 3 and again.size == index.size


def test_a_pickle_planted_in_the_collection_index_is_never_run(pipe: DocPipe, room: Path, tmp_path: Path) -> None:
    """Abuse: the index files are read with allow_pickle=False, checksums or not (fails with allow_pickle=True)."""
    coll = pipe.collection("deal-x")
    coll.add(room)
    folder = pipe.collection_service.sync(coll).folder
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self):  # noqa: ANN204 - pickle protocol
            return (Path.write_text, (marker, "ran"))

    buffer = io.BytesIO()
    np.save(buffer, np.array([Payload()], dtype=object), allow_pickle=True)
    (folder / "cards.npy").write_bytes(buffer.getvalue())
    state = json.loads((folder / "state.json").read_text())
    from docpipe.storage.store import sha256_hex

    state["files"]["cards.npy"] = sha256_hex(buffer.getvalue())  # an attacker who can write can fix checksums
    (folder / "state.json").write_text(json.dumps(state))
    loaded = CollectionIndex.load(folder, pipe.embedder)
    assert not marker.exists()
    assert loaded.ids == []


def test_the_pooled_index_turns_ivf_past_the_crossover_and_still_finds_and_forgets(
    pipe: DocPipe, room: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collection_module, "POOLED_FLAT_BELOW", 8)
    coll = pipe.collection("deal-x")
    coll.add(room)
    index = pipe.collection_service.sync(coll)
    assert index.pooled_type == "ivf" and index.size == sum(index.counts)
    hits = pipe.search(coll, "Which law governs the agreement?", k=30)
    assert {h.document_id for h in hits if "governed by the laws" in h.text} == {m.id for m in coll.documents}
    coll.remove("fabrikam_supply.pdf")
    index = pipe.collection_service.sync(coll)
    assert index.pooled_type == "ivf" and index.size == sum(index.counts) and len(index.ids) == 2


def test_eval_collection_reports_right_contract_recall_and_other_contract_share(tmp_path: Path) -> None:
    """`docpipe eval-collection` on a data room in cuad-collection-dev format built here: three look-alike
    contracts, each question naming its contract; the naive pooled baseline runs beside it."""
    import csv
    import subprocess
    import sys

    room = tmp_path / "room"
    (room / "pdf").mkdir(parents=True)
    records = []
    with (room / "manifest.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["contract_id", "file", "title", "pdf_pages", "records", "pdf_sha256"])
        for seller, buyer, notice, law in PARTIES:
            file = f"pdf/{seller.split()[0]}.pdf"
            (room / file).write_bytes(agreement_pdf(seller, buyer, notice, law))
            title = f"Supply Agreement between {seller} and {buyer}"
            writer.writerow([seller, file, title, 1, 2, ""])
            for category, span in (
                ("Termination For Convenience", f"terminate this Agreement for convenience upon {notice} days"),
                ("Governing Law", f"governed by the laws of the State of {law}"),
            ):
                records.append(
                    {
                        "contract_id": seller,
                        "file": file,
                        "title": title,
                        "clause_category": category,
                        "question": f"Consider the {title}; what does it say about {category.lower()}?",
                        "answer_spans": [{"text": span, "pdf_pages": [1]}],
                    }
                )
    (room / "annotations.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    command = [sys.executable, "-m", "docpipe", "eval-collection", str(room), "--preset", "test"]
    command += ["--home", str(tmp_path / "home"), "--budgets", "512,2048", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["questions"] == 6 and report["contracts"] == 3
    assert report["doc_at_1"] == 1.0 and report["routed"] == 1.0
    assert report["recall_at_budget"]["2048"] == 1.0
    assert report["mismatch_at_budget"]["2048"] == 0.0  # named: nothing of the look-alikes
    naive = report["naive"]
    assert naive["questions"] == 6 and set(naive["recall_at_budget"]) == {"512", "2048"}
    assert naive["mismatch_at_budget"]["2048"] > 0.0  # one pooled index takes text of the other contracts
    bad = subprocess.run(command[:4] + [str(tmp_path)] + command[5:], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "annotations.jsonl" in bad.stderr


def test_callers_at_once_share_one_collection_index_without_errors(pipe: DocPipe, room: Path) -> None:
    """Threads of one DocPipe and a second DocPipe on the same store (another process's view) build and save
    the collection's index at the same time: every caller gets its answer, and the index on disk is whole."""
    from concurrent.futures import ThreadPoolExecutor

    pipe.collection("deal-x").add(room)
    other = DocPipe(pipe.settings, embedder=CountingEmbedder())
    question = "Which law governs the agreement?"
    jobs = [(pipe, question), (pipe, question), (other, question), (other, question)]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda job: job[0].ask(job[0].collection("deal-x"), job[1]), jobs))
    assert all(a.citations and a.collection == "deal-x" for a in answers)
    index = CollectionIndex.load(pipe.collection_service.sync(pipe.collection("deal-x")).folder, pipe.embedder)
    assert len(index.ids) == 3 and index.build_bm25(pipe.collection_service.stored_passage_texts) is False


def test_collections_never_load_numba_into_the_process(tmp_path: Path, room: Path) -> None:
    """bm25s imports numba when it can; numba's llvmlite breaks the in-process vLLM CPU engine's start
    (found by the full suite). A process that searches a collection must not have loaded it."""
    import subprocess
    import sys

    code = f"""
import sys
from docpipe import DocPipe, Settings
dp = DocPipe(Settings.preset("test", home={str(tmp_path / "home")!r}))
coll = dp.collection("deal-x")
coll.add({str(room)!r})
assert dp.search(coll, "Which law governs the agreement?")
print(sorted(m for m in ("numba", "llvmlite", "llvmlite.binding.ffi") if m in sys.modules))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_removing_members_keeps_the_pooled_bm25_index_and_adding_one_builds_it_again(pipe: DocPipe, room: Path) -> None:
    coll = pipe.collection("deal-x")
    coll.add([room / "northwind_supply.pdf", room / "fabrikam_supply.pdf", room / "sub" / "wingtip_supply.pdf"])
    pipe.search(coll, "Which law governs the agreement?")  # builds the pooled BM25 index
    gone = next(m for m in coll.documents if m.name == "wingtip_supply.pdf")
    coll.remove(gone.id)
    index = pipe.collection_service.sync(coll)
    # a third of the rows are of the removed member: over the share kept, so it is built again ...
    assert index.build_bm25(pipe.collection_service.stored_passage_texts)
    coll.add(room / "sub" / "wingtip_supply.pdf")  # back, under a new slot
    index = pipe.collection_service.sync(coll)
    assert index.build_bm25(pipe.collection_service.stored_passage_texts)  # a member added: built again
    # ... while a removal within the share passes the removed rows over without building anything
    other = DocPipe(pipe.settings, embedder=CountingEmbedder())
    big = other.collection("big")
    big.add(room)
    (room / "more").mkdir()
    for n in range(6):
        (room / "more" / f"c{n}.pdf").write_bytes(agreement_pdf(f"Seller{n} Corp", f"Buyer{n} Ltd", "ten (10)", "Ohio"))
    big.add(room / "more")
    other.search(big, "Which law governs the agreement?")
    left = next(m for m in big.documents if m.name == "c0.pdf")
    big.remove(left.id)
    index = other.collection_service.sync(big)
    assert not index.build_bm25(other.collection_service.stored_passage_texts)
    hits = other.search(big, "Which law governs the agreement?", k=50)
    assert hits and left.id not in {h.document_id for h in hits}


def test_a_context_over_several_contracts_pins_each_front_matter_once_and_counts_only_matches() -> None:
    from docpipe.retrieve.crossdoc import collection_context
    from docpipe.types import Hit

    def hit(doc: str, sid: str, score: float, tokens: int = 100, role: str = "match") -> Hit:
        return Hit(
            sid, sid, (sid,), 1, 1, f"{doc} {sid}", score, tokens, 0, role=role, document_id=doc, document_name=doc
        )

    fronts = {"a": hit("a", "s001", 0.0, role="front_matter"), "b": hit("b", "s001", 0.0, 2000, "front_matter")}
    by_doc = {
        "a": [hit("a", "s005", 0.9), hit("a", "s001", 0.5), hit("a", "s003", 0.4)],
        "b": [hit("b", "s002", 0.8)],
    }
    order = {"a": {"s001": 0, "s003": 1, "s005": 2}, "b": {"s001": 0, "s002": 1}}
    context = collection_context(by_doc, fronts, budget_tokens=4000, k=3, order=order)
    keys = [(h.document_id, h.section_id) for h in context]
    # a first (its best hit ranks first), its front matter pinned once though it also ranked; b's front matter
    # is over a quarter of the budget: not pinned; three matches, the pinned section not counted among them
    assert keys == [("a", "s001"), ("a", "s003"), ("a", "s005"), ("b", "s002")]
    assert context[0].role == "front_matter"
    assert sum(1 for h in context if h.role == "match") == 3


def test_a_model_answer_over_several_contracts_is_verified_in_the_contract_each_quote_names(
    tmp_path: Path, room: Path
) -> None:
    """The real echo engine answers over three look-alike contracts (prompt sections labelled d1.s003 ...);
    a quote attributed to the wrong contract is flagged, never verified in the one it names."""
    from docpipe import EchoEngine
    from docpipe.answer.collection import collection_generative, collection_request, group_by_document
    from docpipe.engine.base import GenerationResult

    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=EchoEngine())
    coll = dp.collection("deal-x")
    coll.add(room)
    question = "Which law governs the agreement?"
    answer = dp.ask(coll, question)
    assert answer.mode == "generative" and answer.collection == "deal-x" and len(answer.document_ids) == 3
    assert answer.citations and all(c.verified and c.document_id in answer.document_ids for c in answer.citations)
    assert answer.manifest().to_dict()["documents_sha256"] == answer.document_ids

    context = dp.context(coll, question)
    groups = group_by_document(context)
    assert len(groups) >= 2
    (first_id, _, _), (second_id, second_name, second_hits) = groups[0], groups[1]
    law_of = {d: h.text for d, _, hits in groups for h in hits if "governed by the laws" in h.text}
    first_clause = next(line for line in law_of[first_id].splitlines() if "governed by" in line)
    section = next(h.section_id for h in second_hits)
    forged = GenerationResult(text=f'"{first_clause}" [d2.{section}]')
    documents = {d: coll.document(d) for d, _, _ in groups}
    request = collection_request(question, context, settings=dp.settings, mode="no_think")
    checked = collection_generative(
        question,
        forged,
        context,
        documents,
        engine=dp.engine,
        request=request,
        settings=dp.settings,
        collection="deal-x",
        fingerprint=dp.fingerprint,
    )
    [citation] = checked.citations
    assert not citation.verified and citation.document_id == second_id and citation.document_name == second_name
    assert "unverified" in (checked.notice or "")
    honest = GenerationResult(text=f'"{first_clause}" [d1.{groups[0][2][0].section_id}]')
    kept = collection_generative(
        question,
        honest,
        context,
        documents,
        engine=dp.engine,
        request=request,
        settings=dp.settings,
        collection="deal-x",
        fingerprint=dp.fingerprint,
    )
    assert kept.citations[0].verified and kept.citations[0].document_id == first_id


def test_a_collection_whose_documents_left_the_store_says_so(pipe: DocPipe, room: Path) -> None:
    import shutil

    coll = pipe.collection("deal-x")
    coll.add(room)
    for member in coll.documents:  # the store lost them behind docpipe's back (a restore, a wiped disk)
        shutil.rmtree(pipe.store.doc_dir(member.id))
    fresh = DocPipe(pipe.settings, embedder=CountingEmbedder())
    for question in ("Which law governs the agreement?", "In the agreement of Northwind Traders and Contoso?"):
        with pytest.raises(InputError, match="no longer in the store|could be searched") as raised:
            fresh.ask(fresh.collection("deal-x"), question)
        assert "add the file" in str(raised.value)
