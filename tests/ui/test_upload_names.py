"""One upload-name rule for the REST API and the workbench: the same hostile names come out the same through
`POST /v1/documents` and through the workbench's ingest handler, and the rule itself is pinned here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from docpipe import DocPipe, MatterStore, Settings
from docpipe.names import DEFAULT_NAME, MAX_NAME_CHARS, clean_upload_name

LONG = "x" * 300 + ".pdf"
# (what a client sends, what every docpipe surface shows)
HOSTILE = [
    ("../../etc/passwd.pdf", "passwd.pdf"),
    ("C:\\x\\deal.pdf", "deal.pdf"),
    ('a"><script>.pdf', "ascript.pdf"),
    ("a\x00b\nc.pdf", "abc.pdf"),
    ("\u202efdp.exe", "fdp.exe"),  # the right-to-left override would show it as "exe.pdf"
    ("zero\u200bwidth.pdf", "zerowidth.pdf"),
    (".hidden.pdf", "hidden.pdf"),
    (LONG, LONG[:MAX_NAME_CHARS]),
    ("...", DEFAULT_NAME),
    ("", DEFAULT_NAME),
]
IDS = ["dotdot", "windows", "markup", "nul", "rtl", "zero-width", "dotfile", "long", "dots", "empty"]


def _pdf(text: str) -> bytes:
    """A one-page PDF whose text (so its id) differs per case: no name is reused from an earlier upload."""
    import io

    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer)
    pdf.drawString(60, 740, f"1. Term. This agreement ({text}) lasts one year from the effective date.")
    pdf.save()
    return buffer.getvalue()


@pytest.mark.parametrize(("raw", "shown"), HOSTILE, ids=IDS)
def test_the_rule(raw: str, shown: str) -> None:
    assert clean_upload_name(raw) == shown
    assert clean_upload_name(shown) == shown  # stable: a cleaned name passes unchanged


def _server_names(tmp_path: Path) -> list[str]:
    pytest.importorskip("fastapi", reason="fastapi is not installed: pip install 'docpipe-contracts[serve]'")
    from fastapi.testclient import TestClient

    from docpipe.server import ServeOptions, create_app

    dp = DocPipe(Settings.preset("test", home=tmp_path / "server"))
    app = create_app(dp, ServeOptions(ui=False, allowed_hosts=("testserver",)))
    names = []
    with TestClient(app) as client:
        for number, (raw, _shown) in enumerate(HOSTILE):
            # The raw-body upload takes the name from the query string, where any character can travel.
            response = client.post(
                "/v1/documents",
                params={"name": raw},
                content=_pdf(f"case {number}"),
                headers={"content-type": "application/pdf"},
            )
            assert response.status_code == 200, response.text
            listed = {d["id"]: d["name"] for d in client.get("/v1/documents").json()["documents"]}
            assert listed[response.json()["id"]] == response.json()["name"]
            names.append(response.json()["name"])
    return names


def _workbench_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")
    from gradio.utils import NamedString

    from docpipe.ui.app import build_app

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    dp = DocPipe(Settings.preset("test", home=tmp_path / "workbench"))
    demo = build_app(dp)
    ingest = next(fn.fn for fn in demo.fns.values() if fn.api_name == "ingest")
    names: list[str] = []
    seen: set[str] = set()
    for number, (raw, _shown) in enumerate(HOSTILE):
        stored = Path(demo.GRADIO_CACHE) / f"upload{number}" / "file.pdf"
        stored.parent.mkdir(parents=True)
        stored.write_bytes(_pdf(f"case {number}"))
        # What Gradio hands the handler: its stored copy, carrying the name the file came with.
        upload = NamedString(str(stored))
        upload.name = raw
        demo.upload_file_set.add(str(stored))
        result, _docs, *_pickers, _pending = ingest([upload], "", {}, None, None)
        assert "dp-ok" in result, result
        # Without keys an upload is the store's own matter's document, under the name the workbench gave it.
        [doc] = [d for d in MatterStore(dp.store.root).documents("default") if d.id not in seen]
        seen.add(doc.id)
        names.append(doc.name)
    return names


def test_server_and_workbench_show_the_same_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    server = _server_names(tmp_path)
    workbench = _workbench_names(tmp_path, monkeypatch)
    expected = [shown for _raw, shown in HOSTILE]
    assert server == expected
    assert workbench == expected
    assert not any(os.sep in name or "<" in name or "\u202e" in name for name in server + workbench)
