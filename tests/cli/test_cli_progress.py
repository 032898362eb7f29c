"""Embedding progress (issue 16): the library reports each batch of passages embedded to an `embed_progress`
callback (batches done, batches in all) and is silent without one; the vectors are the same with and without
it; `docpipe ingest` draws a bar over the batches on a terminal (a pseudo-terminal here) and nothing of it when
stderr is a pipe, with -q or with --json."""

from __future__ import annotations

import fcntl
import math
import os
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from docpipe import DocPipe, Settings
from docpipe.embed.hashing import HashingEmbedder
from docpipe.ingest.build import EMBED_BATCH, embed_batches, stored_parts
from docpipe.ingest.sentences import document_texts

pty = pytest.importorskip("pty", reason="the pseudo-terminal tests need a POSIX system")

TIMEOUT_S = 300


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, keeping the texts of every call to `embed`."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)


@pytest.fixture(scope="module")
def long_pdf(sample_pdf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a 75-page contract (the sample five times over): several embedding batches."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for _ in range(5):
        for page in PdfReader(sample_pdf).pages:
            writer.add_page(page)
    path = tmp_path_factory.mktemp("long") / "long_contract.pdf"
    with path.open("wb") as out:
        writer.write(out)
    return path


def _passages(dp: DocPipe, doc_id: str) -> tuple[list[str], np.ndarray]:
    parts = stored_parts(doc_id, store=dp.store, fingerprint=dp.fingerprint)
    assert parts is not None and parts[2] is not None
    return parts[1], parts[2]


# -- the library ----------------------------------------------------------------------------------------------


def test_embedding_reports_each_batch_done_of_all(tmp_path: Path, long_pdf: Path) -> None:
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    stages: list[str] = []
    batches: list[tuple[int, int]] = []
    doc = dp.ingest(long_pdf, progress=stages.append, embed_progress=lambda done, total: batches.append((done, total)))
    texts, _ = _passages(dp, doc.id)
    sentences = document_texts(doc.sections)  # embedded in the same batches, after the passages
    total = math.ceil((len(texts) + len(sentences)) / EMBED_BATCH)
    assert total >= 3
    assert batches == [(done, total) for done in range(0, total + 1)]  # (0, total) first: the bar's length
    assert f"embedding {len(texts)} passages and {len(sentences)} sentences" in stages
    # A document the store holds is not embedded again: nothing to report.
    again: list[tuple[int, int]] = []
    dp.ingest(long_pdf, embed_progress=lambda done, total: again.append((done, total)))
    DocPipe(Settings.preset("test", home=tmp_path / "home")).ingest(long_pdf, embed_progress=lambda *a: again.append(a))
    assert again == []


def test_the_vectors_do_not_depend_on_the_callback(tmp_path: Path, long_pdf: Path) -> None:
    vectors, calls = [], []
    for name, listen in (("quiet", None), ("told", lambda done, total: None)):
        embedder = CountingEmbedder()
        dp = DocPipe(Settings.preset("test", home=tmp_path / name), embedder=embedder)
        doc = dp.ingest(long_pdf, embed_progress=listen)
        rows = _passages(dp, doc.id)[1]
        vectors.append(rows)
        calls.append([len(texts) for texts in embedder.calls])
        # Row i is the i-th text given, as one call of the embedder gives it (the passages come first).
        given = [t for texts in embedder.calls for t in texts]
        assert np.array_equal(rows, HashingEmbedder().embed(given[: len(rows)]))
    assert np.array_equal(vectors[0], vectors[1])
    assert calls[0] == calls[1] and len(calls[0]) >= 3
    assert all(size == EMBED_BATCH for size in calls[0][:-1]) and 0 < calls[0][-1] <= EMBED_BATCH


def test_embed_batches_of_nothing_is_empty_and_calls_nobody() -> None:
    heard: list[tuple[int, int]] = []
    rows = embed_batches(HashingEmbedder(dim=8), [], embed_progress=lambda done, total: heard.append((done, total)))
    assert rows.shape == (0, 8) and heard == []


def test_the_library_prints_nothing_without_a_callback(
    tmp_path: Path, long_pdf: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    DocPipe(Settings.preset("test", home=tmp_path / "home")).ingest(long_pdf)
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_a_collection_reports_passages_embedded_batch_by_batch(tmp_path: Path, long_pdf: Path) -> None:
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    events = []
    dp.collection("room").add([long_pdf], progress=events.append)
    # The files' total comes first, so a bar shows "0/1" before the first file ends (not a count that jumps).
    assert (events[0].kind, events[0].done, events[0].total) == ("file", 0, 1)
    assert (events[-1].kind, events[-1].done, events[-1].total) in {
        ("file", 1, 1),
        ("embed", events[-1].total, events[-1].total),
    }
    embedded = [e for e in events if e.kind == "embed"]
    assert len(embedded) >= 3
    assert [e.done for e in embedded] == sorted(e.done for e in embedded)
    assert all(b.done - a.done == EMBED_BATCH for a, b in zip(embedded, embedded[1:-1], strict=False))
    assert embedded[-1].done == embedded[-1].total


@pytest.mark.integration
def test_the_real_embedders_vectors_do_not_depend_on_the_callback(tmp_path: Path, long_pdf: Path) -> None:
    vectors = []
    for name, listen in (("quiet", None), ("told", lambda done, total: None)):
        dp = DocPipe(Settings.preset("default", home=tmp_path / name))
        doc = dp.ingest(long_pdf, embed_progress=listen)
        vectors.append(_passages(dp, doc.id)[1])
    assert len(vectors[0]) > 2 * EMBED_BATCH
    assert np.array_equal(vectors[0], vectors[1])


# -- the command line -----------------------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    return {**env, "DOCPIPE_HOME": str(home), "XDG_CONFIG_HOME": str(home.parent / "xdg")}


def on_terminal(home: Path, *args: Any) -> tuple[int, str]:
    """Runs docpipe on a pseudo-terminal (stdout and stderr both); returns the exit code and what it showed."""
    argv = [sys.executable, "-m", "docpipe", *map(str, args)]
    pid, fd = pty.fork()
    if pid == 0:  # the child
        # A new pseudo-terminal is 0 columns wide, where tqdm draws nothing: make it a usual 120.
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        os.chdir(home.parent)
        os.execve(sys.executable, argv, _env(home))
    output = b""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


@pytest.fixture(scope="module")
def batches(long_pdf: Path, tmp_path_factory: pytest.TempPathFactory) -> int:
    """Returns how many embedding batches the long contract takes with the test preset."""
    dp = DocPipe(Settings.preset("test", home=tmp_path_factory.mktemp("count") / "home"))
    seen: list[int] = []
    dp.ingest(long_pdf, embed_progress=lambda done, total: seen.append(total))
    return seen[-1]


def test_ingest_draws_a_bar_over_the_batches_on_a_terminal(tmp_path: Path, long_pdf: Path, batches: int) -> None:
    code, shown = on_terminal(tmp_path / "home", "ingest", long_pdf, "--preset", "test")
    assert code == 0, shown
    assert "embedding" in shown and f"{batches}/{batches}" in shown and "batch" in shown, shown
    assert f"0/{batches}" in shown and f"1/{batches}" in shown  # drawn as it goes, not only at the end
    assert "ok      long_contract.pdf: 75 pages" in shown


def test_ingest_draws_nothing_into_a_pipe(tmp_path: Path, long_pdf: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "docpipe", "ingest", str(long_pdf), "--preset", "test"],
        env=_env(tmp_path / "home"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("ok      long_contract.pdf: 75 pages") and "\r" not in result.stdout


@pytest.mark.parametrize("quiet", [("-q", "ingest"), ("ingest", "--json")], ids=["-q", "--json"])
def test_ingest_draws_no_bar_with_q_or_json(tmp_path: Path, long_pdf: Path, quiet: tuple[str, str]) -> None:
    code, shown = on_terminal(tmp_path / "home", *quiet, long_pdf, "--preset", "test")
    assert code == 0, shown
    assert "embedding" not in shown and "batch" not in shown, shown
    assert "long_contract.pdf" in shown
