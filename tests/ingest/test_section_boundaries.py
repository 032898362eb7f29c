"""Section boundaries a citation relies on: each numbered sub-clause is a section of its own, with its own
heading, and a heading is a title, never the clause's first sentence."""

from __future__ import annotations

import pytest

from docpipe.ingest.sections import find_headings, split_sections
from docpipe.settings import ChunkingSettings
from docpipe.tokens import get_token_counter
from docpipe.types import Document, Page, Section

COUNTER = get_token_counter("Qwen/Qwen3-14B")

OPENING = """COLLABORATION AGREEMENT
This Collaboration Agreement is made on June 9, 2020 between Anixa Biosciences, Inc. ("Anixa") and
OntoChem GmbH ("OntoChem").
1. Definitions. Capitalised terms have the meanings given in the Research Plan attached as Exhibit A.
2. Research Program. OntoChem will perform the Research Program set out in the Research Plan with the care
of a diligent research organisation and will report its results to Anixa every month.
3. Payments. Anixa will pay OntoChem the fees set out in the Research Plan within thirty (30) days of each
invoice, by check or by wire transfer of immediately available funds.
4. Term and Termination.
"""
TERM = "4.1 Term. Unless earlier terminated in accordance with Section 4.2 or 4.3, this Agreement will be in effect from the Effective Date until completion of the Research Program."
BY_ANIXA = "4.2 Termination by Anixa. This Agreement may be terminated by Anixa, without cause, upon at least thirty (30) days written notice to OntoChem."
SCAFFOLDS = """4.3 Termination of Lead Scaffolds. For each Lead Scaffold, if:
(a) neither Anixa nor any of its Affiliates has dosed the first patient in a human clinical trial by the fifth
anniversary of the Selection Notice; or
(b) Anixa earlier provides written notice of termination of such Lead Scaffold referencing this Section 4.3,
then such Lead Scaffold will no longer be subject to this Agreement.
5. Governing Law. This Agreement is governed by the laws of the State of New York.
"""


def _sections(text: str) -> list[Section]:
    doc = Document(id="ab" * 32, name="contract.pdf", pages=[Page(1, text)])
    return split_sections(doc, COUNTER, ChunkingSettings())


def _cited(sections: list[Section], quote: str) -> Section:
    """Returns the section a citation of `quote` names: the one whose text holds it."""
    return next(s for s in sections if quote in s.text)


@pytest.mark.parametrize("between", ["\n", " "], ids=["own lines", "run together"])
def test_numbered_sub_clauses_are_sections_with_their_own_headings(between: str) -> None:
    sections = _sections(OPENING + TERM + between + BY_ANIXA + "\n" + SCAFFOLDS)

    term, by_anixa = _cited(sections, "Unless earlier terminated"), _cited(sections, "without cause")
    assert term.heading == "4.1 Term"
    assert by_anixa.heading == "4.2 Termination by Anixa"
    assert by_anixa.heading_path == ("4. Term and Termination", "4.2 Termination by Anixa")
    assert term.text.endswith("completion of the Research Program.")
    assert by_anixa.text == BY_ANIXA
    # The (a)/(b) items are part of their clause, not sections of their own.
    scaffolds = _cited(sections, "(a) neither Anixa")
    assert scaffolds.heading == "4.3 Termination of Lead Scaffolds"
    assert "(b) Anixa earlier provides" in scaffolds.text
    assert not any(s.heading.startswith("(") for s in sections)


TRANSPORTATION = """TRANSPORTATION CONTRACT
This contract is made between Enterprise Transportation Company ("Carrier") and Shipper.
1.   Shipper shall tender commodities to Carrier for transportation by Carrier in tank trucks between the
points named in Exhibit A, and Carrier shall transport them with due care.
2. (a) if either party should make a general assignment for the benefit of
creditors or if a receiver should be appointed on account of the insolvency of
either party, the other party may, without prejudice to any other right or
remedy, terminate this contract upon written notice.
(b) Termination shall not relieve either party of obligations accrued before it.
3. No waiver by Shipper or Carrier of any default of the other under this
contract shall operate as a waiver of any future default.
4. Termination
4.1 Carrier or Shipper shall have the right, at its option, to terminate this contract, by giving written
notice to the other party, on the occurrence of any of the following events:
"""


def test_a_heading_is_a_title_never_the_clauses_first_sentence() -> None:
    headings = [h.title for h in find_headings(TRANSPORTATION)]

    assert headings == ["1.", "2.", "3.", "4. Termination", "4.1"]
    sections = _sections(TRANSPORTATION)
    assert _cited(sections, "general assignment").heading == "2."
    assert _cited(sections, "Termination shall not relieve").heading == "2."


def test_references_open_no_section() -> None:
    text = (
        OPENING
        + "4.1 Term. This Agreement lasts until the Research Program is complete, subject to\n"
        + "Article 3 below and to the payment terms of\n"
        + "Section 4.2 of the Research Plan, as amended. 4.2 and 4.3 survive any termination.\n"
        + BY_ANIXA
        + "\n"
    )

    headings = [h.title for h in find_headings(text)]

    assert headings[-2:] == ["4.1 Term", "4.2 Termination by Anixa"]


def test_a_long_title_stays_a_title_and_a_wrapped_sentence_does_not() -> None:
    # PDF text gives a Greek question mark (U+037E) for some semicolons.
    text = (
        "1. Appointment. Distributor is appointed as the exclusive distributor of the Products.\n"
        "2. Indemnification\u037e Infringement\u037e Insurance\u037e and Limitation of Liability\n"
        "2.1 Distributor shall indemnify STAAR against claims arising from its sale of the Products.\n"
        "3. ELEPHANT TALK wishes to become a full Mobile Virtual Network Enabler in the Netherlands\n"
        "and T-Mobile is willing to host it on its network on the terms of this Agreement.\n"
    )

    titles = [h.title for h in find_headings(text)]

    assert titles == [
        "1. Appointment",
        "2. Indemnification\u037e Infringement\u037e Insurance\u037e and Limitation of Liability",
        "2.1",
        "3.",
    ]


def test_a_numbering_column_extracted_apart_from_its_text_makes_no_empty_sections() -> None:
    # Some PDFs give the clause numbers as a column of their own, before the text they number.
    column = "\n".join(["1.", "1.1.", "1.2.", "2.", "2.1.", "2.2."])
    text = (
        OPENING.split("1. Definitions")[0]
        + column
        + "\nDiagnostics. Supplier will retain access to the diagnostics and telemetric data of the Products.\n"
        + "Pricing. Reseller will pay the prices set out in Schedule 1 within thirty (30) days of each invoice.\n"
    )
    sections = _sections(text)
    assert all(any(c.isalpha() for c in s.text) for s in sections)
    assert "Diagnostics. Supplier" in _cited(sections, "1.1.").text  # the numbers stay with the text they number
    # A redacted clause has no words either, but it is a clause: it keeps its own section.
    redacted = _sections(OPENING + "4.1 [***].\n4.2 [***].\n" + BY_ANIXA.replace("4.2", "4.3") + "\n")
    assert [s.heading for s in redacted if "[***]" in s.text] == ["4.1", "4.2"]
