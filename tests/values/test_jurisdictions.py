"""Places as contracts name them (`find_jurisdictions`, `canonical_jurisdiction`) and the law a governing-law
clause chooses (`governing_law`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from docpipe.values.jurisdictions import canonical_jurisdiction, find_jurisdictions, governing_law
from docpipe.values.read import find_values


def chosen(text: str) -> list[str]:
    return [v.normalized for v in governing_law(text)]


def places(text: str) -> list[str]:
    return [v.normalized for v in find_jurisdictions(text)]


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("the State of New York", "New York"),
        ("Commonwealth of Massachusetts", "Massachusetts"),
        ("STATE OF DELAWARE", "Delaware"),
        ("District of Columbia", "District of Columbia"),
        ("Washington, D.C.", "District of Columbia"),
        ("Province of Ontario", "Ontario, Canada"),
        ("Ontario, Canada", "Ontario, Canada"),
        ("British Columbia,Canada", "British Columbia, Canada"),
        ("Québec", "Quebec, Canada"),
        ("Victoria, Australia", "Victoria, Australia"),
        ("People's Republic of China", "China"),
        ("People’s Republic of China", "China"),
        ("PRC", "China"),
        ("Hong Kong", "Hong Kong"),
        ("the Netherlands", "Netherlands"),
        ("Republic of Korea", "South Korea"),
        ("Republic of Kazakhstan", "Kazakhstan"),
        ("Federal Republic of Germany", "Germany"),
        ("Russian Federation", "Russia"),
        ("United Kingdom", "United Kingdom"),
        ("England and Wales", "England and Wales"),
        ("England & Wales", "England and Wales"),
        ("England and Wales, UK", "England and Wales"),
        ("England", "England"),
        ("Scotland", "Scotland"),
        ("United States of America", "United States"),
        ("U.S.A.", "United States"),
        ("Republic of Georgia", "Georgia (country)"),
        ("Georgia", "Georgia"),
        ("georgia", "Georgia"),
        ("Côte d'Ivoire", "Côte d'Ivoire"),
        ("Swiss law", "Switzerland"),
        ("the laws of the State of Texas", "Texas"),
        ("New York law", "New York"),
    ],
)
def test_canonical_names(name: str, canonical: str) -> None:
    assert canonical_jurisdiction(name) == canonical


@pytest.mark.parametrize("name", ["", "Beijing", "the Company", "Delaware, Illinois", "New York and Texas", "laws"])
def test_what_is_not_exactly_one_place_has_no_canonical_name(name: str) -> None:
    assert canonical_jurisdiction(name) is None


def test_places_in_order_with_their_words_and_offsets() -> None:
    text = "Acme, a Delaware corporation with offices in New York, New York, and Beta GmbH of Munich, Germany."
    found = find_jurisdictions(text)
    assert [v.normalized for v in found] == ["Delaware", "New York", "Germany"]
    for value in found:
        assert value.kind == "jurisdiction"
        assert value.display == value.normalized
        assert text[value.start : value.end] == value.as_written
    assert found[1].as_written == "New York, New York"  # one place, not two


def test_the_state_of_is_part_of_the_words_read() -> None:
    (value,) = find_jurisdictions("under the laws of the State of New York.")
    assert value.as_written == "State of New York"


def test_washington_the_state_and_the_capital() -> None:
    assert places("offices in Washington, D.C. and in the State of Washington") == [
        "District of Columbia",
        "Washington",
    ]
    (capital,) = find_jurisdictions("Washington, D.C. 20001")
    assert capital.as_written == "Washington, D.C."


def test_georgia_is_the_state_unless_the_country_is_named() -> None:
    assert places("Atlanta, Georgia") == ["Georgia"]
    assert places("Tbilisi, Republic of Georgia") == ["Georgia (country)"]
    assert places("Georgia (country)") == ["Georgia (country)"]


def test_a_region_followed_by_its_country_is_one_place() -> None:
    assert places("Toronto, Ontario, Canada") == ["Ontario, Canada"]
    assert places("London, England, United Kingdom") == ["England"]
    assert places("Wilmington, Delaware, U.S.A.") == ["Delaware"]


def test_common_words_count_only_when_capitalised() -> None:
    text = "a turkey sandwich on china plates, a jersey and a chad; the man and the guinea pig"
    assert places(text) == []
    assert places("shipped to Turkey, Chad and Jersey") == ["Turkey", "Chad", "Jersey"]


def test_abbreviations_count_only_in_capitals() -> None:
    assert places("let us agree") == []
    assert places("LET US AGREE THAT THE GOODS") == []
    assert places("subject to U.S. export laws and UK law") == ["United States", "United Kingdom"]


def test_whole_words_only() -> None:
    assert places("Indianapolis Georgian Mainers Texasville Chadwick") == []


def test_multi_word_names_are_read_in_any_case() -> None:
    assert places("THE STATE OF NEW JERSEY and the state of new york") == ["New Jersey", "New York"]


def test_the_entry_for_every_kind_reads_jurisdictions() -> None:
    assert [v.normalized for v in find_values("jurisdiction", "Paris, France")] == ["France"]


# --- governing law -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("clause", "law"),
    [
        (
            "This Agreement shall be governed by and construed in accordance with the laws of the State of New "
            "York, without regard to its conflict of laws principles.",
            ["New York"],
        ),
        ("This Agreement shall be governed by the internal laws of the State of California.", ["California"]),
        ("This Agreement shall be interpreted under the laws of Texas.", ["Texas"]),
        ("This Agreement is governed by the laws of England and Wales.", ["England and Wales"]),
        ("This Agreement is governed by Swiss law.", ["Switzerland"]),
        ("This Agreement shall be governed by German substantive law.", ["Germany"]),
        ("THIS AGREEMENT SHALL BE GOVERNED BY NEW YORK LAW.", ["New York"]),
        ("The laws of the State of Illinois shall govern this Agreement.", ["Illinois"]),
        ("Even with foreign partners, the law of the Federal Republic of Germany applies.", ["Germany"]),
        (
            "This Agreement is governed by the laws and judicial decisions of the State of Florida.",
            ["Florida"],
        ),
        ("Governing Law: Commonwealth of Virginia.", ["Virginia"]),
        ("Disputes shall be determined in accordance with the laws of the State of Michigan.", ["Michigan"]),
        (
            "These rights shall be governed by the laws, other than choice of law rules, of the State of Georgia.",
            ["Georgia"],
        ),
        (
            "This Agreement shall be governed by the laws of the People's Republic of China.",
            ["China"],
        ),
    ],
)
def test_the_chosen_law(clause: str, law: list[str]) -> None:
    assert chosen(clause) == law


def test_a_province_and_the_federal_laws_of_its_country_are_the_province() -> None:
    clause = (
        "This Agreement shall be governed by the substantive laws of the Province of Ontario and the federal "
        "laws of Canada applicable therein."
    )
    assert chosen(clause) == ["Ontario, Canada"]
    federal_first = "governed by the laws of the United States of America and of the Commonwealth of Pennsylvania"
    assert chosen(federal_first) == ["Pennsylvania"]


def test_courts_named_after_the_law_are_not_the_law() -> None:
    clause = (
        "This Agreement shall be governed by the laws of the State of Delaware, and each party submits to the "
        "exclusive jurisdiction of the state and federal courts of California."
    )
    assert chosen(clause) == ["Delaware"]


def test_a_place_of_incorporation_is_not_the_law() -> None:
    text = (
        "Acme Inc., a corporation organized under the laws of the State of Delaware, and Beta LLC, a Texas "
        "limited liability company, agree as follows. This Agreement shall be governed by the laws of New York."
    )
    assert chosen(text) == ["New York"]
    assert chosen("Acme, a company incorporated under the laws of the Netherlands, has its seat in Delft.") == []


def test_the_conflicts_proviso_is_not_the_law() -> None:
    clause = (
        "This Agreement shall be governed by the laws of the State of New York, without regard to any conflict "
        "of laws rule that would result in the application of the laws of the State of Delaware."
    )
    assert chosen(clause) == ["New York"]


def test_two_governing_law_clauses_give_both_in_order() -> None:
    text = (
        "This Agreement shall be governed by the laws of the State of Delaware. "
        "Section 9 shall be governed by and construed under the laws of England."
    )
    values = governing_law(text)
    assert [v.normalized for v in values] == ["Delaware", "England"]
    assert [text[v.start : v.end] for v in values] == ["State of Delaware", "England"]


def test_a_law_named_for_its_subject_is_not_the_chosen_law() -> None:
    clause = "Nothing herein shall be construed as a license under the patent laws of the United States."
    assert chosen(clause) == []


def test_no_law_chosen() -> None:
    assert chosen("Each party shall comply with all applicable laws of the United States.") == []
    assert chosen("Nothing herein shall be construed to require a party to violate the laws of Texas.") == []
    assert chosen("This Amendment shall be governed by the law governing the Agreement.") == []
    assert chosen("Notices shall be sent to 100 Main Street, Dallas, Texas.") == []
    assert chosen("") == []


def test_pdf_look_alike_semicolon_ends_the_clause() -> None:
    # pypdf writes ";" as U+037E: the proviso after it does not choose Illinois law.
    clause = (
        "This Agreement will be construed under the laws of the State of Texas\u037e provided that "
        "Section 19 would not be enforced as written under Illinois law."
    )
    assert chosen(clause) == ["Texas"]


def test_a_megabyte_of_hostile_text_is_read_in_one_pass() -> None:
    clause = " This Agreement shall be governed by the laws of the State of Ohio."
    for filler in ("(" * 1_000_000, "laws of " * 125_000, "governed by the " * 62_500, ";" * 1_000_000):
        assert chosen(filler + clause) == ["Ohio"]
    assert len(find_jurisdictions("New York " * 110_000)) == 110_000


def test_importing_the_module_does_not_load_pycountry() -> None:
    code = "import sys, docpipe.values.jurisdictions; print('pycountry' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
