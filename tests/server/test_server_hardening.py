"""The shared server's HTTP layer under attack (issue 10): slow and half-sent requests, oversized headers,
too many connections, foreign Host headers and cross-site posts, uploads of the wrong type, /metrics, the
access log, bad Unicode, a full disk, and the refusal to expose an unauthenticated server.

Each server here is a real `serve()` process on 127.0.0.1 with short limits (ServeOptions given directly, so
the tests do not depend on CLI flags), stopped by the `serving_options` block that started it. Raw sockets
play the slow or malicious client; every wait on them is bounded by a socket timeout, so a server without
the protection makes the test fail instead of hang.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.contracts import contract_pdf
from support.net import free_port
from support.server import (
    QUESTION,
    SOCKET_S,
    Served,
    assert_error,
    connect,
    head,
    read_until_closed,
    serving_options,
)

from docpipe.errors import ConfigError, StoreError
from docpipe.server.errors import error_status
from docpipe.server.options import (
    ServeOptions,
    check_exposure,
    read_secret_file,
    resolve_metrics_token,
    resolve_token,
    resolve_ui_auth,
)

METRICS_TOKEN = "metrics-token-0123456789abcdef"


# -- a server with short limits -----------------------------------------------------------------------------
LIMIT = 6


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Returns a running server: no token (loopback), 3 s for a request head, bodies at >= 4 KB/s after 1 s,
    at most LIMIT connections."""
    home = tmp_path_factory.mktemp("strict") / "home"
    with serving_options(
        home, header_timeout_s=3, body_timeout_s=1, body_min_bytes_per_s=4096, limit_concurrency=LIMIT
    ) as served:
        yield served


def test_a_body_trickling_in_is_cut_with_408(strict: Served) -> None:
    """1 KB every 2 s of a declared 100 KB upload: uvicorn alone waits for it forever."""
    with connect(strict) as sock:
        sock.sendall(
            b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/pdf\r\n"
            b"Content-Length: 102400\r\n\r\n%PDF-1.4\n"
        )
        sock.settimeout(2)
        reply = b""
        for _ in range(SOCKET_S // 2):  # a bound, not a timing: without the cut, the loop ends and the test fails
            try:
                sock.sendall(b"0" * 1024)
                reply = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            break
        sock.settimeout(SOCKET_S)
        with contextlib.suppress(ConnectionResetError):
            reply += read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 408"), reply[:300]
    body = json.loads(reply.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["type"] == "body_timeout" and "too slowly" in body["error"]["message"]


def test_a_fast_body_is_not_cut(strict: Served) -> None:
    data = contract_pdf("1. Term. This Agreement runs for two (2) years from the Effective Date.")
    response = httpx.post(
        f"{strict.url}/v1/documents",
        content=data,
        params={"name": "term.pdf"},
        headers={"Content-Type": "application/pdf"},
        timeout=60,
    )
    assert response.status_code == 200, response.text


def test_half_sent_requests_do_not_hold_connections_and_the_limit_holds(strict: Served) -> None:
    """LIMIT connections that never finish their headers fill the server (others get 503) until the header
    deadline closes them with 408; then the server answers again."""
    idle = [connect(strict) for _ in range(LIMIT)]
    try:
        for number, sock in enumerate(idle):
            if number % 2:  # half send part of a head, half nothing at all
                sock.sendall(b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        with connect(strict) as sock:
            sock.sendall(head(extra="Connection: close\r\n"))
            refused = read_until_closed(sock)
        assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
        replies = [read_until_closed(sock) for sock in idle]  # each ends: the server closed it
    finally:
        for sock in idle:
            sock.close()
    assert all(reply.startswith(b"HTTP/1.1 408") and b"header_timeout" in reply for reply in replies), replies
    assert httpx.get(f"{strict.url}/v1/health", timeout=SOCKET_S).status_code == 200


def test_oversized_headers_are_refused(strict: Served) -> None:
    with connect(strict) as sock:
        sock.sendall(head(extra=f"X-Pad: {'a' * 65536}\r\n"))
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            reply = read_until_closed(sock)
    assert reply.startswith(b"HTTP/1.1 431") and b"headers_too_large" in reply, reply[:200]
    assert httpx.get(f"{strict.url}/v1/health", headers={"X-Pad": "a" * 8000}, timeout=10).status_code == 200


def test_only_this_servers_host_names_are_answered(strict: Served) -> None:
    """A DNS-rebinding page talks to 127.0.0.1 under its own name: the Host header gives it away."""
    port = strict.url.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
        response = httpx.get(f"{strict.url}/v1/health", headers={"Host": host}, timeout=10)
        assert response.status_code == 200, (host, response.text)
    for host in (f"attacker.example:{port}", "127.0.0.1.nip.io", "a b"):
        response = httpx.get(f"{strict.url}/v1/health", headers={"Host": host}, timeout=10)
        assert_error(response, 400, "bad_host", "host name")


def test_cross_site_posts_and_simple_request_uploads_are_refused(strict: Served) -> None:
    url = f"{strict.url}/v1/documents"
    data = contract_pdf("1. Fees. Customer pays within thirty (30) days of each invoice.")
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        assert_error(
            httpx.post(url, content=data, headers=headers, timeout=10),
            415,
            "unsupported_media_type",
            "application/pdf",
            "multipart/form-data",
        )
    # Refused before the body is read: a 10 GB text/plain upload that never sends its body is answered at once.
    with connect(strict) as sock:
        sock.sendall(
            b"POST /v1/documents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 10737418240\r\n\r\n"
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 415")
    files = {"file": ("fees.pdf", data, "application/pdf")}
    foreign = httpx.post(url, files=files, headers={"Origin": "http://attacker.example"}, timeout=10)
    assert_error(foreign, 403, "cross_site", "attacker.example")
    own = httpx.post(url, files=files, headers={"Origin": strict.url}, timeout=60)
    assert own.status_code == 200, own.text
    assert httpx.get(f"{strict.url}/v1/health", headers={"Origin": "http://attacker.example"}).status_code == 200


def test_metrics_answer_only_this_machine_without_a_metrics_token(strict: Served) -> None:
    local = httpx.get(f"{strict.url}/metrics", timeout=10)
    assert local.status_code == 200 and "docpipe_http_requests_total" in local.text
    # A client behind a reverse proxy on this machine (uvicorn trusts 127.0.0.1's X-Forwarded-For).
    proxied = httpx.get(f"{strict.url}/metrics", headers={"X-Forwarded-For": "203.0.113.7"}, timeout=10)
    assert_error(proxied, 404, "not_found", "DOCPIPE_METRICS_TOKEN")


def test_text_that_is_not_unicode_is_a_400(strict: Served) -> None:
    data = contract_pdf("1. Notice. Either Party may terminate upon ninety (90) days' written notice.")
    doc = httpx.post(
        f"{strict.url}/v1/documents", content=data, headers={"Content-Type": "application/pdf"}, timeout=60
    ).json()
    headers = {"Content-Type": "application/json"}
    for path, body in (
        ("ask", b'{"question": "What is the notice period? \\ud800"}'),
        ("ask", b'{"questions": ["fine", "\\udfff"]}'),
        ("ask", b'{"question": "What is the notice period?", "password": "\\ud800"}'),
        ("analyze", b'{"categories": ["Governing Law"], "password": "x\\udc80"}'),
    ):
        response = httpx.post(
            f"{strict.url}/v1/documents/{doc['id']}/{path}", content=body, headers=headers, timeout=30
        )
        assert_error(response, 400, "bad_unicode", "not valid Unicode", "UTF-8")
    invalid_utf8 = httpx.post(
        f"{strict.url}/v1/documents/{doc['id']}/ask", content=b'{"question": "\xff\xfe"}', headers=headers, timeout=30
    )
    assert invalid_utf8.status_code == 400, invalid_utf8.text
    fine = httpx.post(
        f"{strict.url}/v1/documents/{doc['id']}/ask", json={"question": f"{QUESTION} \U0001f600"}, timeout=30
    )
    assert fine.status_code == 200, fine.text


# -- metrics token and the access log -------------------------------------------------------------------------
def test_metrics_token_and_an_access_log_without_names_or_questions(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with serving_options(home, metrics_token=METRICS_TOKEN, log_level="info") as served:
        assert_error(httpx.get(f"{served.url}/metrics", timeout=10), 401, "unauthorized", "metrics token")
        wrong = httpx.get(f"{served.url}/metrics", headers={"Authorization": "Bearer nope"}, timeout=10)
        assert_error(wrong, 401, "unauthorized")
        right = httpx.get(f"{served.url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10)
        assert right.status_code == 200 and "docpipe_http_requests_total" in right.text

        data = contract_pdf("1. Exclusivity. Seller shall not negotiate with any other buyer for sixty (60) days.")
        doc = httpx.post(
            f"{served.url}/v1/documents",
            params={"name": "project-nightingale-merger.pdf"},
            content=data,
            headers={"Content-Type": "application/pdf"},
            timeout=60,
        ).json()
        files = {"file": ("project-nightingale-merger.pdf", data, "application/pdf")}
        assert httpx.post(f"{served.url}/v1/documents", files=files, timeout=60).status_code == 200
        asked = httpx.post(
            f"{served.url}/v1/documents/{doc['id']}/ask?debug=nightingale",
            json={"question": "Is there an exclusivity period with Nightingale?"},
            timeout=30,
        )
        answer_id = asked.json()["answers"][0]["id"]
        assert httpx.get(f"{served.url}/v1/answers/{answer_id}", timeout=10).status_code == 200
    log = served.log.read_text(errors="replace")
    assert '"POST /v1/documents" 200' in log and '"POST /v1/documents/{doc_id}/ask" 200' in log, log[-2000:]
    assert '"GET /v1/answers/{answer_id}" 200' in log and '"GET /metrics" 401' in log
    for secret in ("nightingale", "exclusivity", doc["id"], answer_id):
        assert secret not in log.lower(), secret


# -- a full disk ------------------------------------------------------------------------------------------------
FILE_LIMIT = 16 * 1024


def _file_size_limit() -> None:
    """In the server process: writes past FILE_LIMIT bytes fail with EFBIG (SIGXFSZ ignored, not fatal)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


def test_a_write_the_disk_refuses_is_507_without_a_path(tmp_path: Path, sample_pdf: Path) -> None:
    """The kernel refuses the store's write of a 48 KB PDF (RLIMIT_FSIZE: EFBIG, the errno a full quota or
    file-size limit gives; ENOSPC takes the same path, see the unit test below). Metrics on their own port."""
    home = tmp_path / "home"
    metrics_port = free_port()
    with serving_options(home, preexec=_file_size_limit, metrics_port=metrics_port) as served:
        response = httpx.post(
            f"{served.url}/v1/documents",
            content=sample_pdf.read_bytes(),
            headers={"Content-Type": "application/pdf"},
            timeout=120,
        )
        message = assert_error(response, 507, "insufficient_storage", "disk space")
        assert "/" not in message and str(home) not in response.text
        assert httpx.get(f"{served.url}/v1/health", timeout=10).status_code == 200
        assert_error(httpx.get(f"{served.url}/metrics", timeout=10), 404, "not_found", str(metrics_port))
        scraped = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).text
        assert 'docpipe_http_errors_total{route="/v1/documents",type="insufficient_storage"} 1.0' in scraped


def test_out_of_space_errors_map_to_507_and_store_errors_hide_the_path() -> None:
    for number in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        try:
            try:
                raise OSError(number, os.strerror(number), "/srv/docpipe/docs/x/source.pdf")
            except OSError as exc:
                raise StoreError("cannot write /srv/docpipe/docs/x", path="/srv/docpipe/docs/x") from exc
        except StoreError as exc:
            assert error_status(exc) == (507, "insufficient_storage")
    assert error_status(StoreError("cannot write /srv/docpipe/x")) == (500, "store_error")


def test_store_error_messages_over_http_show_no_path(tmp_path: Path) -> None:
    from docpipe.server.errors import http_message as _http_message

    home = tmp_path / "private-store"
    message = _http_message(StoreError(f"cannot store the answer under {home}: permission denied", path=str(home)))
    assert str(home) not in message and "private-store" not in message and "server log" in message


# -- safe defaults ------------------------------------------------------------------------------------------
def test_an_exposed_address_without_authentication_is_refused(tmp_path: Path) -> None:
    """192.0.2.1 (TEST-NET-1) is no address of this machine: were the check missing, binding it would fail
    with a different error, and nothing is ever exposed."""
    from docpipe import DocPipe, Settings
    from docpipe.server import serve

    dp = DocPipe(Settings.preset("test", home=tmp_path / "home", engine={"backend": "echo"}))
    exposed = "192.0.2.1"
    with pytest.raises(ConfigError, match="refusing to serve 192.0.2.1.*no authentication.*--insecure"):
        serve(dp, ServeOptions(host=exposed, ui=False))
    with pytest.raises(ConfigError, match="workbench at /ui has no login") as refused:
        serve(dp, ServeOptions(host=exposed, token="t" * 24, ui=True))
    assert "no authentication" not in str(refused.value)
    for allowed in (
        ServeOptions(host=exposed, token="t" * 24, ui=False),
        ServeOptions(host=exposed, token="t" * 24, ui_auth=("ann", "pw")),
        ServeOptions(host=exposed, access=object(), ui=False),
        ServeOptions(host=exposed, insecure=True),
        ServeOptions(host="127.0.0.1"),
        ServeOptions(host="::1"),
    ):
        check_exposure(allowed)


def test_secrets_come_from_private_files_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "DOCPIPE_SERVE_TOKEN",
        "DOCPIPE_SERVE_TOKEN_FILE",
        "DOCPIPE_UI_AUTH",
        "DOCPIPE_UI_AUTH_FILE",
        "DOCPIPE_METRICS_TOKEN",
        "DOCPIPE_METRICS_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    secret = tmp_path / "token"
    secret.write_text("s3cret-token-0123456789\n")
    secret.chmod(0o644)
    with pytest.raises(ConfigError, match=f"other users.*chmod 600 {secret}"):
        read_secret_file(secret, what="token")
    secret.chmod(0o600)
    assert resolve_token(token_file=secret) == "s3cret-token-0123456789"
    assert resolve_token() is None
    monkeypatch.setenv("DOCPIPE_SERVE_TOKEN_FILE", str(secret))
    assert resolve_token() == "s3cret-token-0123456789"
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_token(token_file=tmp_path / "missing")
    with pytest.raises(ConfigError, match="not both"):
        resolve_token("flag-token-0123456789", token_file=secret)

    login = tmp_path / "ui-auth"
    login.write_text("ann:correct horse\n")
    login.chmod(0o600)
    assert resolve_ui_auth(auth_file=login) == ("ann", "correct horse")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    empty.chmod(0o600)
    with pytest.raises(ConfigError, match="one line"):
        resolve_ui_auth(auth_file=empty)
    monkeypatch.setenv("DOCPIPE_METRICS_TOKEN", METRICS_TOKEN)
    assert resolve_metrics_token() == METRICS_TOKEN
    with pytest.raises(ConfigError, match="metrics token is too short"):
        ServeOptions(metrics_token="short")
