"""Encryption at rest (docs/encryption-at-rest.md): with a store key, no file under the store holds the contract's
text, its PDF bytes or a long run of its extracted text, through the Python API, the CLI and the server; the
same work without a key leaves the text on disk (so the scan can fail); answers are the same with and without
the key; a sealed store without its key, or under another, is a clear error that deletes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.cli import run_cli

from docpipe import DocPipe, Settings
from docpipe.access.store_key import store_sealer, write_store_key
from docpipe.engine.fake import EchoEngine
from docpipe.errors import ConfigError, StoreKeyError
from docpipe.storage.sealing import MAGIC, is_sealed
from docpipe.storage.store import Store

QUESTION = "What is the notice period for termination for convenience?"
# Distinctive phrases of samples/master_services_agreement.pdf: §12.3, its heading, the parties and an address.
PHRASES = [
    b"ninety (90) days",
    b"Termination for Convenience",
    b"Northwind Analytics",
    b"Harbor & Vale Logistics",
    b"Lantern Row",
]
RUN_CHARS = 48  # a run of extracted text this long found on disk is a leak


# -- what is on disk ---------------------------------------------------------------------------------------------
def _text_runs(doc_text: str, count: int = 40) -> list[bytes]:
    """Returns `count` runs of RUN_CHARS characters spread over the extracted text, as UTF-8 (and JSON-escaped,
    as a JSON file would hold them)."""
    step = max(1, (len(doc_text) - RUN_CHARS) // count)
    runs = [doc_text[i : i + RUN_CHARS] for i in range(0, len(doc_text) - RUN_CHARS, step)][:count]
    runs = [r for r in runs if r.strip()]
    return [r.encode() for r in runs] + [json.dumps(r)[1:-1].encode() for r in runs]


def _pdf_chunks(pdf: bytes, count: int = 16, size: int = 64) -> list[bytes]:
    step = len(pdf) // (count + 1)
    return [pdf[i : i + size] for i in range(step, len(pdf) - size, step)][:count]


def _leaks(home: Path, needles: list[bytes]) -> dict[str, list[str]]:
    """Returns, for every file under `home` (every one: records, caches, logs, temp files), the needles it holds."""
    found: dict[str, list[str]] = {}
    files = [p for p in home.rglob("*") if p.is_file()]
    assert files, f"nothing under {home}"
    for path in files:
        data = path.read_bytes()
        hits = [n[:40].decode(errors="replace") for n in needles if n in data]
        if hits:
            found[str(path.relative_to(home))] = hits
    return found


def _needles(sample_pdf: Path, text: str) -> list[bytes]:
    return PHRASES + _text_runs(text) + _pdf_chunks(sample_pdf.read_bytes())


def _listing(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys" / "store.key"
    path.parent.mkdir()
    write_store_key(path)
    return path


def _pipe(home: Path, key_file: Path | None) -> DocPipe:
    settings = Settings.preset("test", home=home, store_key_file=key_file)
    return DocPipe(settings, engine=EchoEngine())


def _answers(dp: DocPipe, sample_pdf: Path, tmp_path: Path) -> tuple[list[dict], str]:
    """Ingests the sample, asks it through the engine (answer cache) and offline, adds it to a collection and
    asks the collection (its pooled index); returns the answers without their times, and the text."""
    doc = dp.ingest(sample_pdf)
    answers = [dp.ask(doc, QUESTION), dp.ask(doc, QUESTION)]  # the second from the answer cache
    offline = DocPipe(dp.settings.model_copy(update={"engine": dp.settings.engine.model_copy(
        update={"backend": "extractive"})}))  # fmt: skip
    answers.append(offline.ask(offline.ingest(sample_pdf), QUESTION))
    folder = tmp_path / "room"
    folder.mkdir(exist_ok=True)
    (folder / "msa.pdf").write_bytes(sample_pdf.read_bytes())
    report = dp.collection("deal").add(folder)
    assert not report.failed, report.failed
    answers.append(dp.ask(dp.collection("deal"), QUESTION))
    dp.close()
    offline.close()
    text = "\n".join(page.text for page in doc.pages)
    return [_timeless(a.to_dict()) for a in answers], text


def _timeless(answer: dict) -> dict:
    """Returns the answer without the times it was made at (the two runs differ only there)."""
    kept = {k: v for k, v in answer.items() if k not in ("created", "elapsed_s")}
    if isinstance(kept.get("manifest"), dict):
        kept["manifest"] = {k: v for k, v in kept["manifest"].items() if k != "created"}
    return kept


# -- the Python API ----------------------------------------------------------------------------------------------
def test_sealed_store_holds_no_plaintext_and_answers_are_unchanged(
    tmp_path: Path, key_file: Path, sample_pdf: Path
) -> None:
    plain_home, sealed_home = tmp_path / "plain", tmp_path / "sealed"
    plain, text = _answers(_pipe(plain_home, None), sample_pdf, tmp_path)
    sealed, _ = _answers(_pipe(sealed_home, key_file), sample_pdf, tmp_path)
    assert sealed == plain
    assert "ninety (90) days" in text  # the phrases are the contract's: the scans below can find them
    needles = _needles(sample_pdf, text)

    # Without a key the text is on disk: the scan finds it (extraction, index, cache, collection index).
    found = _leaks(plain_home, needles)
    assert any("extract-" in f for f in found) and any("answers.sqlite" in f for f in found), found
    assert any(f.startswith("collections/") for f in found), found
    # With the key, no file holds any of it.
    assert _leaks(sealed_home, needles) == {}
    # Every file of every document is sealed, and the cache and collection index files hold sealed blobs.
    doc_files = [p for p in (sealed_home / "docs").rglob("*") if p.is_file()]
    assert doc_files and all(is_sealed(p.read_bytes()) for p in doc_files)
    index = next((sealed_home / "collections" / "deal").glob("index-*"))
    assert all(is_sealed((index / n).read_bytes()) for n in ("state.json", "cards.json", "passages.faiss"))
    assert not (index / "bm25").exists()  # bm25s writes plain files: not kept under a key


def test_a_sealed_store_reads_back_in_a_new_process_and_index_is_not_rebuilt(
    tmp_path: Path, key_file: Path, sample_pdf: Path
) -> None:
    home = tmp_path / "home"
    dp = _pipe(home, key_file)
    doc = dp.ingest(sample_pdf)
    before = _listing(home)
    again = _pipe(home, key_file)  # fresh object: the index is read from disk
    events: list[str] = []
    assert again.ingest(sample_pdf, progress=events.append).id == doc.id
    assert events == []  # nothing extracted or embedded again
    assert {k: v for k, v in _listing(home).items() if k in before} == before


# -- missing and wrong keys --------------------------------------------------------------------------------------
def test_without_the_key_a_sealed_store_is_a_clear_error_that_deletes_nothing(
    tmp_path: Path, key_file: Path, sample_pdf: Path
) -> None:
    home = tmp_path / "home"
    doc = _pipe(home, key_file).ingest(sample_pdf)
    before = _listing(home)
    other = tmp_path / "other.key"
    write_store_key(other)
    for key, words in ((None, ["no store key is set", "DOCPIPE_STORE_KEY_FILE"]),
                       (other, ["the key in effect is", "DOCPIPE_STORE_KEY_FILE"])):  # fmt: skip
        dp = _pipe(home, key)
        attempts = {
            "ingest": lambda dp=dp: dp.ingest(sample_pdf),
            "document": lambda dp=dp: dp.document(doc.id),
            "ask": lambda dp=dp: dp.ask(doc, QUESTION),
        }
        for what, attempt in attempts.items():
            with pytest.raises(StoreKeyError) as caught:
                attempt()
            assert all(w in str(caught.value) for w in words), (what, caught.value)
            for secret in (key_file, other):  # no key is ever in a message
                assert secret.read_text().strip() not in str(caught.value)
        assert _listing(home) == before  # never taken for damage: nothing removed or rebuilt


def test_the_key_file_must_be_private_and_hold_a_key(tmp_path: Path, key_file: Path) -> None:
    key_file.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        _pipe(tmp_path / "home", key_file)
    key_file.chmod(0o600)
    assert store_sealer(Settings(store_key_file=key_file)) is not None
    bad = tmp_path / "bad.key"
    bad.write_text("correct horse battery staple\n")
    bad.chmod(0o600)
    with pytest.raises(StoreKeyError, match="64 hex digits or base64") as caught:
        store_sealer(Settings(store_key_file=bad))
    assert "horse" not in str(caught.value)  # a key is never echoed
    with pytest.raises(ConfigError, match="keep one"):
        store_sealer(Settings(store_key_file=key_file, store_key="00" * 32))


def test_a_sealed_file_moved_to_another_place_is_damage_and_rebuilt(tmp_path: Path, key_file: Path) -> None:
    store = Store(tmp_path / "store", sealer=store_sealer(Settings(store_key_file=key_file)))
    a, b = "a" * 64, "b" * 64
    store.save_extraction(a, "pypdf", {"pages": [{"text": "ninety (90) days"}]})
    assert store.load_extraction(a, "pypdf")["pages"] == [{"text": "ninety (90) days"}]
    moved = store.doc_dir(b) / "extract-pypdf.json"
    moved.parent.mkdir()
    moved.write_bytes((store.doc_dir(a) / "extract-pypdf.json").read_bytes())
    assert store.load_extraction(b, "pypdf") is None  # bound to document a: damage here, removed
    assert not moved.exists()
    blob = bytearray((store.doc_dir(a) / "extract-pypdf.json").read_bytes())
    blob[-1] ^= 1
    (store.doc_dir(a) / "extract-pypdf.json").write_bytes(bytes(blob))
    assert store.load_extraction(a, "pypdf") is None


# -- the CLI -----------------------------------------------------------------------------------------------------
def _cli_answer(home: Path, sample_pdf: Path, env: dict[str, str] | None) -> dict:
    for args in (("ingest", sample_pdf), ("ask", sample_pdf, QUESTION, "--json")):
        done = run_cli(home, *args, "--preset", "test", env=env)
        assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    return _timeless(answer[0] if isinstance(answer, list) else answer)


def test_cli_with_the_key_in_the_environment(tmp_path: Path, sample_pdf: Path) -> None:
    key = tmp_path / "store.key"
    made = run_cli(tmp_path / "home", "keys", "store-key", "--out", key)
    assert made.returncode == 0, made.stderr
    assert key.stat().st_mode & 0o777 == 0o600
    assert "DOCPIPE_STORE_KEY_FILE" in made.stderr and key.read_text().strip() not in made.stderr + made.stdout
    again = run_cli(tmp_path / "home", "keys", "store-key", "--out", key)
    assert again.returncode == 1 and "never overwritten" in again.stderr

    env = {"DOCPIPE_STORE_KEY": key.read_text().strip()}
    sealed_home, plain_home = tmp_path / "sealed", tmp_path / "plain"
    sealed = _cli_answer(sealed_home, sample_pdf, env)
    plain = _cli_answer(plain_home, sample_pdf, None)
    assert sealed == plain
    doc = DocPipe(Settings.preset("test", home=plain_home)).ingest(sample_pdf)
    needles = _needles(sample_pdf, "\n".join(p.text for p in doc.pages))
    assert _leaks(plain_home, needles)
    assert _leaks(sealed_home, needles) == {}

    before = _listing(sealed_home)
    missing = run_cli(sealed_home, "ask", sample_pdf, QUESTION, "--preset", "test")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert missing.stderr.startswith("docpipe: error: ") and "DOCPIPE_STORE_KEY_FILE" in missing.stderr
    wrong = run_cli(sealed_home, "ask", sample_pdf, QUESTION, "--preset", "test", env={"DOCPIPE_STORE_KEY": "11" * 32})
    assert wrong.returncode == 1 and "the key in effect is" in wrong.stderr
    assert _listing(sealed_home) == before


def test_seal_store_seals_a_store_made_before_the_key(tmp_path: Path, key_file: Path, sample_pdf: Path) -> None:
    home = tmp_path / "home"
    plain = _cli_answer(home, sample_pdf, None)  # made without a key
    doc = DocPipe(Settings.preset("test", home=home)).ingest(sample_pdf)
    needles = _needles(sample_pdf, "\n".join(p.text for p in doc.pages))
    assert any(f.startswith("docs/") for f in _leaks(home, needles))
    env = {"DOCPIPE_STORE_KEY_FILE": str(key_file)}
    # With the key, the plain store is still read (no rebuild), and new writes are sealed.
    done = run_cli(home, "keys", "seal-store", env=env)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[1]) >= 6  # source, extraction, 4 index files and manifest
    assert not [f for f in _leaks(home, needles) if f.startswith("docs/")]
    assert _cli_answer(home, sample_pdf, env) == plain
    assert run_cli(home, "keys", "seal-store", env=env).stdout.split()[1] == "0"  # already sealed


# -- the server --------------------------------------------------------------------------------------------------
@pytest.fixture
def served_with_key(tmp_path: Path, key_file: Path) -> Iterator[object]:
    from support.server import serving

    with serving(tmp_path / "home", "--engine", "echo", "--no-ui", env={"DOCPIPE_STORE_KEY_FILE": str(key_file)}) as s:
        yield s


@pytest.mark.integration
def test_server_records_are_sealed(served_with_key, tmp_path: Path, sample_pdf: Path) -> None:
    from support.server import upload

    served = served_with_key
    up = upload(served, sample_pdf.read_bytes())
    assert up.status_code == 200, up.text
    doc_id = up.json()["id"]
    answer = httpx.post(
        f"{served.url}/v1/documents/{doc_id}/ask", json={"question": QUESTION}, headers=served.headers, timeout=60
    )
    assert answer.status_code == 200, answer.text
    quote = answer.json()["answers"][0]["citations"][0]["quote"]
    stored = httpx.get(
        f"{served.url}/v1/answers/{answer.json()['answers'][0]['id']}", headers=served.headers, timeout=60
    )
    assert stored.status_code == 200 and stored.json()["citations"][0]["quote"] == quote
    text = "\n".join(p.text for p in DocPipe(Settings.preset("test", home=tmp_path / "x")).ingest(sample_pdf).pages)
    needles = _needles(sample_pdf, text) + [quote[:RUN_CHARS].encode()]
    home = tmp_path / "home"
    assert list((home / "serve").rglob("*.json")), "the server stored no answer record"
    assert _leaks(home, needles) == {}
    for record in (home / "serve").glob("*/*.json"):
        assert record.read_bytes().startswith(MAGIC)


@pytest.mark.integration
def test_a_server_without_the_key_says_its_store_is_locked_and_keeps_it(
    tmp_path: Path, key_file: Path, sample_pdf: Path
) -> None:
    from support.server import serving, upload

    home = tmp_path / "home"
    with serving(home, "--engine", "echo", "--no-ui", env={"DOCPIPE_STORE_KEY_FILE": str(key_file)}) as served:
        up = upload(served, sample_pdf.read_bytes())
        assert up.status_code == 200, up.text
    before = _listing(home / "docs")
    with serving(home, "--engine", "echo", "--no-ui") as served:  # restarted without the key
        asked = httpx.post(
            f"{served.url}/v1/documents/{up.json()['id']}/ask",
            json={"question": QUESTION},
            headers=served.headers,
            timeout=60,
        )
        log = served.log.read_text(errors="replace")
    assert asked.status_code == 500, asked.text
    error = asked.json()["error"]
    assert error["type"] == "server_misconfigured" and "store key" in error["message"], error
    assert "DOCPIPE_STORE_KEY" not in asked.text and str(home) not in asked.text  # the operator's, in the log
    assert "StoreKeyError" in log and "DOCPIPE_STORE_KEY_FILE" in log
    assert _listing(home / "docs") == before  # nothing taken for damage and rebuilt


def test_review_jobs_and_saved_answers_are_sealed_and_read_back(tmp_path: Path, key_file: Path) -> None:
    from docpipe.server.jobs import Job, JobStore
    from docpipe.server.storage import ResultStore

    sealer = store_sealer(Settings(store_key_file=key_file))
    jobs = JobStore(tmp_path / "jobs", sealer=sealer)
    job = Job(
        id="ab" * 16, matter="m", collection="room", user="u", key_id="k", request={"questions": ["ninety (90) days?"]}
    )
    jobs.save(job)
    jobs.save_grid(job.id, {"quote": "ninety (90) days"})
    results = ResultStore(tmp_path / "serve", sealer=sealer)
    results.save("answers", "a1", {"text": "ninety (90) days"}, matter="m", document_id="d" * 64)
    assert jobs.load(job.id).request == job.request
    assert results.load("answers", "a1", matter="m") == {"text": "ninety (90) days"}
    assert _leaks(tmp_path, [b"ninety"]) == {}
    # Without the key they are not read as damage: a clear error, and the files stay.
    with pytest.raises(StoreKeyError):
        ResultStore(tmp_path / "serve").load("answers", "a1", matter="m")
    with pytest.raises(StoreKeyError):
        JobStore(tmp_path / "jobs").load(job.id)
    assert results.load("answers", "a1", matter="m") is not None
