"""Word (.docx) contracts (issue 15): built here with python-docx, ingested through the real extraction worker.

A Word file's "pages" are its paragraphs: sections follow its numbered clauses, citations say "¶ N" and name
the clause. The abuse cases (encrypted, corrupt, zip bombs, DTDs) must fail quickly with the error that
names them: each assertion checks the message of the protection itself, so it fails without it.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from docx import Document as WordDocument
from docx.oxml import OxmlElement
from docx.oxml.ns import qn
from support.contracts import agreement_pdf
from support.server import serving

from docpipe import DocPipe, Settings
from docpipe.engine.fake import EchoEngine
from docpipe.errors import EncryptedWordFileError, ExtractionError, MalformedPDFError, NotAPDFError
from docpipe.ingest.extract.docx import DOCX_MEDIA_TYPE, document_kind, extract_docx

TERMINATION = "What is the notice period for termination for convenience?"
NOTICE = "ninety (90) days' prior written notice"

# (heading, [(clause, [list items])]): six numbered clauses, each long enough to stay a section of its own.
CLAUSES: list[tuple[str, list[tuple[str, list[str]]]]] = [
    (
        "Definitions",
        [
            (
                '"Confidential Information" means all non-public business, technical and financial information '
                "disclosed by one Party to the other Party, in any form, that is marked as confidential or that a "
                "reasonable person would understand to be confidential, including the terms of this Agreement, the "
                "Customer's data and the Supplier's software, but excluding information that is or becomes public "
                "other than through a breach of this Agreement.",
                [],
            ),
            (
                '"Services" means the hosting, support and onboarding services described in the fee schedule, '
                "together with any further services the Parties agree in writing from time to time, each performed "
                "with reasonable skill and care and in accordance with good industry practice and the service levels "
                "that the Parties have agreed for them.",
                [],
            ),
        ],
    ),
    (
        "Fees and Payment",
        [
            (
                "The Customer shall pay the Supplier the fees set out in the fee schedule below, monthly in arrears, "
                "plus any value added tax that applies to them at the rate in force on the invoice date. Invoices are "
                "payable within thirty (30) days of receipt, and late payments bear interest at four percent above "
                "the base rate until they are paid in full.",
                [],
            ),
        ],
    ),
    (
        "Confidentiality",
        [
            (
                "Each Party shall keep the Confidential Information of the other Party secret, use it only to "
                "perform this Agreement, and disclose it only to those of its employees and advisers who need to "
                "know it and are bound by duties of confidence no less strict than these. These duties survive the "
                "end of this Agreement for five (5) years.",
                [],
            ),
        ],
    ),
    (
        "Termination",
        [
            (
                "Termination for Convenience. Either Party may terminate this Agreement for convenience at any "
                f"time by giving the other Party {NOTICE}, without liability for doing so. The Customer shall pay "
                "the fees for the Services performed up to the date on which the termination takes effect, and the "
                "Supplier shall return the Customer's data within fourteen (14) days of that date.",
                [],
            ),
            (
                "Termination for Cause. Either Party may terminate this Agreement with immediate effect by written "
                "notice to the other Party if the other Party, or any person acting on its behalf, in connection "
                "with this Agreement or the Services:",
                [
                    "commits a material breach of this Agreement which is not remedied within thirty (30) days of "
                    "written notice requiring it to be remedied;",
                    "becomes insolvent, makes an assignment for the benefit of its creditors, or has a receiver "
                    "appointed over any of its assets.",
                ],
            ),
        ],
    ),
    (
        "Governing Law",
        [
            (
                "This Agreement and any dispute arising out of it are governed by the laws of England and Wales, "
                "and the courts of London have exclusive jurisdiction over any such dispute between the Parties, "
                "save that either Party may seek urgent injunctive relief in any court of competent jurisdiction to "
                "protect its Confidential Information or its intellectual property rights.",
                [],
            ),
        ],
    ),
]
FEES = [
    ("Service", "Monthly fee"),
    ("Hosting", "EUR 4,500"),
    ("Premium support", "EUR 1,250"),
    ("Onboarding", "EUR 9,800"),
]


def _word_numbering(doc: WordDocument) -> str:
    """Adds a contract's multi-level list to numbering.xml (1. / 1.1 / (a)) and returns its numId."""
    numbering = doc.part.numbering_part.element
    abstract = OxmlElement("w:abstractNum")
    abstract.set(qn("w:abstractNumId"), "900")
    for ilvl, (fmt, text) in enumerate([("decimal", "%1."), ("decimal", "%1.%2"), ("lowerLetter", "(%3)")]):
        level = OxmlElement("w:lvl")
        level.set(qn("w:ilvl"), str(ilvl))
        for tag, value in (("w:start", "1"), ("w:numFmt", fmt), ("w:lvlText", text)):
            element = OxmlElement(tag)
            element.set(qn("w:val"), value)
            level.append(element)
        abstract.append(level)
    first_num = numbering.find(qn("w:num"))  # every abstractNum comes before the first num
    if first_num is not None:
        first_num.addprevious(abstract)
    else:
        numbering.append(abstract)
    num = OxmlElement("w:num")
    num.set(qn("w:numId"), "900")
    ref = OxmlElement("w:abstractNumId")
    ref.set(qn("w:val"), "900")
    num.append(ref)
    numbering.append(num)
    return "900"


def _numbered(paragraph, num_id: str, ilvl: int) -> None:
    num_pr = OxmlElement("w:numPr")
    for tag, value in (("w:ilvl", str(ilvl)), ("w:numId", num_id)):
        element = OxmlElement(tag)
        element.set(qn("w:val"), value)
        num_pr.append(element)
    paragraph._p.get_or_add_pPr().append(num_pr)


def contract_docx(numbering: str = "word") -> bytes:
    """Returns a services agreement as .docx: a title, clauses numbered by Word's automatic numbering
    (`numbering` "word") or typed ("typed"), a fee table and a defined term used in another clause."""
    doc = WordDocument()
    doc.add_heading("MASTER SERVICES AGREEMENT", 0)
    doc.add_paragraph(
        'This Master Services Agreement is made on 1 March 2025 between Acme Corp ("Customer") and Widget Ltd '
        '("Supplier"), each a "Party" and together the "Parties", who agree as follows.'
    )
    num_id = _word_numbering(doc) if numbering == "word" else ""
    for major, (heading, clauses) in enumerate(CLAUSES, 1):
        if num_id:
            _numbered(doc.add_paragraph(heading, style="Heading 1"), num_id, 0)
        else:
            doc.add_paragraph(f"{major}. {heading}", style="Heading 1")
        for minor, (clause, items) in enumerate(clauses, 1):
            if num_id:
                _numbered(doc.add_paragraph(clause), num_id, 1)
            else:
                doc.add_paragraph(f"{major}.{minor} {clause}")
            for letter, item in zip("abcdefgh", items):
                if num_id:
                    _numbered(doc.add_paragraph(item), num_id, 2)
                else:
                    doc.add_paragraph(f"({letter}) {item}")
        if heading == "Fees and Payment":
            table = doc.add_table(rows=len(FEES), cols=2)
            for row, cells in zip(table.rows, FEES):
                for cell, text in zip(row.cells, cells):
                    cell.text = text
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def pipe(tmp_path: Path, engine=None) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=engine)


# -- structure, citations, definitions ----------------------------------------------------------------------
@pytest.mark.parametrize("numbering", ["word", "typed"])
def test_paragraphs_keep_list_numbers_and_tables_as_text(numbering: str) -> None:
    pages = extract_docx(contract_docx(numbering), name="msa.docx").pages
    texts = [p.text for p in pages]
    assert [p.number for p in pages] == list(range(1, len(pages) + 1))
    assert texts[:3] == ["MASTER SERVICES AGREEMENT", texts[1], "1. Definitions"]
    assert texts[1].startswith("This Master Services Agreement is made on 1 March 2025")
    assert "4. Termination" in texts
    convenience = next(t for t in texts if "Termination for Convenience" in t)
    assert convenience.startswith("4.1 Termination for Convenience. Either Party may terminate")
    assert any(t.startswith("4.2 Termination for Cause.") for t in texts)
    assert any(t.startswith("(a) commits a material breach") for t in texts)
    assert any(t.startswith("(b) becomes insolvent") for t in texts)
    assert "Hosting | EUR 4,500" in texts and "Service | Monthly fee" in texts
    assert texts.index("2. Fees and Payment") < texts.index("Hosting | EUR 4,500") < texts.index("3. Confidentiality")


@pytest.mark.parametrize("numbering", ["word", "typed"])
def test_sections_follow_the_clauses_and_citations_give_the_paragraph(tmp_path: Path, numbering: str) -> None:
    dp = pipe(tmp_path)
    doc = dp.ingest(contract_docx(numbering), name="msa.docx")
    assert doc.kind == "docx" and doc.unit == "paragraph" and doc.extractor == "python-docx"
    termination = [s for s in doc.sections if "4. Termination" in s.heading_path]
    assert termination, [s.heading_path for s in doc.sections]
    convenience = next(s for s in termination if s.heading.startswith("4.1 Termination for Convenience"))
    assert NOTICE in convenience.text and "Governing Law" not in convenience.text
    assert "Confidentiality" not in convenience.text and convenience.pages.startswith("¶")
    assert any(s.heading_path[0] == "5. Governing Law" for s in doc.sections)

    answer = dp.ask(doc, TERMINATION)
    cited = next(c for c in answer.citations if NOTICE in c.quote)
    paragraph = next(p.number for p in doc.pages if NOTICE in p.text)
    # The clause is quoted whole, from its heading paragraph "4. Termination" to the clause.
    assert cited.verified and cited.unit == "paragraph" and cited.quote.startswith("4. Termination")
    assert cited.pages == f"¶¶ {paragraph - 1}-{paragraph}" and cited.heading == convenience.heading
    assert f"({convenience.heading}, ¶¶ {paragraph - 1}-{paragraph})" in answer.text and "p. " not in answer.text
    hits = dp.search(doc, TERMINATION)
    assert hits[0].pages.startswith("¶") and hits[0].to_dict()["unit"] == "paragraph"


def test_the_table_is_searchable_and_the_defined_term_is_brought_in(tmp_path: Path) -> None:
    dp = pipe(tmp_path)
    doc = dp.ingest(contract_docx(), name="msa.docx")
    fees = dp.search(doc, "What is the monthly fee for premium support?")
    assert "Premium support | EUR 1,250" in fees[0].text
    context = dp.context(doc, "What are the confidentiality obligations of each Party?")
    # Retrieval finds the definition of Confidential Information itself; the definition of another term the
    # context uses ("Services") is brought in.
    definition = next(h for h in context if "Confidential Information" in h.heading)
    assert '"Confidential Information" means all non-public business' in definition.text
    assert definition.pages.startswith("¶")
    brought_in = next(h for h in context if h.role == "definition")
    assert brought_in.heading == '1.2 "Services"' and '"Services" means the hosting' in brought_in.text


def test_the_same_bytes_are_stored_once_under_one_id(tmp_path: Path) -> None:
    dp = pipe(tmp_path)
    data = contract_docx()
    first = dp.ingest(data, name="msa.docx")
    record = dp.store.doc_dir(first.id) / "extract-python-docx.json"
    written = record.stat().st_mtime_ns
    path = tmp_path / "copy.docx"
    path.write_bytes(data)
    again = DocPipe(dp.settings).ingest(path)
    assert again.id == first.id and again.kind == "docx"
    assert [d.name for d in (dp.store.root / "docs").iterdir() if not d.name.startswith(".")] == [first.id]
    assert record.stat().st_mtime_ns == written  # read from the store, not extracted again
    assert json.loads(record.read_text())["kind"] == "docx"


def test_a_grid_over_a_collection_fills_the_pdf_and_the_word_rows(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "supply.pdf").write_bytes(agreement_pdf("Northwind Ltd", "Contoso Inc", "sixty (60) days", "Delaware"))
    (room / "msa.docx").write_bytes(contract_docx())
    dp = pipe(tmp_path, EchoEngine())
    coll = dp.collection("deal")
    report = coll.add(room)
    assert not report.failed and len(report.added) == 2
    grid = dp.review(coll, questions=[TERMINATION])
    assert sorted(r.name for r in grid.rows) == ["msa.docx", "supply.pdf"]
    word, pdf = grid.cell("msa.docx", TERMINATION), grid.cell("supply.pdf", TERMINATION)
    assert word.status == pdf.status == "present"
    assert any(NOTICE in q.quote for q in word.verified) and word.pages.startswith("¶")
    assert pdf.pages == "p. 1"


# -- errors ------------------------------------------------------------------------------------------------
def _settings(**extraction) -> Settings:
    return Settings.preset("test", extraction=extraction)


def test_an_encrypted_word_file_is_refused_saying_what_to_do() -> None:
    # A real encrypted Word file: msoffcrypto-tool writes the OLE container with EncryptionInfo and
    # EncryptedPackage as Word does.
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(contract_docx())).encrypt("secret", out)
    for name in ("locked.docx", "upload.pdf"):
        with pytest.raises(EncryptedWordFileError, match="encrypted .*Word file.*unprotected copy.*PDF"):
            document_kind(out.getvalue(), name)
    with pytest.raises(EncryptedWordFileError, match="cannot open"):
        extract_docx(out.getvalue(), name="locked.docx")


def _zip(parts: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return out.getvalue()


def test_corrupt_word_files_get_a_clear_error() -> None:
    data = contract_docx()
    cases = {
        "truncated": (data[: len(data) // 2], "not a valid ZIP package"),
        "no main part": (
            _zip({"[Content_Types].xml": b"<Types/>", "word/styles.xml": b"<x/>"}),
            "no word/document.xml",
        ),
        "junk": (b"this is not a zip at all" * 10, "not a valid ZIP package"),
    }
    for label, (bad, message) in cases.items():
        with pytest.raises(MalformedPDFError, match=message) as caught:
            extract_docx(bad, name=f"{label}.docx")
        assert "save it again as .docx" in str(caught.value)
        assert document_kind(bad, f"{label}.docx") == "docx"  # named .docx: a broken Word file, not "not a PDF"
    with pytest.raises(NotAPDFError, match=r"not a PDF or a Word \(\.docx\) file.*\.xlsx"):
        document_kind(_zip({"xl/workbook.xml": b"<x/>"}), "book.zip")
    with pytest.raises(
        NotAPDFError, match=r"not a PDF or a Word \(\.docx\).*convert it to PDF \(or save it as \.docx\)"
    ):
        DocPipe(_settings()).ingest(b"plain text, not a contract file", name="notes.txt")


def _bomb(kind: str) -> bytes:
    """Returns a Word file whose ZIP holds a bomb: a huge document.xml, a dense one, or too many entries."""
    parts = {n: d for n, d in _parts(contract_docx()).items()}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            if name == "word/document.xml" and kind in ("huge", "dense"):
                size_mb = 400 if kind == "huge" else 40
                head, _, tail = data.partition(b"</w:body>")
                with archive.open(name, "w", force_zip64=True) as part:
                    part.write(head + b"<w:p><w:r><w:t>")
                    for _ in range(size_mb):
                        part.write(b"A" * (1 << 20))
                    part.write(b"</w:t></w:r></w:p></w:body>" + tail)
            else:
                archive.writestr(name, data)
        if kind == "entries":
            for n in range(6000):
                archive.writestr(f"word/media/x{n}.bin", b"")
    return out.getvalue()


def _parts(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("huge", "expands to 40[0-9] MB"),
        ("dense", "expands [0-9,]+ times"),
        ("entries", "holds 6,0[0-9]{2} ZIP entries"),
    ],
)
def test_zip_bombs_are_refused_from_the_directory_quickly(kind: str, message: str) -> None:
    bomb = _bomb(kind)
    assert len(bomb) < 3 << 20
    started = time.monotonic()
    # Without the directory check the worker would read the part (out of memory at this cap, or too much text).
    with pytest.raises(ExtractionError, match=f"{message}.*zip bomb"):
        extract_docx(bomb, name="bomb.docx", settings=_settings(memory_limit_mb=1024).extraction)
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("attack", ["billion laughs", "external entity"])
def test_xml_that_declares_a_dtd_is_refused(attack: str) -> None:
    parts = _parts(contract_docx())
    if attack == "billion laughs":
        entities = '<!ENTITY lol "lol">' + "".join(
            f'<!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">' for i in range(1, 10)
        )
        dtd, use = f"<!DOCTYPE w:document [{entities}]>", "&lol9;"
    else:
        dtd, use = '<!DOCTYPE w:document [<!ENTITY x SYSTEM "file:///etc/hostname">]>', "&x;"
    head, _, rest = parts["word/document.xml"].partition(b"?>")
    body = rest.replace(b"Either Party may terminate", f"{use} Either Party may terminate".encode(), 1)
    parts["word/document.xml"] = head + b"?>" + dtd.encode() + body
    with pytest.raises(MalformedPDFError, match="declares a DTD"):
        extract_docx(_zip(parts), name="crafted.docx")


# -- entry points --------------------------------------------------------------------------------------------
def test_the_rest_upload_takes_a_docx_raw_or_multipart(tmp_path: Path) -> None:
    data = contract_docx()
    with serving(tmp_path) as served:
        raw = httpx.post(
            f"{served.url}/v1/documents",
            params={"name": "msa.docx"},
            content=data,
            headers={**served.headers, "Content-Type": DOCX_MEDIA_TYPE},
            timeout=120,
        )
        assert raw.status_code == 200, raw.text
        files = {"file": ("msa.docx", data, DOCX_MEDIA_TYPE)}
        multipart = httpx.post(f"{served.url}/v1/documents", files=files, headers=served.headers, timeout=120)
        assert multipart.status_code == 200 and multipart.json()["id"] == raw.json()["id"]
        answer = httpx.post(
            f"{served.url}/v1/documents/{raw.json()['id']}/ask",
            json={"question": TERMINATION},
            headers=served.headers,
            timeout=120,
        )
        assert answer.status_code == 200, answer.text
        [reply] = answer.json()["answers"]
        cited = next(c for c in reply["citations"] if NOTICE in c["quote"])
        assert cited["pages"].startswith("¶") and cited["unit"] == "paragraph" and cited["verified"]
        text = httpx.post(
            f"{served.url}/v1/documents",
            content=b"just text",
            headers={**served.headers, "Content-Type": "text/plain"},
            timeout=30,
        )
        assert text.status_code == 415 and "wordprocessingml" in text.text
        # A password-protected Word file: docpipe cannot decrypt it, so the error says to save a copy, and
        # never asks for a password that would not help.
        from msoffcrypto.format.ooxml import OOXMLFile

        locked = io.BytesIO()
        OOXMLFile(io.BytesIO(data)).encrypt("secret", locked)
        refused = httpx.post(
            f"{served.url}/v1/documents",
            files={"file": ("locked.docx", locked.getvalue(), DOCX_MEDIA_TYPE)},
            headers=served.headers,
            timeout=120,
        )
        assert refused.status_code == 422 and refused.json()["error"]["type"] == "encrypted_word_file", refused.text
        assert "unprotected copy" in refused.text and "X-Document-Password" not in refused.text


def test_the_cli_ingests_and_asks_a_docx(tmp_path: Path) -> None:
    path = tmp_path / "msa.docx"
    path.write_bytes(contract_docx())
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    env["DOCPIPE_HOME"] = str(tmp_path / "home")
    run = [sys.executable, "-m", "docpipe"]
    ingest = subprocess.run(
        [*run, "ingest", str(path), "--preset", "test", "--json"], capture_output=True, text=True, env=env, timeout=300
    )
    assert ingest.returncode == 0, ingest.stderr
    [summary] = json.loads(ingest.stdout)
    assert summary["extractor"] == "python-docx" and summary["warnings"] == []
    ask = subprocess.run(
        [*run, "ask", str(path), TERMINATION, "--preset", "test"], capture_output=True, text=True, env=env, timeout=300
    )
    assert ask.returncode == 0, ask.stderr
    assert NOTICE in ask.stdout and "¶ " in ask.stdout and "4.1 Termination for Convenience" in ask.stdout
