"""Typed columns from what a user writes: ``-q "...::kind"`` and a columns file, each mistake refused with where
it is and how to fix it."""

from __future__ import annotations

import pytest

from docpipe.errors import ConfigError
from docpipe.review.run import columns_for
from docpipe.terms.columns import MAX_COLUMNS_FILE_BYTES, load_columns, parse_question


def test_a_question_takes_its_kind_after_two_colons():
    assert parse_question("Governing law?::jurisdiction") == ("Governing law?", "jurisdiction", ())
    assert parse_question("Who pays shipping?::choice[Buyer | Seller]") == (
        "Who pays shipping?",
        "choice",
        ("Buyer", "Seller"),
    )
    assert parse_question("What does clause 4 say?") == ("What does clause 4 say?", "text", ())


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ("Law?::country", "use one of"),
        ("Who pays?::choice[Buyer]", "at least two options"),
        ("Cap?::money[a|b]", "options are for a choice column"),
    ],
)
def test_a_wrong_kind_is_refused_with_the_fix(text, fix):
    with pytest.raises(ConfigError, match=fix):
        parse_question(text)


def test_columns_for_types_questions_and_adds_the_key_terms():
    columns = columns_for(["Renewal fee?::money"], key_terms=["governing_law", "notice_deadline"])
    assert [(c.key, c.kind, c.term) for c in columns] == [
        ("Governing law", "jurisdiction", "governing_law"),
        ("Last day for notice", "date", "notice_deadline"),
        ("Renewal fee?", "money", ""),
    ]
    with pytest.raises(ConfigError, match="no key term 'cap'"):
        columns_for(key_terms=["cap"])


def test_a_columns_file_gives_typed_columns(tmp_path):
    path = tmp_path / "columns.toml"
    path.write_text(
        """
[[column]]
key = "Law"
question = "Which law governs this agreement?"
kind = "jurisdiction"

[[column]]
question = "Who bears shipping?"
kind = "choice"
options = ["Buyer", "Seller"]

[[column]]
term = "expiration_date"
key = "Ends"
""",
        encoding="utf-8",
    )
    columns = load_columns(path)
    assert [(c.key, c.kind, c.options, c.term) for c in columns] == [
        ("Law", "jurisdiction", (), ""),
        ("Who bears shipping?", "choice", ("Buyer", "Seller"), ""),
        ("Ends", "date", (), "expiration_date"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            '[[column]]\nquestion = "Law?"\nkind = "jurisdiction"\ncolour = "red"\n',
            r"columns.toml:4: unknown key 'colour'",
        ),
        ('title = "x"\n[[column]]\nquestion = "Law?"\n', r"columns.toml:1: unknown key 'title'"),
        (
            '[[column]]\nquestion = "Law?"\n\n[[column]]\nquestion = "Cap?"\nkind = "amount"\n',
            r"columns.toml:4: unknown kind",
        ),
        ('[[column]]\nterm = "cap"\n', r"columns.toml:1: unknown term 'cap'; the key terms are document_title"),
        ('[[column]]\nterm = "parties"\nkind = "text"\n', "a key term column takes only key"),
        ('[[column]]\nkind = "date"\n', "a column needs a question"),
        ('[[column]]\nquestion = "Who?"\nkind = "choice"\noptions = ["A", ""]\n', "non-empty strings"),
        ("[[column]\n", "is not a TOML columns file"),
        ("# nothing\n", "has no \\[\\[column\\]\\] tables"),
    ],
)
def test_a_wrong_columns_file_is_refused_naming_file_and_line(tmp_path, body, message):
    path = tmp_path / "columns.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_columns(path)


def test_a_columns_file_that_is_not_one_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "columns.toml"
    path.write_bytes(b"#" * (MAX_COLUMNS_FILE_BYTES + 1))
    with pytest.raises(ConfigError, match="at most"):
        load_columns(path)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00[[column]]")
    with pytest.raises(ConfigError, match="not a TOML columns file"):
        load_columns(binary)
    with pytest.raises(ConfigError, match="cannot read the columns file"):
        load_columns(tmp_path / "missing.toml")
