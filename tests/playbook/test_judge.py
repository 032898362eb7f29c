"""Verdicts from cells: each rule form, what each verdict rests on, and the guard that never lets a ``meets``
through without proof."""

from __future__ import annotations

import json
import re

import pytest

from docpipe.cells import Cell
from docpipe.ingest.sections import split_sections
from docpipe.playbook import parse_playbook
from docpipe.playbook.evidence import DocumentMentions, clause_signature, term_subject
from docpipe.playbook.judge import Verdict, judge, settle
from docpipe.settings import Settings
from docpipe.tokens import get_token_counter
from docpipe.types import Citation, Document, Page
from docpipe.values.kinds import Value

FOUND, SURE = 6.0, 9.0


def _rule(body: str):
    text = f'[[rule]]\nid = "r"\ntitle = "A rule"\nseverity = "high"\n{body}\n'
    return parse_playbook(text).rules[0]


def _quote(text: str = "This Agreement is governed by the laws of New York.", verified: bool = True) -> Citation:
    return Citation("s001", "12. Law", 3, 3, text, verified, highlight=text[:20])


def _none(_pattern: re.Pattern[str]) -> list[Citation]:
    return []


def _seen(_pattern: re.Pattern[str]) -> list[Citation]:
    return [_quote("Either party may renew this Agreement by mutual written agreement.")]


def _unsearchable(_pattern: re.Pattern[str]) -> None:
    return None


def _judge(rule, cell, mentions=_none, reader=None) -> Verdict:
    return judge(rule, cell, reader_cell=reader, mentions=mentions, found_score=FOUND, sure_score=SURE)


def _present(kind: str, normalized, display: str, quote: Citation | None = None) -> Cell:
    return Cell("present", quotes=[quote or _quote()], value=Value(kind, normalized, display))


# -- rules over key terms ---------------------------------------------------------------------------------------


def test_an_allowed_place_meets_and_another_deviates_each_on_its_verified_value():
    rule = _rule('term = "governing_law"\nallowed = ["New York", "Delaware"]')
    meets = _judge(rule, _present("jurisdiction", "New York", "New York"))
    assert (meets.status, meets.basis, meets.pages) == ("meets", "value", "p. 3")
    texas = _judge(rule, _present("jurisdiction", "Texas", "Texas"))
    assert texas.status == "deviates" and "allowed are New York, Delaware" in texas.reason
    assert texas.quotes and texas.value is not None and texas.value.display == "Texas"


def test_lengths_are_held_against_their_bounds_in_days():
    rule = _rule('term = "notice_period"\nat_least = "60 days"\nat_most = "6 months"')
    days = {"days": 90, "count": 90, "unit": "day"}
    assert _judge(rule, _present("duration", days, "90 days")).status == "meets"
    assert _judge(rule, _present("duration", {**days, "days": 30}, "30 days")).status == "deviates"
    assert _judge(rule, _present("duration", {**days, "days": 365}, "1 year")).status == "deviates"
    assert _judge(rule, _present("duration", {"perpetual": True}, "perpetual")).status == "deviates"  # at_most


def test_a_date_window_places_perpetual_after_every_date_and_a_bare_year_only_when_it_can():
    rule = _rule('term = "expiration_date"\nafter = 2021-06-30')
    assert _judge(rule, _present("date", "2028-03-03", "2028-03-03")).status == "meets"
    assert _judge(rule, _present("date", "2020-12-31", "2020-12-31")).status == "deviates"
    assert _judge(rule, _present("date", "2021-06-30", "2021-06-30")).status == "deviates"  # after, not on
    assert _judge(rule, _present("date", "perpetual", "perpetual")).status == "meets"
    assert _judge(rule, _present("date", "2022", "2022")).status == "meets"
    assert _judge(rule, _present("date", "2019", "2019")).status == "deviates"
    unsure = _judge(rule, _present("date", "2021", "2021"))
    assert unsure.status == "needs_review" and "gives only 2021" in unsure.reason
    assert _judge(rule, _present("date", "2021-06", "2021-06")).status == "needs_review"
    assert _judge(rule, _present("date", "2021-07", "2021-07")).status == "meets"


def test_a_cap_is_compared_in_its_own_form_or_left_for_review():
    months = _rule('term = "liability_cap"\nat_most = "12 months of fees"')
    formula = {"amount": None, "currency": "", "formula": "the fees paid in the twelve (12) months before the claim"}
    assert _judge(months, _present("money", formula, "fees, 12 months")).status == "meets"
    longer = {**formula, "formula": "the fees paid in the two (2) years before the claim"}
    assert _judge(months, _present("money", longer, "fees, 2 years")).status == "deviates"
    amount = {"amount": 500000.0, "currency": "USD"}
    fixed = _judge(months, _present("money", amount, "USD 500,000.00"))
    assert fixed.status == "needs_review" and "not written as months of fees" in fixed.reason
    dollars = _rule('term = "liability_cap"\nat_least = "USD 1,000,000"')
    assert _judge(dollars, _present("money", amount, "USD 500,000.00")).status == "deviates"
    assert _judge(dollars, _present("money", {"amount": 2e6, "currency": "USD"}, "USD 2m")).status == "meets"
    euros = _judge(dollars, _present("money", {"amount": 2e6, "currency": "EUR"}, "EUR 2m"))
    assert euros.status == "needs_review" and "in EUR" in euros.reason
    assert _judge(dollars, _present("money", formula, "formula")).status == "needs_review"


def test_a_required_term_not_found_is_missing_and_an_unsure_value_needs_review():
    rule = _rule('term = "governing_law"\nallowed = ["New York"]')
    missing = _judge(rule, Cell("not_found", note="No governing-law clause found."))
    assert missing.status == "missing" and "The rule requires it" in missing.reason
    assert _judge(rule, Cell("uncertain", note="two laws named", quotes=[_quote()])).status == "needs_review"
    candidate = Cell("candidate", quotes=[_quote()], value=Value("jurisdiction", "New York", "New York"))
    assert _judge(rule, candidate).status == "needs_review"  # read by similarity, not by the reader
    assert _judge(rule, Cell("failed", note="wrong password")).status == "needs_review"


def test_a_term_the_rule_allows_to_be_absent_meets_only_when_the_contract_never_speaks_of_it():
    rule = _rule('term = "notice_period"\nat_least = "60 days"\nif_absent = "meets"')
    cell = Cell("not_found", note="No notice period found.")
    sure = _judge(rule, cell, mentions=_none)
    assert (sure.status, sure.basis) == ("meets", "absence")
    spoken = _judge(rule, cell, mentions=_seen)
    assert spoken.status == "needs_review" and spoken.quotes and "still speaks of it" in spoken.reason
    assert _judge(rule, cell, mentions=_unsearchable).status == "needs_review"


def test_a_yes_no_term_absent_for_sure_reads_as_no():
    rule = _rule('term = "termination_for_convenience"\nis = false')
    assert _judge(rule, Cell("not_found"), mentions=_none).status == "meets"
    assert _judge(rule, Cell("not_found"), mentions=_seen).status == "needs_review"
    assert _judge(rule, _present("yes_no", True, "Yes")).status == "deviates"
    wants_yes = _rule('term = "auto_renewal"\nis = true')
    assert _judge(wants_yes, Cell("not_found"), mentions=_none).status == "deviates"


# -- rules over clauses -----------------------------------------------------------------------------------------


def test_a_required_clause_meets_only_when_found_for_sure():
    rule = _rule('clause = "Cap on Liability"\nrequired = true')
    high = Cell("candidate", quotes=[_quote()], score=SURE + 0.5)
    assert _judge(rule, high).status == "meets"
    likely = _judge(rule, Cell("candidate", quotes=[_quote()], score=FOUND + 1))
    assert likely.status == "needs_review" and "check that it is one" in likely.reason
    read = Cell("present", quotes=[_quote("In no event shall liability exceed the fees paid.")])
    by_reader = _judge(rule, Cell("candidate", quotes=[_quote()], score=3.0), reader=read)
    assert by_reader.status == "meets" and "read by its reader" in by_reader.reason
    assert by_reader.quotes[0].quote.startswith("In no event")
    model = Cell("present", answer="Yes", quotes=[_quote()])
    assert _judge(rule, model).status == "meets"
    assert _judge(rule, Cell("not_found", note="No clause scored 2.4.")).status == "missing"
    assert _judge(rule, Cell("absent", answer="No")).status == "missing"


def test_a_forbidden_clause_deviates_when_found_and_meets_only_when_no_sentence_uses_its_words():
    rule = _rule('clause = "Most Favored Nation"\nforbidden = true')
    found = _judge(rule, Cell("candidate", quotes=[_quote()], score=FOUND))
    assert (found.status, found.basis) == ("deviates", "quote")
    assert _judge(rule, Cell("candidate", quotes=[_quote()], score=FOUND - 1)).status == "needs_review"
    none = Cell("not_found")
    absent = _judge(rule, none, mentions=_none)
    assert (absent.status, absent.basis, absent.quotes) == ("meets", "absence", [])
    worded = _judge(rule, none, mentions=_seen)
    assert worded.status == "needs_review" and worded.quotes and "use the words" in worded.reason
    assert _judge(rule, none, mentions=_unsearchable).status == "needs_review"
    unsigned = _rule('clause = "Uncapped Liability"\nforbidden = true')
    assert clause_signature("Uncapped Liability") is None
    assert _judge(unsigned, none, mentions=_none).status == "needs_review"


# -- questions for the model ------------------------------------------------------------------------------------


def test_a_question_needs_a_model_offline_and_is_held_to_its_answer_with_one():
    rule = _rule('question = "May the customer assign without consent?"\nexpect = "no"')
    offline = _judge(rule, Cell("candidate", quotes=[_quote()], score=4.0))
    assert offline.status == "needs_review" and "none is configured" in offline.reason and offline.quotes
    no = Cell("present", quotes=[_quote()], value=Value("yes_no", False, "No"))
    assert _judge(rule, no).status == "meets"
    yes = Cell("present", quotes=[_quote()], value=Value("yes_no", True, "Yes"))
    assert _judge(rule, yes).status == "deviates"
    assert _judge(rule, Cell("uncertain", note="two clauses disagree")).status == "needs_review"


# -- the guard --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "cell"),
    [
        (
            'term = "governing_law"\nallowed = ["New York"]',
            Cell("present", value=Value("jurisdiction", "New York", "NY")),
        ),
        (
            'term = "governing_law"\nallowed = ["New York"]',
            Cell("present", quotes=[_quote(verified=False)], value=Value("jurisdiction", "New York", "NY")),
        ),
        ('question = "Is it capped?"\nexpect = "yes"', Cell("present", value=Value("yes_no", True, "Yes"))),
    ],
)
def test_meets_is_never_given_without_a_verified_quote(body, cell):
    verdict = _judge(_rule(body), cell)
    assert verdict.status == "needs_review"
    assert "nothing verified supports it" in verdict.reason


def test_settle_passes_what_has_its_proof_and_turns_the_rest():
    assert settle(Verdict("meets", "ok", [_quote()])).status == "meets"
    assert settle(Verdict("meets", "none anywhere", basis="absence")).status == "meets"
    assert settle(Verdict("meets", "said so", [_quote(verified=False)])).status == "needs_review"
    assert settle(Verdict("deviates", "found")).status == "deviates"


# -- the whole-text search --------------------------------------------------------------------------------------


def test_mentions_find_the_sentences_that_use_a_clause_s_words_with_their_pages():
    settings = Settings()
    doc = Document(
        id="cd" * 32,
        name="supply.pdf",
        pages=[
            Page(1, "1. Supply. The Supplier shall supply the Goods. 2. Price. The prices are set in Schedule A."),
            Page(2, "3. Pricing. Supplier shall offer Buyer prices no less favorable than those it gives others."),
        ],
    )
    doc.sections = split_sections(doc, get_token_counter(settings.chunking.tokenizer), settings.chunking)
    mentions = DocumentMentions(doc)
    mfn = mentions(clause_signature("Most Favored Nation"))  # type: ignore[arg-type]
    assert len(mfn) == 1 and mfn[0].page_start == 2 and mfn[0].verified
    assert "no less favorable" in mfn[0].quote and mfn[0].highlight == "favorable"
    assert mentions(term_subject("notice_period")) == []  # type: ignore[arg-type]
    assert mentions(clause_signature("Non-Compete")) == []  # type: ignore[arg-type]


def test_a_playbook_reads_each_term_clause_and_question_once(repo_root):
    from docpipe.playbook import load_playbook
    from docpipe.playbook.run import playbook_columns

    book = load_playbook(repo_root / "samples" / "playbook.toml")
    text = book.text + '\n[[rule]]\nid = "law-again"\ntitle = "Law"\nseverity = "low"\nterm = "governing_law"\n'
    text += 'allowed = ["Delaware"]\n'
    book = parse_playbook(text)
    layout = playbook_columns(book, Settings())
    keys = [c.key for c in layout.columns]
    assert len(keys) == len(set(keys))
    assert layout.of_rule["law-again"] == layout.of_rule["governing-law"]
    cap = layout.columns[layout.of_rule["liability-capped"]]
    assert cap.category and cap.min_score == Settings().review.each_check_score
    reader = layout.reader_of_rule["liability-capped"]
    assert reader is not None and layout.columns[reader].term == "liability_cap"
    assert layout.reader_of_rule["no-termination-for-convenience"] is not None
    assert layout.reader_of_rule["no-mfn"] is None
    question = layout.columns[layout.of_rule["no-set-off"]]
    assert question.kind == "yes_no" and question.question == book.rule("no-set-off").question
    # 5 terms and the termination reader (the cap's reader is a term of the playbook already), 10 clauses and
    # 3 questions, each once
    assert len(layout.columns) == 6 + 10 + 3


def test_an_end_tied_to_an_event_cannot_be_placed_in_a_date_window():
    rule = _rule('term = "expiration_date"\nafter = 2021-06-30')
    event = Cell(
        "present", quotes=[_quote()], value=Value("date", "perpetual", "no fixed end: until the Royalty Term ends")
    )
    verdict = _judge(rule, event)
    assert verdict.status == "needs_review" and "ends on an event" in verdict.reason


def test_only_a_sure_reader_meets_a_required_clause():
    read = Cell("present", quotes=[_quote("Either party may terminate this Agreement on 30 days' notice.")])
    required = _rule('clause = "Termination for Convenience"\nrequired = true')
    unsure = _judge(required, Cell("not_found"), reader=read)
    assert unsure.status == "needs_review" and unsure.quotes[0].quote.startswith("Either party")
    forbidden = _rule('clause = "Termination for Convenience"\nforbidden = true')
    assert _judge(forbidden, Cell("not_found"), reader=read).status == "deviates"


@pytest.mark.parametrize(
    "sentence",
    [
        "Without notification the contract will automatically extend for an additional month of service.",
        "Unless earlier terminated in accordance with this paragraph 7, this Agreement shall continue indefinitely.",
        "This Agreement shall remain in force until terminated by either party on thirty days' notice.",
        "The parties may extend the term of this Agreement by mutual consent.",
    ],
)
def test_a_contract_that_runs_on_speaks_of_a_notice_to_stop_it(sentence):
    assert term_subject("notice_period").search(sentence)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("category", "sentence"),
    [
        ("Exclusivity", "Sabco will not accept as a sponsor any other company competitive with Prolong products."),
        ("Exclusivity", "Distributor shall purchase the Products only from Supplier."),
        ("Irrevocable or Perpetual License", "The licence continues for an indefinite period after the term."),
        ("Most Favored Nation", "Prices shall be no less favorable than those given to any other customer."),
    ],
)
def test_clause_words_are_found_however_the_clause_is_phrased(category, sentence):
    assert clause_signature(category).search(sentence)  # type: ignore[union-attr]


def test_a_bound_the_value_departs_from_decides_before_one_it_cannot_be_held_to():
    rule = _rule('term = "liability_cap"\nat_least = "12 months of fees"\nat_most = "24 months of fees"')
    six = {"amount": None, "currency": "", "formula": "the fees paid in the six (6) months before the claim"}
    assert _judge(rule, _present("money", six, "fees, 6 months")).status == "deviates"
    amount = _rule('term = "liability_cap"\nat_least = "USD 1,000,000"\nat_most = "USD 5,000,000"')
    eur = {"amount": 9e6, "currency": "EUR"}
    assert _judge(amount, _present("money", eur, "EUR 9m")).status == "needs_review"


def test_a_report_reads_back_as_it_was_written(repo_root):
    from docpipe.cells import ReviewManifest, Row
    from docpipe.playbook.report import PlaybookReport

    text = (
        (repo_root / "samples" / "playbook.toml")
        .read_text()
        .replace('name = "Commercial contracts: supplier positions"\n', "")
    )
    book = parse_playbook(text, source="firm.toml", default_name="firm")
    rows = [Row("a" * 64, "acme.pdf"), Row("b" * 64, "beta.pdf")]
    verdicts = [
        [Verdict("meets", "fine", [_quote()], basis="quote") for _ in book.rules],
        [
            Verdict("deviates", "Texas", [_quote()], Value("jurisdiction", "Texas", "Texas"), "value")
            for _ in book.rules
        ],
    ]
    manifest = ReviewManifest("extractive", None, None, "extractive", "per_cell", "v", "f", "i")
    report = PlaybookReport(book, rows, verdicts, manifest)
    again = PlaybookReport.from_dict(json.loads(report.to_json()))
    assert again.playbook.name == "firm" and again.playbook.sha256 == book.sha256
    assert [r.name for r in again.rows] == ["beta.pdf", "acme.pdf"]  # written worst first
    assert [again.rows[r].name for r in again.order()] == ["beta.pdf", "acme.pdf"]
    assert again.verdict("beta.pdf", "governing-law").value.display == "Texas"  # type: ignore[union-attr]
    assert again.to_dict() == report.to_dict()
