"""The parties of a contract from its preamble (`read_parties`) and its signature blocks (`signature_parties`)."""

from __future__ import annotations

import pytest

from docpipe.values.parties import read_parties, signature_parties
from docpipe.values.read import find_values


def parties(text: str) -> list[tuple[str, str]]:
    value = read_parties(text)
    return [(p["name"], p["role"]) for p in value.normalized] if value else []


def test_by_and_between_with_descriptors_and_defined_names() -> None:
    text = (
        'This Supply Agreement (the "Agreement") is made and entered into as of May 1, 2019 (the "Effective '
        'Date") by and between Acme Widgets, Inc., a Delaware corporation with its principal place of business '
        'at 100 Main Street, Dover, Delaware ("Supplier"), and Blue River Foods, L.L.C., a Texas limited '
        'liability company (the "Buyer"). WHEREAS, Supplier makes widgets;'
    )
    value = read_parties(text)
    assert value is not None
    assert value.kind == "parties"
    assert value.normalized == [
        {"name": "Acme Widgets, Inc.", "role": "Supplier"},
        {"name": "Blue River Foods, L.L.C.", "role": "Buyer"},
    ]
    assert value.display == 'Acme Widgets, Inc. ("Supplier"); Blue River Foods, L.L.C. ("Buyer")'
    assert text[value.start : value.end] == value.as_written
    assert value.as_written.startswith("Acme Widgets, Inc.") and value.as_written.endswith("Blue River Foods, L.L.C.")


def test_numbered_parties_after_between() -> None:
    text = (
        "THIS AGREEMENT is made on 3 March 2020\nBETWEEN:\n(1) NORTHWIND TRADING LIMITED, a company "
        "incorporated in England and Wales (registered number 01234567) whose registered office is at 1 High "
        "Street, Leeds (the \u201cCompany\u201d); and\n(2) Southgate Logistics B.V., a company incorporated "
        "under the laws of the Netherlands (\u201cSouthgate\u201d).\nRECITALS"
    )
    assert parties(text) == [("NORTHWIND TRADING LIMITED", "Company"), ("Southgate Logistics B.V.", "Southgate")]


def test_among_three_parties_in_capitals_without_defined_names() -> None:
    text = (
        "This Joint Venture Agreement is entered into AMONG ORION HOLDINGS CO., LTD., a company organized in "
        "Taiwan, HALCYON SYSTEMS GMBH, a German company, AND PIKE & SONS S.A., a Spanish company. RECITALS"
    )
    assert [name for name, _ in parties(text)] == [
        "ORION HOLDINGS CO., LTD.",
        "HALCYON SYSTEMS GMBH",
        "PIKE & SONS S.A.",
    ]


def test_entered_into_by_and_role_forms() -> None:
    text = (
        "This License Agreement is entered into by Maple Leaf Software Corp. (hereinafter \u201cLicensor\u201d) "
        "and Harbor Analytics N.V. (collectively with its affiliates, \u201cLicensee\u201d). The parties agree "
        "as follows:"
    )
    assert parties(text) == [("Maple Leaf Software Corp.", "Licensor"), ("Harbor Analytics N.V.", "Licensee")]


def test_hereinafter_without_parentheses_and_a_person() -> None:
    text = (
        "This Agreement is made between Lakeside Bank, hereinafter referred to as the \u201cEmployer\u201d, "
        "located in Springfield, Illinois and Jane Q. Doe, hereinafter referred to as the \u201cExecutive\u201d, "
        "residing at 12 Elm Road."
    )
    assert parties(text) == [("Lakeside Bank", "Employer"), ("Jane Q. Doe", "Executive")]


def test_a_name_keeps_its_suffix_and_a_short_parenthesis() -> None:
    text = (
        'Agreement between Fonterra Dairy (USA) Inc., a Delaware corporation ("Seller"), and Shanghai Pearl '
        'Trading Co., Ltd. ("Buyer"), each a "Party".'
    )
    assert parties(text) == [("Fonterra Dairy (USA) Inc.", "Seller"), ("Shanghai Pearl Trading Co., Ltd.", "Buyer")]


def test_the_parties_defined_together_are_not_a_party() -> None:
    text = (
        'This Agreement is made by and between Quill Media LLC ("Quill") and Atlas Print GmbH ("Atlas") '
        '(Quill and Atlas each a "Party" and together the "Parties"). Quill and Atlas agree as follows.'
    )
    assert parties(text) == [("Quill Media LLC", "Quill"), ("Atlas Print GmbH", "Atlas")]


def test_a_letter_with_no_between() -> None:
    text = (
        "Ladies and Gentlemen:\nSilverline Financial Corporation, a Georgia corporation (the \u201cCompany\u201d), "
        "proposes to engage you as its agent."
    )
    assert parties(text) == [("Silverline Financial Corporation", "Company")]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "This Agreement sets out the terms on which services are provided. 1. Definitions. In this Agreement "
        '"Services" means the services described in Schedule 1 (the "Schedule").',
        "between the parties hereto and any of their respective affiliates, as the case may be, shall be "
        "resolved by arbitration.",
        "WHEREAS the parties wish to cooperate; NOW, THEREFORE, the parties agree as follows.",
    ],
)
def test_no_parties_named(text: str) -> None:
    assert read_parties(text) is None


def test_a_sentence_is_never_a_name() -> None:
    text = (
        "This Agreement is made between the party that signs below and is bound by these terms, which shall "
        'apply to every order (each an "Order"), and the Company as defined in Section 2 (the "Company").'
    )
    for name, _ in parties(text):
        assert len(name.split()) <= 6 and " shall " not in name and " is " not in name


def test_pdf_look_alike_semicolon_separates_parties() -> None:
    text = (
        'BETWEEN:\n(1) Kestrel Partners, L.P. a Delaware limited partnership ("Kestrel US")\u037e and\n'
        "(2) Kestrel Partners (International) Limited, a private limited company registered in England and "
        'Wales of 10 Bridge Street, London (the "Sub-Adviser").'
    )
    assert parties(text) == [
        ("Kestrel Partners, L.P.", "Kestrel US"),
        ("Kestrel Partners (International) Limited", "Sub-Adviser"),
    ]


SIGNATURES = """IN WITNESS WHEREOF, the parties have executed this Agreement as of the date first written above.

LICENSOR:
CEDAR GROVE TECHNOLOGIES, INC.
By: /s/ Ann Smith
Name: Ann Smith
Title: Chief Executive Officer

LICENSEE:
Ridgeway Capital Partners, L.P.
By: Ridgeway GP LLC, its general partner
By: ______________________
Name:
Title:
[Signature Page to License Agreement]
"""


def test_signature_blocks() -> None:
    assert signature_parties(SIGNATURES) == ["CEDAR GROVE TECHNOLOGIES, INC.", "Ridgeway Capital Partners, L.P."]


def test_two_signature_columns_on_one_line() -> None:
    text = "IN WITNESS WHEREOF, the parties sign.\nOrion Labs, Inc. Vega Systems, LLC\nBy: By:\nName: Name:\n"
    assert signature_parties(text) == ["Orion Labs, Inc.", "Vega Systems, LLC"]


def test_no_signature_blocks() -> None:
    assert signature_parties("IN WITNESS WHEREOF, the parties have signed.\nEXHIBIT A\nACME CORP.\nBy: x") == []
    assert signature_parties("ACME CORP.\nBy: ____") == []


def test_read_parties_completes_a_one_sided_preamble_from_the_signatures() -> None:
    text = (
        'This Sponsorship Agreement is entered into by and among Peak Ventures LLC ("Purchaser") and each other '
        "party identified on the signature pages hereto.\n\n" + SIGNATURES
    )
    assert parties(text) == [
        ("Peak Ventures LLC", "Purchaser"),
        ("CEDAR GROVE TECHNOLOGIES, INC.", ""),
        ("Ridgeway Capital Partners, L.P.", ""),
    ]


def test_the_entry_for_every_kind_reads_parties() -> None:
    (value,) = find_values("parties", 'Agreement between Orion Labs, Inc. ("Orion") and Vega Systems, LLC ("Vega").')
    assert value.display == 'Orion Labs, Inc. ("Orion"); Vega Systems, LLC ("Vega")'


def test_a_megabyte_of_hostile_text() -> None:
    preamble = 'This Agreement is made by and between Orion Labs, Inc. ("Orion") and Vega Systems, LLC ("Vega").'
    for filler in ("(" * 1_000_000, '"' * 1_000_000, "by and between Acme Corp., a " * 35_000, ". " * 500_000):
        assert parties(preamble + filler) == [("Orion Labs, Inc.", "Orion"), ("Vega Systems, LLC", "Vega")]
    assert read_parties("(" * 1_000_000) is None
    assert signature_parties("IN WITNESS WHEREOF\nACME CORP.\nBy: x\n" * 30_000) == ["ACME CORP."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # "and the <name>" after an address
        (
            'This Agreement is made by and between Freeze Tag Inc., a Delaware Corporation ("Company"), with its '
            "principal place of business located at 1720 Bray Central Drive, McKinney, TX 75069 and the American "
            'Diabetes Association, Inc. ("Association"), an Ohio not-for-profit corporation. WHEREAS',
            [("Freeze Tag Inc.", "Company"), ("American Diabetes Association, Inc.", "Association")],
        ),
        # short words inside a name written in capitals
        (
            "This Agreement is entered into between Sun Seven Stars Limited, a P.R.C. company (\u201cLicensor\u201d), "
            "and YOU ON DEMAND HOLDINGS, INC., a Nevada corporation (\u201cLicensee\u201d). WHEREAS",
            [("Sun Seven Stars Limited", "Licensor"), ("YOU ON DEMAND HOLDINGS, INC.", "Licensee")],
        ),
        # a word in lower case inside a name that goes on to its suffix
        (
            "This Agreement is made by and between: KALLO Inc. (\u201cKALLO\u201d) AND Petro data Management "
            "Services Limited., with principal offices in Lagos, Nigeria (\u201cPDMS\u201d). WHEREAS",
            [("KALLO Inc.", "KALLO"), ("Petro data Management Services Limited.", "PDMS")],
        ),
        # an "and" after a block of labelled lines starts a party; it joins no name
        (
            'THIS AGREEMENT, made as of the 1st day of December, by and between: PPG Paints Trading Co Ltd ("PPG") '
            "Address : Suite 2512, Shanghai Legal representative : Viktoras R. Sekmakas and NeoMedia Micro Paint "
            'Repair hereinafter referred to as ("DISTRIBUTOR") Address : 2201 Second Street. WHEREAS',
            [("PPG Paints Trading Co Ltd", "PPG"), ("NeoMedia Micro Paint Repair", "DISTRIBUTOR")],
        ),
        # a name with "and" is kept when no other party's words make it up
        (
            "INTERNET CHANNEL COOPERATION AGREEMENT Party A: Beijing Baidu Netcom Science and Technology Co., Ltd. "
            "Address: Baidu Building, Beijing Party B: China Online Housing (Hong Kong) Co., Ltd. Address: 8/F, "
            "Beijing. In this Agreement, Party A and Party B are individually a \u201cParty\u201d.",
            [
                ("Beijing Baidu Netcom Science and Technology Co., Ltd.", ""),
                ("China Online Housing (Hong Kong) Co., Ltd.", ""),
            ],
        ),
    ],
)
def test_preambles_as_contracts_write_them(text: str, expected: list[tuple[str, str]]) -> None:
    assert parties(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # a numbered clause after the preamble is not part of it, and "(the Offering)" names no party
        "This Agreement is entered into between StartEngine Crowdfunding, Inc., a Delaware corporation "
        "(\u201cCompany\u201d), and Solutions Vending International, Inc a DE corporation (\u201cCustomer\u201d). "
        "1. Services Company agrees to present its securities offering (the \u201cOffering\u201d) to Users.",
        # a place a party is listed on is not a party
        "This Agreement is made by and among (a) Skype S.A. (\u201cSkype\u201d), a company of Luxembourg, (b) TOM "
        "Online Inc. (\u201cTom Holding\u201d), a company listed on the NASDAQ National Market in the United States "
        "of America and the Growth Enterprise Market of The Stock Exchange of Hong Kong Limited, whose address is "
        "in Beijing; and (c) Tel-Online Limited (\u201cCompany\u201d). WHEREAS",
        # an amount is not a name
        "Between Client Name: MEDICAL MANAGER MIDWEST, INC. Principle Contact: Tom Liddell And Customer Name: "
        "MTS, INC. Principle Contact: Gail Knopf ANNUAL FEE. If Retainer $[*] support extends beyond [*] hours, "
        'it is charged. MEDICAL MANAGER MIDWEST, INC., hereinafter referred to as "MMMW", agrees',
    ],
)
def test_what_is_not_a_party_is_left_out(text: str) -> None:
    names = [name for name, _ in parties(text)]
    assert names and not any(
        word in name for name in names for word in ("Services Company", "Growth", "Stock Exchange", "$")
    ), names


def test_parties_written_as_labels_each_with_its_own_description() -> None:
    text = (
        "Cooperation Agreement Party A: Xi\u2019an Zhonghong New Energy Technology Co., Ltd. Legal Representative: Ku "
        "Guohua Xi\u2019an Zhonghong New Energy Technology Co., Ltd. is a subsidiary of the Company. It engages in "
        "projects in China. Party B: Boxing County Chengli Gas Supply Co., Ltd. Legal Representative: Li Shuxun. "
        "After friendly negotiation, Party A and Party B reached the following items."
    )
    assert [name for name, _ in parties(text)] == [
        "Xi\u2019an Zhonghong New Energy Technology Co., Ltd.",
        "Boxing County Chengli Gas Supply Co., Ltd.",
    ]


def test_a_described_name_wins_over_a_letterhead_when_there_is_no_between() -> None:
    text = (
        "Rare Element Resources Ltd. EXECUTION COPY INTELLECTUAL PROPERTY RIGHTS AGREEMENT Synchron, a California "
        'corporation having a principal place of business in San Diego (or one or more Affiliates, the "Investor"), '
        'and Rare Element Resources Ltd., a British Columbia corporation (the "Company"), agree as follows.'
    )
    assert parties(text) == [("Synchron", "Investor"), ("Rare Element Resources Ltd.", "Company")]


def test_signature_blocks_are_read_from_the_text_given_for_them() -> None:
    opening = 'This Agreement is made by PEEK Investments LLC ("Purchaser") and the Sponsors named below.'
    blocks = (
        opening + "\n...\nIN WITNESS WHEREOF, the parties have executed this Agreement.\n\nPEEK INVESTMENTS LLC\n"
        "By: /s/ A. Peek\n\nPLATINUM PARTNERS VALUE ARBITRAGE FUND L.P.\nBy: /s/ M. Nordlicht\n\n"
        "FRANCHISEE MEMBER\nBy: /s/ J. Doe\n\nADDENDUM TO PEEK INVESTMENTS LLC\nBy: ____\n\n"
        "a Delaware limited partnership, SNOWY AUGUST FUND I LP\nBy: /s/ B. Snow\n"
    )
    assert [p["name"] for p in read_parties(opening).normalized] == ["PEEK Investments LLC"]
    assert [p["name"] for p in read_parties(opening, signed=blocks).normalized] == [
        "PEEK Investments LLC",
        "PLATINUM PARTNERS VALUE ARBITRAGE FUND L.P.",
        "SNOWY AUGUST FUND I LP",
    ]
