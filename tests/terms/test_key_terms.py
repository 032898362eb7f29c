"""Key terms read offline: each reader on the project's sample contract and on hostile wording, computed
dates with their derivation, and the guard that drops a value its quote does not give."""

from __future__ import annotations

import pytest

from docpipe.cells import Cell
from docpipe.embed.hashing import HashingEmbedder
from docpipe.ingest.sections import split_sections
from docpipe.pipeline import DocPipe
from docpipe.settings import Settings
from docpipe.terms.catalog import KEY_TERMS, key_term_columns
from docpipe.terms.key_terms import read_key_terms, supported
from docpipe.terms.reading import Reader, read_cell
from docpipe.tokens import get_token_counter
from docpipe.types import Document, Page
from docpipe.values.kinds import Value

SAMPLE = "samples/master_services_agreement.pdf"


@pytest.fixture(scope="module")
def sample_terms(tmp_path_factory):
    dp = DocPipe(Settings(home=tmp_path_factory.mktemp("home")), embedder=HashingEmbedder())
    try:
        grid = dp.terms([SAMPLE])
    finally:
        dp.close()
    return {column.term: cell for column, cell in zip(grid.columns, grid.cells[0])}


def _doc(*pages: str) -> Document:
    settings = Settings()
    doc = Document(id="ab" * 32, name="contract.pdf", pages=[Page(i + 1, t) for i, t in enumerate(pages)])
    doc.sections = split_sections(doc, get_token_counter(settings.chunking.tokenizer), settings.chunking)
    return doc


def _terms(doc: Document, *terms: str) -> dict[str, Cell]:
    columns = key_term_columns(list(terms))
    return {c.term: cell for c, cell in zip(columns, read_key_terms(doc, columns))}


def test_every_key_term_of_the_sample_is_read_with_its_proof(sample_terms):
    values = {term: cell.value.normalized for term, cell in sample_terms.items() if cell.value is not None}
    assert values["agreement_date"] == "2025-03-03"
    assert values["effective_date"] == "2025-03-03"
    assert values["initial_term"] == {"days": 1095, "count": 3, "unit": "year"}
    assert values["expiration_date"] == "2028-03-03"
    assert values["auto_renewal"] is True
    assert values["renewal_term"]["days"] == 365
    assert values["notice_period"]["days"] == 60
    assert values["notice_deadline"] == "2028-01-03"
    assert values["governing_law"] == "Delaware"
    assert values["venue"] == "Delaware"
    assert [(p["name"], p["role"]) for p in values["parties"]] == [
        ("Northwind Analytics, Inc.", "Provider"),
        ("Harbor & Vale Logistics LLC", "Customer"),
    ]
    assert "twelve (12) months" in values["liability_cap"]["formula"]
    assert sample_terms["termination_for_convenience"].value.display == "Yes, Either Party, 90 days notice"
    assert sample_terms["document_title"].value.display == "MASTER SERVICES AGREEMENT"
    for term, cell in sample_terms.items():
        assert cell.status == "present", (term, cell.note)
        assert cell.quotes and all(q.verified and q.quote.strip() for q in cell.quotes), term
        assert all(q.document_name == "master_services_agreement.pdf" for q in cell.quotes)


def test_read_values_are_given_by_their_own_quote(sample_terms):
    for term in ("agreement_date", "initial_term", "renewal_term", "notice_period", "venue"):
        cell = sample_terms[term]
        kind = next(t.kind for t in KEY_TERMS if t.id == term)
        assert supported(kind, cell.value, cell.quotes[0].quote) == "", term
        assert cell.value.as_written in cell.quotes[0].quote


def test_computed_dates_show_their_derivation_and_both_quotes(sample_terms):
    expiration = sample_terms["expiration_date"]
    assert expiration.derivation == "2025-03-03 + 3 years = 2028-03-03"
    assert {q.page_start for q in expiration.quotes} == {1, 9}  # the start date's page and the term's
    assert any("three (3) years" in " ".join(q.quote.split()) for q in expiration.quotes)
    deadline = sample_terms["notice_deadline"]
    assert deadline.derivation == "2028-03-03 - 60 days = 2028-01-03"
    assert any("sixty (60) days" in " ".join(q.quote.split()) for q in deadline.quotes)
    assert sample_terms["effective_date"].derivation == "the date of the agreement: 2025-03-03"


def test_a_value_its_quote_does_not_give_drops_to_uncertain():
    doc = _doc("This Supply Agreement is made as of June 21, 1999 by and between Acme Corp. and Beta LLC.")
    reader = Reader(doc)
    sentence = reader.sentences[0]
    wrong = Value("date", "2000-06-21", "2000-06-21", "June 21, 1999", 0, 13)
    cell = read_cell(reader, "date", wrong, sentence)
    assert cell.status == "uncertain" and cell.value is None
    assert "does not give 2000-06-21" in cell.note and "1999-06-21" in cell.note
    right = Value("date", "1999-06-21", "1999-06-21", "June 21, 1999", 0, 13)
    assert read_cell(reader, "date", right, sentence).status == "present"


def test_the_date_last_signed_below_is_no_date_and_the_signatures_give_one():
    doc = _doc(
        "SERVICES AGREEMENT\n\nThis Services Agreement is entered into as of the date last signed below by "
        'Acme Corp. ("Acme") and Beta LLC ("Beta").\n\n1. Services. Acme shall provide the services.',
        "IN WITNESS WHEREOF the parties have signed this Agreement.\n\nACME CORP.\nBy: /s/ J. Smith\n"
        "Date: March 2, 2021\n\nBETA LLC\nBy: /s/ K. Jones\nDate: March 5, 2021\n",
    )
    cell = _terms(doc, "agreement_date")["agreement_date"]
    assert cell.value is not None and cell.value.normalized == "2021-03-05"  # the later signature
    assert cell.quotes[0].page_start == 2


def test_a_letter_agreement_is_dated_above_its_addressee_not_by_an_as_of_in_its_text():
    doc = _doc(
        "AGENCY AGREEMENT\n\n                                        ____________, 1996\n\nCapital Resources, Inc.\n"
        "Washington, D.C.\n\nLadies and Gentlemen:\n\nThe Company will offer its common stock to depositors of "
        "the Association as of March 31, 1995, in a subscription offering."
    )
    assert _terms(doc, "agreement_date")["agreement_date"].value.normalized == "1996"


@pytest.mark.parametrize(
    ("opening", "signatures", "iso"),
    [
        # a sentence splitter breaks after "April." and after "Date:"; the date is read whole
        (
            "This Service Agreement is entered into on April. 1st 2019 by and between Acme Corp. and Beta Ltd.",
            "",
            "2019-04-01",
        ),
        (
            "This Hosting Agreement is entered into by and between Acme Corp. and Beta Inc.",
            "By: /s/ J. Smith          By: /s/ K. Jones\nDate: 3-14-18 Date: 3-7-18\n",
            "2018-03-14",
        ),
        # the signature block labels its blanks below them
        (
            "This Content Licensing Agreement is between Acme Corp. and Beta AG.",
            "03/24/06                           03/24/06\n______________     ______________\nDate"
            "                               Date\n/s/ J. Smith                /s/ K. Jones\n",
            "2006-03-24",
        ),
    ],
)
def test_dates_a_sentence_splitter_or_a_signature_block_breaks_apart(opening, signatures, iso):
    doc = _doc(
        "SERVICES AGREEMENT\n\n" + opening + "\n\n1. Services. Acme shall provide the services.", signatures or "x"
    )
    assert _terms(doc, "agreement_date")["agreement_date"].value.normalized == iso


def test_the_first_of_two_governing_law_clauses_and_not_the_place_of_incorporation():
    doc = _doc(
        "LICENSE AGREEMENT\n\nThis License Agreement is made on 6/21/99 between Acme Corp., a Delaware "
        'corporation ("Acme"), and Beta Ltd ("Beta").\n\n12. Governing Law. This Agreement shall be governed by '
        "the laws of the State of New York, without regard to its conflict of laws rules.\n\n13. Schedule B shall "
        "be governed by the laws of England and Wales."
    )
    cells = _terms(doc, "governing_law", "agreement_date")
    assert cells["governing_law"].value.normalized == "New York"
    assert cells["agreement_date"].value.normalized == "1999-06-21"


def test_an_expiration_stated_in_words_and_figures_is_computed_from_the_effective_date():
    doc = _doc(
        "DISTRIBUTION AGREEMENT\n\nThis Distribution Agreement is entered into as of May 8, 2014 (the "
        '"Effective Date") by and between Acme Corp. ("Supplier") and Beta LLC ("Distributor").\n\n'
        "2. Term. This Agreement shall commence on the Effective Date and continue for five (5) years. "
        "Thereafter it shall renew automatically for successive one (1) year periods unless either party gives "
        "written notice of non-renewal at least ninety (90) days prior to the end of the then-current term."
    )
    cells = _terms(doc, "expiration_date", "renewal_term", "notice_period", "notice_deadline", "auto_renewal")
    assert cells["expiration_date"].value.normalized == "2019-05-08"
    assert cells["expiration_date"].derivation == "2014-05-08 + 5 years = 2019-05-08"
    assert cells["renewal_term"].value.normalized["days"] == 365
    assert cells["notice_period"].value.normalized["days"] == 90
    assert cells["notice_deadline"].value.normalized == "2019-02-07"
    assert cells["auto_renewal"].value.normalized is True


def test_an_agreement_until_terminated_is_perpetual_and_a_perpetual_licence_is_not():
    until = _doc(
        "AGENCY AGREEMENT\n\nThis Agency Agreement is made as of March 29, 1999 by and between Acme Corp. "
        '("Company") and Beta LLC ("Agent").\n\n4. Term. This Agreement will become effective as of the date '
        "first written above and will continue in effect until terminated pursuant to Section 4.2."
    )
    assert _terms(until, "expiration_date")["expiration_date"].value.normalized == "perpetual"
    licence = _doc(
        "LICENSE AGREEMENT\n\nThis License Agreement is made as of March 29, 1999 by and between Acme Corp. "
        '("Licensor") and Beta LLC ("Licensee").\n\n2. Grant. Licensor hereby grants to Licensee a perpetual, '
        "royalty-free license to use the Software."
    )
    cell = _terms(licence, "expiration_date")["expiration_date"]
    assert cell.status == "not_found" and cell.value is None


@pytest.mark.parametrize(
    ("clause", "end"),
    [
        ("This Agreement shall be effective through and including March 31, 2004.", "2004-03-31"),
        (
            "The term of this Agreement will begin on December 15, 1997 and will end the later of (i) December 15, 1999 "
            "or (ii) the delivery of all goods.",
            "1999-12-15",
        ),
        ("The Term of the Agreement is hereby extended to January 20, 2012 unless sooner terminated.", "2012-01-20"),
        ("6. TERM: November 01, 2014 to October 31, 2017", "2017-10-31"),
        (
            "This Agreement shall expire upon the earlier of (i) the first anniversary of the Effective Date and (ii) "
            "the date all Shares have been sold.",
            "2019-05-08",
        ),
        (
            "The term of this Agreement and the rights and obligations of the Parties hereto shall commence as of the "
            "Effective Date and shall continue in perpetuity, unless terminated earlier.",
            "perpetual",
        ),
        (
            "The term of this Agreement will begin upon acceptance of the application and will end when terminated by "
            "either party.",
            "perpetual",
        ),
        (
            "This Agreement will commence on the Effective Date and continue through the completion of the Services.",
            "perpetual",
        ),
    ],
)
def test_how_contracts_write_the_end_of_their_term(clause, end):
    doc = _doc(
        'SUPPLY AGREEMENT\n\nThis Supply Agreement is entered into as of May 8, 2018 (the "Effective Date") by and '
        'between Acme Corp. ("Supplier") and Beta LLC ("Buyer").\n\n2. Term. ' + clause
    )
    assert _terms(doc, "expiration_date")["expiration_date"].value.normalized == end


@pytest.mark.parametrize(
    ("clause", "renewal"),
    [
        (
            "This Agreement will extend automatically for monthly periods unless either party notifies the other "
            "party in writing at least thirty (30) days before the expiration of the then current term.",
            {"days": 30},
        ),
        (
            "This Agreement shall continue in effect for a period of one year from the date of its execution and from "
            "year to year thereafter provided such continuance is approved by the Board.",
            {"days": 365},
        ),
        (
            "This agreement shall continue for an initial term of one (1) year and indefinitely after that until "
            "terminated by either party giving at least twelve (12) months' prior written notice.",
            {"perpetual": True},
        ),
        (
            "When this Agreement expires, you will have the option to continue the franchise relationship for two (2) "
            "additional terms of ten (10) years each.",
            {"days": 3650},
        ),
        (
            "The initial term of this Agreement shall be four (4) years, which term may be extended for up to three (3) "
            "years by written agreement of both Parties prior to the expiration date of the initial term.",
            {"days": 1095},
        ),
        # a sentence splitter breaks after "12" at the line's end
        (
            "This Contract shall remain effective throughout the Initial Term, and be extended automatically for a "
            "period of 12\nmonths, unless either Party serves written notice at least 65 days prior to the end of the "
            "Initial Term.",
            {"days": 360},
        ),
    ],
)
def test_how_contracts_write_their_renewal(clause, renewal):
    doc = _doc(
        "SUPPLY AGREEMENT\n\nThis Supply Agreement is entered into as of May 8, 2018 by and between Acme Corp. "
        '("Supplier") and Beta LLC ("Buyer").\n\n2. Term. ' + clause
    )
    value = _terms(doc, "renewal_term")["renewal_term"].value
    assert value is not None
    assert {key: value.normalized.get(key) for key in renewal} == renewal


def test_a_sub_clause_headed_by_its_number_alone_is_read_under_its_article_title():
    # "3.1" is a section of its own, headed by its number: its clause is the "3. Term" above it, and a price
    # clause that rises "from year to year" earlier in the contract is no renewal of the agreement.
    doc = _doc(
        "SUPPLY AGREEMENT\n\nThis Supply Agreement is entered into as of May 8, 2018 by and between Acme Corp. "
        '("Supplier") and Beta LLC ("Buyer").\n\n1. Supply\n1.1 Supplier shall supply the Products that Buyer '
        "orders.\n1.2 Buyer shall pay each invoice within thirty (30) days.\n2. Prices\n2.1 Supplier may increase "
        "the prices at the end of the first calendar year of this Agreement and from year to year thereafter, by "
        "giving Buyer 90 days prior written notice.\n3. Term\n3.1 The initial term of this Agreement shall be for a "
        "period of five (5) years from the date first set forth above and shall thereafter automatically renew for "
        "additional two (2) year terms unless a party gives notice of non-renewal no less than 6 months prior to the "
        "expiration of the then-current term.\n3.2 Termination of this Agreement shall not affect the rights accrued "
        "before it."
    )
    clause = next(s for s in doc.sections if "initial term" in s.text)
    assert (clause.heading, clause.heading_path) == ("3.1", ("3. Term", "3.1"))
    assert _terms(doc, "renewal_term")["renewal_term"].value.normalized["days"] == 730


def test_a_time_limit_within_the_term_clause_is_not_the_term():
    doc = _doc(
        "OUTSOURCING AGREEMENT\n\nThis Master Agreement is made as of the 26 day of January, 2007 (the "
        '"Effective Date"), by and between Acme Corp. ("Customer") and Beta LLC ("Vendor").\n\n2. TERM\n'
        "2.1. Duration. Unless Customer notifies Vendor of its intent not to renew this Agreement in writing within a "
        "period of three (3) months following the Renewal Notice, this Agreement shall automatically renew at the end "
        "of the Initial Term for one (1) twelve-month period.\n\n18. DEFINITIONS\nThe term of this Agreement shall "
        'commence on the Effective Date and end on November 30, 2014 (the "Initial Term").'
    )
    assert _terms(doc, "expiration_date")["expiration_date"].value.normalized == "2014-11-30"


def test_a_party_whose_name_a_sentence_splitter_cut_is_quoted_whole():
    doc = _doc(
        "CONSULTING AGREEMENT\n\nThis Consulting Agreement is made as of January 10, 2019 by and between "
        'Emerald Health Naturals, Inc. ("Emerald") and DR. GAETANO MORELLO N.D. INC. ("Contractor").\n\n'
        "1. Services. Contractor shall provide the services."
    )
    cell = _terms(doc, "parties")["parties"]
    assert cell.status == "present", cell.note
    assert [p["name"] for p in cell.value.normalized] == [
        "Emerald Health Naturals, Inc.",
        "DR. GAETANO MORELLO N.D. INC.",
    ]
    assert any("GAETANO MORELLO" in q.quote for q in cell.quotes)


def test_the_day_the_term_begins_is_the_effective_date_when_no_other_is_named():
    doc = _doc(
        "PROMOTION AGREEMENT\n\nThis Promotion Agreement is made as of January 26, 1998 by and between Acme Corp. "
        '("Acme") and Beta LLC ("Beta").\n\n1. Promotion. Acme shall promote Beta.\n\n2. Term. The term of this '
        'Agreement (the "Term") will begin on February 1, 1998 and end on January 31, 1999.'
    )
    cell = _terms(doc, "effective_date")["effective_date"]
    assert cell.value.normalized == "1998-02-01"
    assert "its term begins" in cell.note


def test_a_severability_clause_does_not_make_the_agreement_perpetual():
    doc = _doc(
        "SUPPLY AGREEMENT\n\nThis Supply Agreement is made as of May 8, 2018 by and between Acme Corp. and Beta "
        "LLC.\n\n11. If any Article or clause of this Agreement shall be held to be indefinite, invalid or "
        "unenforceable, the rest of this Agreement shall remain in effect."
    )
    assert _terms(doc, "expiration_date")["expiration_date"].value is None


def test_a_preamble_past_a_table_of_contents_and_parties_from_the_signature_blocks():
    contents = "TABLE OF CONTENTS\n" + "".join(f"{k}. Heading number {k} of the agreement\n" for k in range(1, 120))
    doc = _doc(
        contents,
        "FRANCHISE AGREEMENT\nAGREEMENT dated 1997 Between BURGER KING CORPORATION a company incorporated in Florida "
        '("BKC") AND The party specified as the Franchisee on SCHEDULE 1 (the "Franchisee").\n\n1. Grant. BKC grants '
        "the Franchisee a franchise.\n\n" + "2. Standards. The Franchisee shall keep the restaurant clean. " * 60,
        "IN WITNESS WHEREOF the parties have signed this Agreement.\n\nBURGER KING CORPORATION\nBy: /s/ J. Smith\n\n"
        "POLSKA FAST FOOD SP. Z O.O.\nBy: /s/ K. Nowak\n",
    )
    cell = _terms(doc, "parties")["parties"]
    assert cell.status == "present"
    assert [p["name"] for p in cell.value.normalized] == ["BURGER KING CORPORATION", "POLSKA FAST FOOD SP. Z O.O."]
    assert cell.value.normalized[0]["role"] == "BKC"  # from the preamble, found past the table of contents
    assert cell.note == "Read from the opening and the signature blocks."
    assert {q.page_start for q in cell.quotes} == {2, 3}


def test_a_perpetual_right_granted_is_not_the_agreement_running_forever():
    doc = _doc(
        "LICENSE AGREEMENT\n\nThis License Agreement is made as of March 29, 1999 by and between Acme Corp. "
        '("Licensor") and Beta LLC ("Licensee").\n\n2. Grant. This Agreement grants Licensee a perpetual and '
        "irrevocable right to use the Software."
    )
    assert _terms(doc, "expiration_date")["expiration_date"].value is None


def test_a_contract_without_these_terms_gives_no_values():
    doc = _doc("MEMO\n\nThe parties met to discuss the weather. Nothing was agreed.")
    cells = _terms(doc, *[t.id for t in KEY_TERMS])
    assert {term: cell.value for term, cell in cells.items() if cell.value is not None} == {}
    assert all(cell.status in ("not_found", "uncertain") and cell.note for cell in cells.values())


def test_an_unknown_term_is_not_found_not_an_error():
    columns = key_term_columns(["governing_law"])
    doc = _doc("This Agreement shall be governed by the laws of Ontario.")
    other = [columns[0].__class__("Other", "Other?", "Other?")]
    assert read_key_terms(doc, other)[0].status == "not_found"


def test_typed_questions_offline_are_candidates_with_a_value_and_text_cells_say_something(tmp_path):
    # The real embedder: a text cell's clause score is measured on it (the hashing embedder's scores mean nothing).
    dp = DocPipe(Settings(home=tmp_path / "home"))
    try:
        grid = dp.review(
            [SAMPLE],
            questions=[
                "Which state's law governs this agreement?::jurisdiction",
                "How many days' notice to terminate for convenience?::duration",
                "Can either party terminate for convenience?",
            ],
        )
    finally:
        dp.close()
    law, notice, text = grid.cells[0]
    assert (law.status, law.value.normalized) == (
        "candidate",
        "Delaware",
    )  # the law chosen, not "an Oregon corporation"
    assert (notice.status, notice.value.normalized["days"]) == ("candidate", 90)
    assert notice.quotes[0].verified and notice.value.as_written in notice.quotes[0].quote
    # A text cell offline shows its decisive sentence, cut to a line, not a bare "Candidate".
    assert text.value is None and text.answer.startswith("Either Party may terminate this Agreement")
    assert len(text.answer) <= 160 and text.text.startswith("Candidate - Either Party")


def test_an_effective_date_tied_to_an_event_is_no_date_and_a_defined_one_is_read():
    event = _doc(
        "SUPPLY AGREEMENT\n\nThis Supply Agreement is made as of July 31, 2017 by and between Acme Corp. "
        '("Supplier") and Beta LLC ("Buyer").\n\n1.4 "Effective Date" means the Completion Date as defined in '
        "the Purchase Agreement."
    )
    cell = _terms(event, "effective_date")["effective_date"]
    assert cell.status == "uncertain" and cell.value is None  # not the agreement's date: the closing of another deal
    assert "event" in cell.note and "Completion Date" in cell.quotes[0].quote
    defined = _doc(
        "SUPPLY AGREEMENT\n\nThis Supply Agreement is made as of November 5, 2019 by and between Acme Corp. "
        '("Supplier") and Beta LLC ("Buyer").\n\n1.4 "Effective Date" means October 31, 2019.'
    )
    assert _terms(defined, "effective_date")["effective_date"].value.normalized == "2019-10-31"
