"""`docpipe serve` at its limits (issue 23's untested paths), each on a real server on 127.0.0.1: a disk that
fills mid-upload (507, nothing half-written trusted, served again once space returns), what deletion leaves
(`docpipe rm`, the `--retention-days` sweep, an admin deleting a whole matter: every file under the store
read back for the document's id and its text), and `limit_concurrency` saturated by requests the test holds
open and then releases."""

from __future__ import annotations

import hashlib
import resource
import signal
from pathlib import Path

import httpx
import pytest
from test_server import QUESTION, ask, assert_error, contract_pdf, upload
from test_server_hardening import SOCKET_S, connect, head, read_until_closed, serving_options

pytestmark = pytest.mark.integration


# -- a disk that fills ------------------------------------------------------------------------------------------
# While "full", no file of the server may grow past this: the sample contract's spool (48 KB), its source and its
# extracted text (54 KB) fit, its index (document.json 134 KB, dense.faiss 180 KB) does not.
FULL_AT = 96 * 1024


def _ignore_sigxfsz() -> None:
    """In the server process: a write past RLIMIT_FSIZE fails with EFBIG instead of killing the process."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _half_written(home: Path) -> list[str]:
    """Returns what a write cut short may leave: temp files, upload spools, index entries without a manifest."""
    left = [p for p in home.rglob("*") if p.name.endswith(".tmp") or p.parent.name == "tmp"]
    left += [p for p in home.glob("docs/*/index-*") if not (p / "manifest.json").is_file()]
    return sorted(str(p.relative_to(home)) for p in left)


def _tree(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*"))


def test_a_disk_full_mid_upload_is_507_leaves_nothing_half_written_and_recovers(
    tmp_path: Path, sample_pdf: Path
) -> None:
    """The kernel refuses the writes (RLIMIT_FSIZE lowered on the running server with prlimit: EFBIG, what a
    quota gives; ENOSPC takes the same path) after the upload is spooled, its source and text stored: the
    index entry is what cannot be written. Then the limit is lifted again, as when an operator frees space."""
    home = tmp_path / "home"
    with serving_options(home, preexec=_ignore_sigxfsz) as served:
        stored = upload(served, contract_pdf("1. Term. This Agreement lasts two (2) years."), name="short.pdf")
        assert stored.status_code == 200, stored.text
        short_id = stored.json()["id"]
        data = sample_pdf.read_bytes()
        doc_id = hashlib.sha256(data).hexdigest()
        pid = served.process.pid
        soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (FULL_AT, hard))
        try:
            refused = upload(served, data, name="msa.pdf")
            message = assert_error(refused, 507, "insufficient_storage", "try again later", "free disk space")
            assert str(home) not in refused.text and "/" not in message
            # The rest of the server works on: health, the matter's listing, a question about a stored document.
            assert httpx.get(f"{served.url}/v1/health", timeout=10).status_code == 200
            listed = httpx.get(f"{served.url}/v1/documents", timeout=10).json()["documents"]
            assert [d["id"] for d in listed] == [short_id]
            assert ask(served, short_id, {"question": "How long does the agreement last?"}).status_code == 200
            assert_error(httpx.get(f"{served.url}/v1/documents/{doc_id}", timeout=10), 404, "not_found")
            assert_error(ask(served, doc_id, {"question": QUESTION}), 404, "not_found")
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
        assert "cannot write the index" in served.log_tail(), served.log_tail()  # it failed mid-ingest
        assert _half_written(home) == []
        # Nor is the contract kept whole where no DELETE (no matter holds it) and no sweep would find it.
        assert [p for p in _tree(home) if doc_id in p] == []

        again = upload(served, data, name="msa.pdf")
        assert again.status_code == 200 and again.json()["id"] == doc_id, again.text
        answer = ask(served, doc_id, {"question": QUESTION})
        assert answer.status_code == 200, answer.text
        assert answer.json()["answers"][0]["citations"], answer.json()
        assert _half_written(home) == []


# -- limit_concurrency --------------------------------------------------------------------------------------------
LIMIT = 4


def test_requests_held_at_the_concurrency_limit_turn_others_away_at_once_until_released(tmp_path: Path) -> None:
    """uvicorn counts the connection asking too: with LIMIT - 1 uploads in flight (each waiting for its body,
    which the test holds back until the server asks for it with 100 Continue), the next request, /v1/health
    included, is answered 503 at once, not queued. Releasing the bodies completes every held upload, and the
    server serves again."""
    home = tmp_path / "home"
    with serving_options(home, limit_concurrency=LIMIT, body_timeout_s=300) as served:
        bodies = [
            contract_pdf(f"{n}. Fees. Customer pays invoice number {n} within thirty (30) days.")
            for n in range(LIMIT - 1)
        ]
        held = []
        try:
            for number, body in enumerate(bodies):
                sock = connect(served)
                held.append(sock)
                sock.sendall(
                    f"POST /v1/documents?name=held-{number}.pdf HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    f"Content-Type: application/pdf\r\nContent-Length: {len(body)}\r\nExpect: 100-continue\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                # The app is reading the body: this request holds its place until the test sends it.
                assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue")
            for request in (head(extra="Connection: close\r\n"), _raw_upload(bodies[0])):
                with connect(served) as sock:
                    sock.sendall(request)
                    refused = read_until_closed(sock)
                assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
            replies = []
            for sock, body in zip(held, bodies, strict=True):
                sock.sendall(body)
                replies.append(read_until_closed(sock))
        finally:
            for sock in held:
                sock.close()
        assert all(reply.startswith(b"HTTP/1.1 200") for reply in replies), [r[:300] for r in replies]
        assert httpx.get(f"{served.url}/v1/health", timeout=SOCKET_S).status_code == 200
        listed = httpx.get(f"{served.url}/v1/documents", timeout=SOCKET_S).json()["documents"]
        assert sorted(d["name"] for d in listed) == [f"held-{n}.pdf" for n in range(LIMIT - 1)]


def _raw_upload(body: bytes) -> bytes:
    return (
        b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/pdf\r\n"
        + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
