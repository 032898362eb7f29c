"""Sections follow the contract's own structure, stay within the token limit and keep exact offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from docpipe.embed.hashing import HashingEmbedder
from docpipe.ingest.passages import embedding_text, make_passages
from docpipe.ingest.sections import find_headings, split_sections
from docpipe.ingest.tokens import get_token_counter
from docpipe.settings import ChunkingSettings
from docpipe.types import Document, Page

COUNTER = get_token_counter("Qwen/Qwen3-14B")
EVAL = Path(__file__).resolve().parents[1].parent / "shared" / "eval"

CONTRACT = """MASTER SUPPLY AGREEMENT
This Master Supply Agreement is dated March 3, 2021 between Acme Corp. and Beta LLC.

ARTICLE 1 DEFINITIONS
1.1 "Products" means the goods listed in Exhibit A.
1.2 "Term" has the meaning given in Section 5.1.

ARTICLE 2 SUPPLY
2.1 Orders. Buyer shall order Products by written purchase order. The price is
2.5 million units per year at most, as set out in Schedule 1, as amended from time to time.
2.2 Delivery. Seller shall deliver within ten (10) days. See Section 2.1.
ARTICLE 5 TERM AND TERMINATION
5.1 Term. This Agreement lasts three (3) years.
5.2 Termination for Convenience. Either party may terminate on ninety (90) days' notice.

EXHIBIT A PRODUCTS
1. Widgets. Blue widgets.
2. Gadgets. Red gadgets.
"""


def _doc(text: str, pages: int = 1) -> Document:
    if pages == 1:
        return Document(id="t", name="t.pdf", pages=[Page(1, text)])
    lines = text.splitlines()
    size = len(lines) // pages + 1
    return Document(
        id="t", name="t.pdf", pages=[Page(i + 1, "\n".join(lines[i * size : (i + 1) * size])) for i in range(pages)]
    )


def test_headings_follow_the_documents_numbering() -> None:
    titles = [h.title for h in find_headings(CONTRACT)]
    assert titles == [
        "ARTICLE 1 DEFINITIONS",
        '1.1 "Products" means the goods listed in Exhibit A',
        '1.2 "Term" has the meaning given in Section 5.1',
        "ARTICLE 2 SUPPLY",
        "2.1 Orders",
        "2.2 Delivery",
        "ARTICLE 5 TERM AND TERMINATION",
        "5.1 Term",
        "5.2 Termination for Convenience",
        "EXHIBIT A PRODUCTS",
        "1. Widgets",
        "2. Gadgets",
    ]
    # A wrapped line ("2.5 million ...") and body text starting with "Schedule 1," are not headings.
    assert not any(t.startswith(("2.5", "Schedule")) for t in titles)


def test_sections_have_heading_paths_and_exact_offsets() -> None:
    doc = _doc(CONTRACT, pages=3)
    sections = split_sections(doc, COUNTER, ChunkingSettings(min_section_tokens=0))
    text = doc.text
    for section in sections:
        assert section.text == text[section.start : section.end]
        assert section.n_tokens == COUNTER.count(section.text)
        assert doc.page_of(section.start) == section.page_start <= section.page_end
    paths = {s.heading_path for s in sections}
    assert ("ARTICLE 5 TERM AND TERMINATION", "5.2 Termination for Convenience") in paths
    assert ("EXHIBIT A PRODUCTS", "1. Widgets") in paths
    assert sections[0].heading_path == ("Preamble",)
    # Everything that is not whitespace is covered exactly once, in order.
    covered = "".join(s.text for s in sections)
    assert "".join(covered.split()) == "".join(text.split())


def test_small_parts_merge_but_never_past_the_limit() -> None:
    doc = _doc(CONTRACT)
    merged = split_sections(doc, COUNTER, ChunkingSettings(min_section_tokens=30))
    unmerged = split_sections(doc, COUNTER, ChunkingSettings(min_section_tokens=0))
    assert len(merged) < len(unmerged)
    assert all(s.n_tokens <= 4096 for s in merged)
    # A bare ARTICLE line joins the clause below it and reads under the deeper path.
    assert not any(s.text.strip() == "ARTICLE 2 SUPPLY" for s in merged)


def test_long_unstructured_text_is_cut_within_the_limit_with_exact_offsets() -> None:
    paragraph = "The Supplier shall keep records of every shipment and make them available on request. " * 12
    body = "\n\n".join(f"{paragraph} Paragraph {i}." for i in range(60))
    doc = _doc("LONG AGREEMENT\n\n" + body, pages=4)
    settings = ChunkingSettings(max_section_tokens=4096, split_tokens=700, front_matter_tokens=64)
    sections = split_sections(doc, COUNTER, settings)
    assert len(sections) > 10
    text = doc.text
    for section in sections:
        assert section.text == text[section.start : section.end]
        assert 0 < section.n_tokens <= 700
    # Consecutive pieces neither overlap nor drop text.
    for a, b in zip(sections, sections[1:]):
        assert a.end <= b.start
        assert text[a.end : b.start].strip() == ""
    assert "".join("".join(s.text for s in sections).split()) == "".join(text.split())


def test_front_matter_stays_a_small_section_of_its_own() -> None:
    preamble = "SERVICES AGREEMENT\nDated January 30, 2012, between Alpha Inc. and Omega GmbH.\n" + (
        "WHEREAS the parties wish to cooperate on many things in many places. " * 120
    )
    doc = _doc(preamble + "\n1. Services. Alpha shall provide the services.\n2. Fees. Omega shall pay.\n")
    sections = split_sections(doc, COUNTER, ChunkingSettings(front_matter_tokens=128))
    assert sections[0].n_tokens <= 128
    assert "January 30, 2012" in sections[0].text


def test_passages_never_exceed_what_the_embedder_reads() -> None:
    embedder = HashingEmbedder(max_tokens=40)
    doc = _doc(CONTRACT * 4)
    sections = split_sections(doc, COUNTER, ChunkingSettings())
    passages = make_passages(sections, doc.text, embedder, overlap=8)
    by_id = {s.id: s for s in sections}
    for passage in passages:
        assert passage.text == doc.text[passage.start : passage.end]
        assert len(embedder.token_spans(embedding_text(passage, by_id[passage.section_id], embedder))) <= 40
        section = by_id[passage.section_id]
        assert section.start <= passage.start < passage.end <= section.end
    # Every word of every section is in some passage (overlapping windows, nothing dropped).
    for section in sections:
        inside = [p for p in passages if p.section_id == section.id]
        covered = set()
        for p in inside:
            covered.update(range(p.start, p.end))
        words = [m for m in __import__("re").finditer(r"\w+", section.text)]
        assert all(section.start + m.start() in covered for m in words)


@pytest.mark.integration
def test_real_contracts_section_within_limits_and_offsets() -> None:
    from docpipe.ingest.extract import extract_pages
    from docpipe.settings import ExtractionSettings

    pdfs = sorted((EVAL / "cuad-dev" / "pdf").glob("*.pdf"))[:6]
    if not pdfs:
        pytest.skip(f"CUAD contracts not found under {EVAL}")
    for pdf in pdfs:
        pages = extract_pages(pdf.read_bytes(), settings=ExtractionSettings(extractor="pypdfium2"), name=pdf.name)
        doc = Document(id="x", name=pdf.name, pages=pages)
        sections = split_sections(doc, COUNTER, ChunkingSettings())
        assert len(sections) >= 5, pdf.name
        for section in sections:
            assert section.text == doc.text[section.start : section.end]
            assert section.n_tokens <= 4096
            assert 1 <= section.page_start <= section.page_end <= len(pages)


def test_table_of_contents_entries_do_not_open_sections() -> None:
    toc = "TABLE OF CONTENTS\n1.1 Introduction 3\n1.2 Scope 4\n2.1 Fees 5\n2.2 Payment ........ 6\n\n"
    body = (
        "1.1 Introduction. This agreement sets out the services.\n1.2 Scope. The scope is the network.\n"
        "2.1 Fees. Customer pays the fees within 30\ndays of invoice.\n2.2 Payment. Payment is by wire.\n"
    )
    titles = [h.title for h in find_headings("SERVICES AGREEMENT\n" + toc + body)]
    assert titles == ["1.1 Introduction", "1.2 Scope", "2.1 Fees", "2.2 Payment"]
    # A single line ending in a number ("within 30") is body text, not a table of contents.
    assert find_headings(body)[2].title == "2.1 Fees"


def test_token_counter_chunks_cover_the_text_in_fixed_token_windows() -> None:
    text = "Either Party may terminate this Agreement upon ninety (90) days' notice. " * 200
    pieces = COUNTER.chunks(text, 256)
    assert "".join(piece for piece, _ in pieces) == text
    assert [n for _, n in pieces[:-1]] == [256] * (len(pieces) - 1)
    assert sum(n for _, n in pieces) == COUNTER.count(text)
