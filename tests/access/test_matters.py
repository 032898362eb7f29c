"""Matters, per-user keys and the access log, below the server: who may use which matter, the answer cache
kept apart per matter and per model revision, one extraction limiter for every caller, and deletion."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from support.cli import run_cli

from docpipe import DocPipe, Settings
from docpipe.access.keys import KeyStore, Principal, parse_grants
from docpipe.access.log import AccessLog
from docpipe.access.matters import MatterStore
from docpipe.engine.fake import EchoEngine
from docpipe.errors import BusyError, ConfigError, PasswordRequiredError, WrongPasswordError

QUESTION = "What is the notice period for termination for convenience?"


# -- keys ---------------------------------------------------------------------------------------------------
def test_a_key_is_stored_only_as_a_hash_and_grants_only_its_matters(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path)
    secret, info = keys.create("alice", {"deal-x": "write", "precedents": "read"})
    raw = keys.path.read_text()
    random_part = secret.split("_", 2)[2]  # the secret itself may contain "_": split off "dpk_<id>_" only
    assert secret not in raw and random_part not in raw
    for path in keys.folder.iterdir():  # the keys and their lock file, whatever the umask
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(keys.folder.stat().st_mode) == 0o700
    alice = keys.authenticate(secret)
    assert alice is not None and alice.user == "alice" and alice.key_id == info.key_id
    assert alice.can("deal-x", "write") and not alice.can("deal-x", "admin")
    assert alice.can("precedents", "read") and not alice.can("precedents", "write")
    assert not alice.can("other-client", "read")
    # A key with one character changed, another key's id with this secret, garbage: nobody.
    assert keys.authenticate(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    other, _ = keys.create("bob", {"other-client": "admin"})
    assert keys.authenticate(other.rsplit("_", 1)[0] + "_" + secret.rsplit("_", 1)[1]) is None
    assert keys.authenticate("Bearer nonsense") is None and keys.authenticate(None) is None


def test_revocation_applies_to_a_key_store_already_open(tmp_path: Path) -> None:
    server_side = KeyStore(tmp_path)
    secret, info = KeyStore(tmp_path).create("alice", {"deal-x": "read"})
    assert server_side.authenticate(secret) is not None
    KeyStore(tmp_path).revoke(info.key_id)  # as `docpipe keys revoke` does, from another process
    assert server_side.authenticate(secret) is None


def test_a_damaged_key_file_admits_nobody_instead_of_turning_the_server_keyless(tmp_path: Path) -> None:
    from docpipe.server.access import AccessDenied, authenticate

    keys = KeyStore(tmp_path)
    secret, _ = keys.create("alice", {"deal-x": "write"})
    keys.path.write_text("{ not json")  # a disk error, a bad edit
    server_side = KeyStore(tmp_path)
    assert server_side.configured() and server_side.authenticate(secret) is None
    with pytest.raises(AccessDenied) as denied:
        authenticate(server_side, None, f"Bearer {secret}")
    assert denied.value.status == 401


def test_bad_grants_and_names_say_how_to_fix_them() -> None:
    with pytest.raises(ConfigError, match="read, write or admin"):
        parse_grants(["deal-x:owner"])
    with pytest.raises(ConfigError, match="lowercase"):
        parse_grants(["../etc:read"])
    with pytest.raises(ConfigError, match="at least one matter"):
        parse_grants([])
    assert Principal("ops", "k", {"*": "read", "deal-x": "admin"}).role("deal-x") == "admin"


def test_workbench_users_get_the_union_of_their_live_keys(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path)
    _, first = keys.create("alice", {"deal-x": "read"})
    keys.create("alice", {"deal-x": "write", "deal-y": "read"})
    keys.create("bob", {"deal-z": "admin"})
    alice = keys.principal_for_user("alice")
    assert alice is not None and alice.role("deal-x") == "write" and alice.matters() == ["deal-x", "deal-y"]
    for key in keys.keys():
        if key.user == "alice":
            keys.revoke(key.key_id)
    assert keys.principal_for_user("alice") is None


# -- matters ------------------------------------------------------------------------------------------------
def test_the_same_bytes_in_two_matters_are_two_records(tmp_path: Path) -> None:
    matters = MatterStore(tmp_path)
    doc_id = "ab" * 32
    first = matters.add("deal-x", doc_id, name="Project Falcon SPA.pdf", user="alice", key_id="k1", encrypted=False)
    second = matters.add("deal-y", doc_id, name="contract.pdf", user="bob", key_id="k2", encrypted=False)
    assert (first.name, second.name) == ("Project Falcon SPA.pdf", "contract.pdf")
    assert matters.get("deal-y", doc_id).added_by == "bob"
    assert sorted(matters.holders(doc_id)) == ["deal-x", "deal-y"]
    matters.remove("deal-x", doc_id)
    assert matters.holders(doc_id) == ["deal-y"] and matters.get("deal-x", doc_id) is None
    assert matters.get("deal-y", "../../etc/passwd") is None
    with pytest.raises(ConfigError):
        matters.documents("../deal-y")


# -- the access log -----------------------------------------------------------------------------------------
def test_the_access_log_keeps_question_hashes_and_detects_tampering(tmp_path: Path) -> None:
    log = AccessLog(tmp_path)
    log.record(user="alice", key_id="k1", matter="deal-x", action="upload", document="ab" * 32)
    log.record(user="alice", key_id="k1", matter="deal-x", action="ask", document="ab" * 32, question=QUESTION)
    log.record(user="bob", key_id="k2", matter="deal-y", action="ask", document="cd" * 32, question="Who pays?")
    assert stat.S_IMODE(log.path.stat().st_mode) == 0o600
    text = log.path.read_text()
    assert QUESTION not in text and log.question_hash(QUESTION) in text
    assert [e["action"] for e in log.read(matter="deal-x")] == ["upload", "ask"]
    assert [e["user"] for e in log.read(user="bob")] == ["bob"]
    assert [e["user"] for e in log.read(question=QUESTION)] == ["alice"]
    verdict = log.verify()
    assert verdict.intact and verdict.lines == 3 and verdict.problem is None
    lines = text.splitlines()
    log.path.write_text("\n".join([lines[0], lines[2]]) + "\n")  # someone removes alice's question
    verdict = log.verify()
    assert not verdict.intact and verdict.line == 2 and "does not follow line 1" in str(verdict.problem)


# -- the pipeline: matters in the cache key, the model revision, the extraction limiter, deletion ---------------
@pytest.fixture
def echo_pipe(tmp_path: Path) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=EchoEngine())


def test_cached_answers_never_cross_a_matter(echo_pipe: DocPipe, sample_pdf: Path) -> None:
    doc = echo_pipe.ingest(sample_pdf)
    in_x = echo_pipe.document(doc.id, name="Falcon MSA.pdf", matter="deal-x")
    in_y = echo_pipe.document(doc.id, name="msa.pdf", matter="deal-y")
    first = echo_pipe.ask(in_x, QUESTION)
    again = echo_pipe.ask(in_x, QUESTION)
    other = echo_pipe.ask(in_y, QUESTION)
    assert again.created == first.created  # a cache hit inside the matter
    assert other.created != first.created  # never one across matters
    assert (first.document_name, other.document_name) == ("Falcon MSA.pdf", "msa.pdf")
    assert "Falcon" not in json.dumps(other.to_dict())


def test_new_weights_under_the_same_model_name_miss_the_cache(tmp_path: Path, sample_pdf: Path) -> None:
    model = tmp_path / "my-model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"]}')
    (model / "model.safetensors").write_bytes(b"\0" * 16)

    class FolderEngine(EchoEngine):
        """The echo engine, named as a model folder served locally is (its revision is the folder's hash)."""

        name = "local"

        def __init__(self) -> None:
            super().__init__()
            self.model = str(model)

    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=FolderEngine())
    doc = dp.ingest(sample_pdf)
    first = dp.ask(doc, QUESTION)
    assert dp.ask(doc, QUESTION).created == first.created
    (model / "model.safetensors").write_bytes(b"\1" * 32)  # retrained weights, same folder, same name
    assert dp.ask(doc, QUESTION).created != first.created


def test_one_extraction_limit_and_stored_documents_never_wait(tmp_path: Path, sample_pdf: Path) -> None:
    settings = Settings.preset("test", home=tmp_path / "home", extraction={"max_concurrent": 1, "queue_wait_s": 0.2})
    dp = DocPipe(settings)
    stored = dp.ingest(sample_pdf)
    other = DocPipe(settings)  # a fresh process's view: nothing loaded in memory
    taken = threading.Event()
    release = threading.Event()

    def hold_the_only_slot() -> None:
        with other.indexes.slots.take("a slow upload"):
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_only_slot)
    holder.start()
    try:
        assert taken.wait(10)
        with pytest.raises(BusyError, match="try again") as caught:
            other.ingest(b"%PDF-1.4 not yet stored" + os.urandom(8), name="new.pdf")
        assert caught.value.retry_after_s >= 1
        assert other.ingest(sample_pdf).id == stored.id  # already in the store: no slot needed
    finally:
        release.set()
        holder.join()


def test_an_encrypted_pdfs_stored_text_needs_its_password_unless_authorized(test_pipe: DocPipe, eval_dir: Path) -> None:
    pdf = eval_dir / "bad-pdfs" / "pypdf-r2-user-password.pdf"
    doc = test_pipe.ingest(pdf, password="asdfzxcv")
    assert doc.encrypted
    with pytest.raises(PasswordRequiredError):
        test_pipe.document(doc.id)
    with pytest.raises(WrongPasswordError):
        test_pipe.document(doc.id, password="guess")
    assert test_pipe.document(doc.id, password="asdfzxcv").id == doc.id
    assert test_pipe.document(doc.id, authorized=True, matter="deal-x").matter == "deal-x"


def test_deleting_a_document_leaves_nothing_of_it(echo_pipe: DocPipe, sample_pdf: Path) -> None:
    doc = echo_pipe.ingest(sample_pdf)
    echo_pipe.ask(doc, QUESTION)
    assert echo_pipe.cache.stats()["entries"] >= 1
    before = sorted(p.relative_to(echo_pipe.store.root) for p in echo_pipe.store.root.rglob("*"))
    assert any(doc.id in str(p) for p in before)
    assert echo_pipe.delete_document(doc.id)
    after = sorted(p.relative_to(echo_pipe.store.root) for p in echo_pipe.store.root.rglob("*"))
    assert not any(doc.id in str(p) for p in after), after
    assert echo_pipe.cache.stats()["entries"] == 0
    assert echo_pipe.document(doc.id) is None


def test_retention_sweeps_old_uploads_answers_and_cache_and_keeps_new_ones(
    echo_pipe: DocPipe, sample_pdf: Path, tmp_path: Path
) -> None:
    import time

    from docpipe.server.housekeeping import Housekeeper

    keeper = Housekeeper(echo_pipe)
    old = echo_pipe.ingest(sample_pdf)
    new = echo_pipe.ingest(_other_pdf(tmp_path))
    for doc in (old, new):
        keeper.matters.add("deal-x", doc.id, name=f"{doc.id[:6]}.pdf", user="alice", key_id="k1", encrypted=False)
        answer = echo_pipe.ask(echo_pipe.document(doc.id, matter="deal-x"), QUESTION)
        keeper.results.save(
            "answers", doc.id[:16], {**answer.to_dict(), "id": doc.id[:16]}, matter="deal-x", document_id=doc.id
        )
    # The old upload was made ten days ago (its record says when; nothing sleeps).
    record = keeper.matters.root / "deal-x" / "documents" / f"{old.id}.json"
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "added": time.time() - 10 * 86400}))
    removed = keeper.sweep(5 * 86400)
    assert removed.documents == 1 and removed.purged == 1
    assert [d.id for d in keeper.matters.documents("deal-x")] == [new.id]
    assert echo_pipe.store.document_ids() == [new.id]
    assert keeper.results.load("answers", old.id[:16], matter="deal-x") is None
    assert keeper.results.load("answers", new.id[:16], matter="deal-x") is not None


def _other_pdf(tmp_path: Path) -> bytes:
    from reportlab.pdfgen import canvas

    path = tmp_path / "other.pdf"
    pdf = canvas.Canvas(str(path))
    pdf.drawString(60, 740, "1. Termination. Either party may terminate on thirty (30) days' written notice.")
    pdf.save()
    return path.read_bytes()


def test_one_user_never_holds_every_extraction_slot() -> None:
    from docpipe.ingest.slots import ExtractionSlots

    slots = ExtractionSlots(2, wait_s=0.2)
    with slots.take("slow-1.pdf", owner="mallory"):
        with pytest.raises(BusyError, match="your other upload"):
            with slots.take("slow-2.pdf", owner="mallory"):
                pass
        with slots.take("contract.pdf", owner="alice"):  # the other slot is still free for someone else
            with pytest.raises(BusyError, match="2 documents are being extracted"):
                with slots.take("third.pdf", owner="bob"):
                    pass
    with slots.take("slow-2.pdf", owner="mallory"):  # released: mallory may go again
        pass


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(home, "--preset", "test", *args, timeout=120)


def test_cli_keys_matters_and_rm(tmp_path: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    made = _cli(home, "keys", "create", "--user", "alice", "--matter", "deal-x:write", "--json")
    assert made.returncode == 0, made.stderr
    key = json.loads(made.stdout)
    listed = _cli(home, "keys", "list")
    assert key["key_id"] in listed.stdout and "alice" in listed.stdout and key["key"] not in listed.stdout
    # Arguments from outside are checked before anything is touched.
    for args, fragment in (
        (["keys", "create", "--user", "alice", "--matter", "../../etc:write"], "not a matter name"),
        (["keys", "create", "--user", "a/b", "--matter", "deal-x"], "not a user name"),
        (["keys", "revoke", "nosuchkey"], "no key with id"),
        (["rm", "--matter", "../deal-x", sample_pdf.name], "not a matter name"),
        (["rm", "0123"], "no stored document matches"),
        (["rm"], "name what to delete"),
    ):
        bad = _cli(home, *args)
        assert bad.returncode == 1 and bad.stderr.startswith("docpipe: error: ") and fragment in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr

    dp = DocPipe(Settings.preset("test", home=home))
    doc = dp.ingest(sample_pdf)
    MatterStore(home).add("deal-x", doc.id, name="Falcon.pdf", user="alice", key_id=key["key_id"], encrypted=False)
    assert "Falcon.pdf" in _cli(home, "matters").stdout
    removed = _cli(home, "rm", "--json", str(sample_pdf))
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["purged"] == 1
    assert not any(doc.id in str(p) for p in home.rglob("*"))
    assert "Falcon.pdf" not in _cli(home, "matters").stdout
