"""The playbook file: the sample reads, and every way a playbook can be wrong is refused before a contract is read,
naming the file, the line, the rule and the fix."""

from __future__ import annotations

import pytest

from docpipe.errors import ConfigError
from docpipe.playbook import load_playbook, parse_playbook
from docpipe.playbook.schema import MAX_PLAYBOOK_BYTES, MAX_RULES

SAMPLE = "samples/playbook.toml"

HEAD = '[playbook]\nname = "t"\n'


def _rule(body: str, rule_id: str = "r1") -> str:
    return f'[[rule]]\nid = "{rule_id}"\ntitle = "A rule"\nseverity = "high"\n{body}\n'


def test_the_sample_playbook_reads_as_a_firm_writes_it(repo_root):
    book = load_playbook(repo_root / SAMPLE)
    forms = [r.form for r in book.rules]
    assert len(book.rules) >= 15
    assert {"term", "clause", "question"} <= set(forms)
    assert forms.count("clause") >= 5 and forms.count("term") >= 4
    assert {r.severity for r in book.rules} == {"high", "medium", "low"}
    assert all(r.title and r.fallback for r in book.rules)  # what to say to the other side
    law = book.rule("governing-law")
    assert law.allowed[:2] == ("New York", "Delaware")
    notice = book.rule("renewal-notice")
    assert notice.at_least is not None and notice.at_least.number == 60 and notice.if_absent == "meets"
    cap = book.rule("cap-months-of-fees")
    assert cap.at_most is not None and (cap.at_most.kind, cap.at_most.number) == ("fee_months", 12)
    assert book.rule("runs-past-closing").after == "2021-06-30"
    assert book.rule("no-mfn").forbidden and book.rule("liability-capped").required
    assert book.rule("no-set-off").expect is False
    assert len(book.sha256) == 64 and book.source.endswith("playbook.toml")


def test_a_rule_line_is_where_the_rule_starts():
    text = (
        HEAD
        + _rule('term = "governing_law"\nallowed = ["New York"]')
        + _rule('clause = "Insurance"\nrequired = true', "r2")
    )
    book = parse_playbook(text)
    assert [r.line for r in book.rules] == [3, 9]
    assert book.rule("r1").test == "governing_law in New York"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('term = "governing_law"\nallowed = ["New York"]\ncolour = "red"', "unknown key 'colour' in a rule"),
        ('term = "law"\nallowed = ["New York"]', "unknown term 'law'; the key terms are"),
        ('clause = "Best Efforts"\nrequired = true', "unknown clause category 'Best Efforts'"),
        ('clause = "Governing Law"\nrequired = true', "that one is a value: write a term rule"),
        ('clause = "Insurance"\nterm = "venue"\nallowed = ["Ohio"]', "give exactly one of term ="),
        ('allowed = ["Ohio"]', "give exactly one of term ="),
        ('term = "governing_law"\nallowed = []', "allowed is empty: no contract could meet the rule"),
        ('term = "governing_law"\nallowed = ["Atlantis"]', "'Atlantis' is not a place docpipe reads"),
        ('term = "notice_period"\nat_least = "1 year"\nat_most = "60 days"', "is above at_most 60 days: no contract"),
        ('term = "expiration_date"\nafter = 2027-01-01\nbefore = 2026-01-01', "no date is between"),
        ('term = "expiration_date"\nafter = "next year"', "after is an ISO date"),
        ('term = "expiration_date"\nafter = "2027-02-30"', "not a day of the calendar"),
        ('term = "governing_law"\nafter = 2027-01-01', "it takes allowed, not after"),
        ('term = "notice_period"\nat_least = "a while"', "does not read as one duration"),
        ('term = "notice_period"\nat_least = "60 days or 90 days"', "does not read as one duration"),
        ('term = "parties"\nallowed = ["Acme"]', "cannot be tested by a playbook rule"),
        ('term = "notice_period"', "needs a test: at_least or at_most"),
        ('term = "auto_renewal"\nis = "no"', "is = true or is = false"),
        ('term = "notice_period"\nat_least = "60 days"\nif_absent = "ignore"', 'if_absent is "missing"'),
        ('clause = "Insurance"', "required = true or forbidden = true"),
        ('clause = "Insurance"\nrequired = true\nforbidden = true', "required = true or forbidden = true"),
        ('clause = "Insurance"\nrequired = false', "write required = true, or leave it out"),
        ('clause = "Insurance"\nrequired = true\nallowed = ["Ohio"]', "allowed is not for a clause rule"),
        ('question = "May they assign?"\nexpect = "maybe"', 'expect = "yes" or "no"'),
        ('question = "May they assign?"', 'expect = "yes" or "no"'),
        ('question = ""\nexpect = "no"', "a rule needs a question"),
    ],
)
def test_a_wrong_rule_is_refused_naming_the_rule_and_the_fix(body, says):
    with pytest.raises(ConfigError) as err:
        parse_playbook(HEAD + _rule(body), source="firm.toml")
    message = str(err.value)
    assert message.startswith("firm.toml:") and says in message
    assert "rule 'r1'" in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[playbook\n", "is not a TOML playbook"),
        (HEAD, "has no [[rule]] tables"),
        ('[playbook]\nname = "t"\nteam = "x"\n' + _rule('clause = "Insurance"\nrequired = true'), "unknown key 'team'"),
        ("rules = 1\n" + _rule('clause = "Insurance"\nrequired = true'), "unknown key 'rules'"),
        (HEAD + '[[rule]]\nid = "Bad Id"\ntitle = "x"\nseverity = "high"\n', "a rule needs an id of lowercase"),
        (
            HEAD + _rule('clause = "Insurance"\nrequired = true').replace('"high"', '"urgent"'),
            "severity must be one of",
        ),
        (
            HEAD + _rule('clause = "Insurance"\nrequired = true').replace('title = "A rule"\n', ""),
            "a rule needs a title",
        ),
        (
            HEAD + _rule('clause = "Insurance"\nrequired = true') + _rule('clause = "Audit Rights"\nrequired = true'),
            "rule 'r1' is given twice",
        ),
    ],
)
def test_a_wrong_playbook_is_refused(text, says):
    with pytest.raises(ConfigError, match="playbook|firm") as err:
        parse_playbook(text, source="firm.toml")
    assert says in str(err.value)


def test_a_line_number_points_at_the_unknown_key():
    text = HEAD + _rule('clause = "Insurance"\nrequired = true\nseverty = "low"')
    with pytest.raises(ConfigError) as err:
        parse_playbook(text, source="firm.toml")
    assert str(err.value).startswith("firm.toml:9: rule 'r1': unknown key 'severty'")


def test_sizes_are_bounded_before_parsing(tmp_path):
    rules = "".join(_rule('clause = "Insurance"\nrequired = true', f"r{n}") for n in range(MAX_RULES + 1))
    with pytest.raises(ConfigError, match=f"at most {MAX_RULES}"):
        parse_playbook(HEAD + rules)
    big = tmp_path / "big.toml"
    big.write_text(HEAD + "# " + "x" * MAX_PLAYBOOK_BYTES + "\n")
    with pytest.raises(ConfigError, match=f"{big}.* a playbook is at most {MAX_PLAYBOOK_BYTES} bytes"):
        load_playbook(big)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00rule")
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        load_playbook(binary)
    with pytest.raises(ConfigError, match="cannot read the playbook"):
        load_playbook(tmp_path / "missing.toml")


def test_names_are_read_the_way_contracts_write_them():
    text = (
        HEAD
        + _rule('term = "governing_law"\nallowed = ["new york", "State of Delaware", "England and Wales"]')
        + _rule('clause = "cap on liability"\nrequired = true', "r2")
        + _rule('term = "liability_cap"\nat_least = "$1,000,000"', "r3")
    )
    book = parse_playbook(text)
    assert book.rule("r1").allowed == ("New York", "Delaware", "England and Wales")
    assert book.rule("r2").clause == "Cap on Liability"
    bound = book.rule("r3").at_least
    assert bound is not None and (bound.kind, bound.number, bound.currency) == ("money", 1_000_000.0, "USD")
