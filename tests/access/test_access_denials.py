"""Refusals are in the access log: a known user refused a matter over the API (no grant: 404; too low a role:
403) leaves a ``denied`` line naming who, which matter, which route and why, as the workbench's refusals do
(tests/ui/test_workbench_matters.py). A malformed request (400) is not an attempt on a matter and leaves none, and
an unknown key (401) names no one to log. Against a real `docpipe serve` on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.server import serving

from docpipe import AccessLog, KeyStore

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("denials") / "home"
    home.mkdir()
    keys = KeyStore(home)
    alice, _ = keys.create("alice", {"deal-x": "write"})
    carol, _ = keys.create("carol", {"deal-x": "read", "deal-y": "read"})
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        yield {"url": served.url, "home": home, "alice": alice, "carol": carol}


def _call(world: dict, user: str, method: str, path: str, matter: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {world[user]}"}
    if matter is not None:
        headers["X-Matter"] = matter
    return httpx.request(method, world["url"] + path, headers=headers, timeout=30)


def _denials(world: dict) -> list[tuple[str, str, str, str]]:
    log = AccessLog(world["home"])
    return [(e["user"], e["matter"], e["action"], e["detail"]) for e in log.read() if e["outcome"] == "denied"]


def test_a_refused_matter_is_logged_with_who_where_and_why(world: dict, sample_pdf: Path) -> None:
    before = len(_denials(world))
    # A write key deleting its matter (admin only) and a reader uploading: 403.
    assert _call(world, "alice", "DELETE", "/v1/matters/deal-x").status_code == 403
    upload = httpx.post(
        world["url"] + "/v1/documents",
        params={"name": "c.pdf"},
        content=sample_pdf.read_bytes(),
        headers={"Authorization": f"Bearer {world['carol']}", "X-Matter": "deal-x", "Content-Type": "application/pdf"},
        timeout=60,
    )
    assert upload.status_code == 403, upload.text
    # A matter the key has no grant on: 404 (its existence does not leak), logged all the same.
    assert _call(world, "alice", "GET", "/v1/documents", matter="deal-y").status_code == 404
    new = _denials(world)[before:]
    assert [(user, matter, action) for user, matter, action, _why in new] == [
        ("alice", "deal-x", "delete_matter"),
        ("carol", "deal-x", "upload"),
        ("alice", "deal-y", "list_documents"),
    ]
    assert "needs admin" in new[0][3] and "needs write" in new[1][3] and "no matter" in new[2][3]
    assert AccessLog(world["home"]).verify().intact


def test_malformed_and_unauthenticated_requests_leave_no_denial(world: dict) -> None:
    before = len(_denials(world))
    assert _call(world, "carol", "GET", "/v1/documents").status_code == 400  # two matters: name one
    assert _call(world, "alice", "GET", "/v1/documents", matter="Not A Matter!").status_code in (400, 404)
    bad = httpx.get(world["url"] + "/v1/documents", headers={"Authorization": "Bearer dpk_nope"}, timeout=30)
    assert bad.status_code == 401
    assert _denials(world)[before:] == []
