"""Generate the bundled sample contract, ``samples/master_services_agreement.pdf``.

The document is a Master Services Agreement between two invented companies, Northwind Analytics, Inc.
(Provider) and Harbor & Vale Logistics LLC (Customer). ENTIRELY FICTIONAL: the parties, people, addresses,
e-mail domains, prices and events are made up for testing docpipe and do not describe any real agreement.
It is not legal advice and not a template to sign.

The contract is written so that each fact a test may ask about (notice periods, caps, amounts, governing
law, ...) is stated in exactly one place; only defined terms and cross-references recur. Distinct facts
may share wording (the liability cap and the non-solicitation period both say "twelve (12) months").
``expected.json`` lists such facts with the page (as extracted by pypdf) and section of each answer; edit
FACTS below and run --write-expected to change it.

Usage::

    python samples/make_sample.py                   # writes samples/master_services_agreement.pdf
    python samples/make_sample.py --out /tmp/x.pdf  # writes elsewhere
    python samples/make_sample.py --write-expected  # also recomputes pages in samples/expected.json
    python samples/make_sample.py --check           # regenerates to a temp file, verifies expected.json

Output is deterministic (reportlab ``invariant=1``, fixed metadata): the same script and reportlab version
give a byte-identical PDF. reportlab is needed to generate; pypdf is needed for --check/--write-expected.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "master_services_agreement.pdf"
EXPECTED_JSON = HERE / "expected.json"

SHORT_TITLE = "Master Services Agreement - Northwind Analytics / Harbor & Vale Logistics"
FOOTER_NOTE = "Fictional sample document - not a real agreement"
PROVIDER = "Northwind Analytics, Inc."
CUSTOMER = "Harbor & Vale Logistics LLC"
AGREEMENT_DATE = "March 3, 2025"

# ---------------------------------------------------------------------------------------------------
# Content model
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sub:
    """A lettered or roman-numbered sub-clause: (a), (b) at level 1; (i), (ii) at level 2."""

    label: str
    text: str
    level: int = 1
    ragged: bool = False  # left-aligned instead of justified (long unbreakable words, e.g. e-mail addresses)


@dataclass
class Sec:
    """A numbered section, e.g. ``12.3 Termination for Convenience.``; body items are str or Sub."""

    num: str
    title: str
    body: list = field(default_factory=list)


@dataclass
class Art:
    num: int
    title: str
    sections: list[Sec]


def S(num: str, title: str, *body) -> Sec:
    return Sec(num, title, list(body))


def a(label: str, text: str) -> Sub:
    return Sub(label, text, 1)


def rn(label: str, text: str) -> Sub:
    return Sub(label, text, 2)


# ---------------------------------------------------------------------------------------------------
# The contract text. Plain text; "**x**" marks bold. Keep to ASCII so extracted text matches verbatim.
# ---------------------------------------------------------------------------------------------------

TITLE_BLOCK = {
    "title": "MASTER SERVICES AGREEMENT",
    "date": f"Dated as of {AGREEMENT_DATE}",
    "parties": [
        (
            PROVIDER,
            "an Oregon corporation",
            ["4100 Lantern Row, Suite 300", "Portland, Oregon 97209"],
            '("Provider")',
        ),
        (
            CUSTOMER,
            "a New Jersey limited liability company",
            ["27 Quayside Commons, Building C", "Newark, New Jersey 07105"],
            '("Customer")',
        ),
    ],
}

PREAMBLE = (
    f'This Master Services Agreement is entered into as of the date set out above (the "Effective Date") by '
    f'and between {PROVIDER} ("Provider") and {CUSTOMER} ("Customer"). Provider and Customer are each '
    f'referred to as a "Party" and together as the "Parties".'
)

RECITALS = [
    "WHEREAS, Provider develops and operates a proprietary supply chain analytics platform and provides data "
    "engineering, forecasting and managed analytics services to companies in the transportation and "
    "logistics sector;",
    "WHEREAS, Customer operates a regional freight forwarding and warehousing business and wishes to obtain "
    "analytics services from Provider to improve the planning and cost control of its freight network;",
    "WHEREAS, the Parties intend that this Agreement establish the general terms under which Provider will "
    "perform services for Customer from time to time, with the specific services, deliverables and fees to "
    "be described in one or more Statements of Work; and",
    "WHEREAS, each Party has the corporate or company power and authority to enter into this Agreement on "
    "the terms set out below.",
]

NOW_THEREFORE = (
    "NOW, THEREFORE, in consideration of the mutual covenants and agreements contained in this Agreement, and "
    "for other good and valuable consideration, the receipt and sufficiency of which are hereby acknowledged, "
    "the Parties agree as follows:"
)

DEFINITIONS_INTRO = (
    "Capitalized terms used in this Agreement have the meanings given in this Article 1 or elsewhere in the "
    "body of this Agreement. The singular includes the plural and the reverse."
)

DEFINITIONS = [
    (
        "Affiliate",
        "means, with respect to a Party, any entity that directly or indirectly controls, is "
        'controlled by, or is under common control with that Party, where "control" means the power to direct '
        "the management and policies of an entity, whether through ownership of voting securities, by contract "
        "or otherwise.",
    ),
    (
        "Agreement",
        "means this Master Services Agreement, including its Exhibits and Schedules and every "
        "Statement of Work executed under it, as amended from time to time in accordance with Section 18.4.",
    ),
    (
        "Applicable Law",
        "means all statutes, regulations, ordinances, rules, orders and binding guidance of any "
        "governmental authority that apply to a Party, the Services or the processing of Customer Data.",
    ),
    (
        "Business Day",
        "means any day other than a Saturday, a Sunday or a day on which commercial banks in "
        "New York, New York are authorized or required by law to close.",
    ),
    (
        "Change of Control",
        "means, with respect to a Party: (i) the acquisition by any person or group, "
        "directly or indirectly, of beneficial ownership of more than fifty percent (50%) of the voting "
        "securities or membership interests of that Party; (ii) a merger, consolidation or reorganization of that "
        "Party after which the holders of its voting interests immediately before the transaction hold less than "
        "a majority of the voting interests of the surviving entity; or (iii) the sale or other transfer of all "
        "or substantially all of the assets of that Party or of the business unit that performs or receives the "
        "Services.",
    ),
    (
        "Confidential Information",
        "means all non-public information disclosed by or on behalf of a Party (the "
        '"Disclosing Party") to the other Party (the "Receiving Party"), whether orally, visually or in '
        "writing, that is designated as confidential or that a reasonable person would understand to be "
        "confidential given the nature of the information and the circumstances of disclosure, including "
        "pricing, business plans, technical data, software, Customer Data and the terms of this Agreement.",
    ),
    (
        "Contract Year",
        "means each consecutive period of twelve months beginning on the Effective Date or on "
        "an anniversary of the Effective Date.",
    ),
    (
        "Customer Data",
        "means all data, records and other information, including Personal Data, that Customer "
        "or its Affiliates provide to Provider or that Provider collects, generates or processes on behalf of "
        "Customer in performing the Services, together with all outputs derived exclusively from such data.",
    ),
    (
        "Deliverables",
        "means all reports, models, dashboards, configurations, documents, code and other "
        "materials that Provider is required to deliver to Customer under a Statement of Work.",
    ),
    ("Effective Date", "has the meaning given in the preamble to this Agreement."),
    (
        "Fees",
        "means the amounts payable by Customer for the Services as set out in the applicable Statement of "
        "Work, as they may be adjusted in accordance with Article 3.",
    ),
    ("Force Majeure Event", "has the meaning given in Section 15.1."),
    (
        "Intellectual Property Rights",
        "means all patents, copyrights, trademarks, trade secrets, database "
        "rights, rights in software and all other intellectual or industrial property rights anywhere in the "
        "world, whether registered or unregistered, including all applications and renewals.",
    ),
    (
        "Losses",
        "means all losses, liabilities, damages, fines, penalties, settlements, judgments, costs and "
        "expenses, including reasonable attorneys' fees and costs of investigation.",
    ),
    (
        "Personal Data",
        "means any information relating to an identified or identifiable natural person that "
        "is protected as personal information or personal data under Applicable Law.",
    ),
    (
        "Platform",
        "means Provider's hosted supply chain analytics software, known as the Northwind Insight "
        "Platform, together with its updates, documentation and supporting infrastructure.",
    ),
    (
        "Pre-Existing Materials",
        "means any materials, know-how, software, methods or Intellectual Property "
        "Rights owned or licensed by a Party before the Effective Date or developed by a Party independently of "
        "this Agreement.",
    ),
    (
        "Security Incident",
        "means any actual unauthorized access to, or acquisition, disclosure, alteration, "
        "loss or destruction of, Customer Data in the possession or control of Provider or its subcontractors.",
    ),
    (
        "Service Levels",
        "means the performance standards for the Platform and the Services set out in "
        "Schedule 1, as amended from time to time by written agreement of the Parties.",
    ),
    (
        "Services",
        "means the professional, implementation, managed analytics and hosted services that "
        "Provider performs or provides under this Agreement, including those described in any Statement of Work "
        "and access to the Platform.",
    ),
    (
        "Statement of Work",
        'or "SOW" means a document, substantially in the form of Exhibit A, that '
        "describes specific Services, Deliverables and Fees, references this Agreement and is signed by an "
        "authorized representative of each Party.",
    ),
    ("Term", "has the meaning given in Section 12.2."),
    (
        "Third-Party Claim",
        "means any claim, suit, action or proceeding brought against a Party or its "
        "Affiliates by a person or entity that is not a Party or an Affiliate of a Party.",
    ),
]

ARTICLES = [
    Art(
        2,
        "SERVICES AND STATEMENTS OF WORK",
        [
            S(
                "2.1",
                "Scope of Services",
                "Provider shall provide the Services described in each Statement of Work in accordance with this "
                "Agreement, the applicable Statement of Work and Applicable Law. Customer's Affiliates may obtain "
                "Services under this Agreement by executing a Statement of Work that references this Agreement, in "
                "which case references to Customer in that Statement of Work mean the Affiliate that signs it. This "
                "Agreement does not oblige Customer to purchase any minimum volume of Services.",
            ),
            S(
                "2.2",
                "Statements of Work",
                "Each Statement of Work shall set out, at a minimum:",
                a("a", "a description of the Services to be performed and the Deliverables to be provided;"),
                a("b", "the acceptance criteria for each Deliverable, if different from those in Section 2.4;"),
                a("c", "the project schedule and any milestones;"),
                a("d", "the Fees and the payment schedule for those Services; and"),
                a("e", "the names of any Key Personnel and the Customer project manager."),
                "A Statement of Work becomes binding only when signed by both Parties. Each Statement of Work is "
                "governed by this Agreement, and conflicts are resolved in accordance with Section 18.3.",
            ),
            S(
                "2.3",
                "Change Orders",
                "Either Party may request a change to the scope, schedule or Fees of a Statement of Work by written "
                "change request. Provider shall respond with a written estimate of the effect of the change on the "
                "schedule and the Fees. No change is binding unless it is documented in a change order signed by "
                "both Parties, and Provider is not required to perform changed Services until that change order is "
                "signed.",
            ),
            S(
                "2.4",
                "Acceptance",
                "Customer shall review each Deliverable and, within ten (10) Business Days after its delivery, "
                "either accept it in writing or give Provider a written notice describing in reasonable detail "
                "each respect in which the Deliverable fails to conform to its acceptance criteria. Provider shall "
                "correct the non-conformities and re-submit the Deliverable, and the acceptance procedure shall be "
                "repeated. A Deliverable is deemed accepted if Customer neither accepts nor rejects it within the "
                "review period, or if Customer uses it in live operations other than for testing.",
            ),
            S(
                "2.5",
                "Provider Personnel",
                "Provider shall assign to the Services personnel who are suitably qualified and experienced. The "
                'individuals identified as key personnel in a Statement of Work ("Key Personnel") shall not be '
                "removed or reassigned without Customer's prior written consent, except in the case of illness, "
                "resignation, termination of employment or other circumstances outside Provider's reasonable "
                "control. Customer may, on reasonable and lawful grounds, request the replacement of any individual "
                "assigned to the Services, and Provider shall replace that individual at no additional charge.",
            ),
            S(
                "2.6",
                "Subcontractors",
                "Provider shall not subcontract any material part of the Services without Customer's prior written "
                "consent. Provider remains responsible for the acts and omissions of its subcontractors as if they "
                "were its own and shall ensure that each subcontractor is bound by written obligations at least as "
                "protective of Customer as those in Article 4 and Article 6.",
            ),
            S(
                "2.7",
                "Customer Responsibilities",
                "Customer shall provide Provider with timely access to the personnel, information, systems and "
                "facilities reasonably required for the Services, as described in the applicable Statement of Work. "
                "Provider is excused from its failure to perform to the extent that failure is caused by Customer's "
                "failure to meet its responsibilities, provided that Provider promptly notifies Customer of that "
                "failure and uses reasonable efforts to perform notwithstanding it.",
            ),
            S(
                "2.8",
                "Service Levels",
                "Provider shall provide the Platform and the managed analytics Services in accordance with the "
                "Service Levels. If Provider fails to meet a Service Level, Customer is entitled to the service "
                "credits described in Schedule 1. Service credits are a price adjustment reflecting the reduced "
                "value of the Services and are without prejudice to Customer's rights under Section 12.4.",
            ),
        ],
    ),
    Art(
        3,
        "FEES, INVOICING AND PAYMENT",
        [
            S(
                "3.1",
                "Fees",
                "In consideration of the Services, Customer shall pay Provider the Fees set out in each Statement of "
                "Work. Except as expressly provided in Section 3.2, the Fees stated in a Statement of Work are fixed "
                "for the Initial Term and include all costs of performing the Services, other than expenses "
                "reimbursable under Section 3.7.",
            ),
            S(
                "3.2",
                "Fee Adjustments",
                "Effective on the first day of any Renewal Term, Provider may increase the recurring Fees by no more "
                "than three percent (3%) over the recurring Fees in effect during the immediately preceding Contract "
                "Year, provided that Provider gives Customer written notice of the increase no later than the last "
                "day on which a notice of non-renewal could be given under Section 12.2.",
            ),
            S(
                "3.3",
                "Invoicing",
                "Unless a Statement of Work provides otherwise, Provider shall invoice recurring Fees monthly in "
                "advance and milestone Fees upon Customer's acceptance of the relevant Deliverable. Each invoice "
                "shall reference this Agreement, the applicable Statement of Work and Customer's purchase order "
                "number, and shall itemize the Services, Fees and any reimbursable expenses. Invoices shall be "
                "submitted electronically to the accounts payable address designated by Customer in writing.",
            ),
            S(
                "3.4",
                "Payment Terms",
                "Customer shall pay each undisputed invoice within forty-five (45) days after Customer's receipt of "
                "a correct invoice. All payments shall be made in United States dollars by electronic funds transfer "
                "to the bank account designated by Provider in writing. Payment of an invoice does not constitute "
                "acceptance of any Deliverable or a waiver of any right.",
            ),
            S(
                "3.5",
                "Late Payment",
                "Any undisputed amount not paid when due bears interest at the rate of one percent (1%) per month, "
                "or the highest rate permitted by Applicable Law if that is lower, from the due date until the date "
                "of payment. If an undisputed amount remains unpaid after Provider has sent Customer a written "
                "reminder, Provider may, after a further fifteen (15) Business Days, suspend performance of the "
                "affected Services until the amount is paid in full. Provider shall not suspend access to the "
                "Platform for amounts that are the subject of a good faith dispute.",
            ),
            S(
                "3.6",
                "Disputed Amounts",
                "Customer may withhold payment of any invoiced amount that it disputes in good faith by notifying "
                "Provider of the disputed amount and the reasons for the dispute before the invoice due date, and "
                "shall pay the undisputed remainder when due. The Parties shall resolve disputed amounts in "
                "accordance with Section 16.2, and any amount found to be owed shall be paid promptly after "
                "resolution.",
            ),
            S(
                "3.7",
                "Taxes and Expenses",
                "The Fees exclude sales, use, value added and similar taxes, which Customer shall pay when properly "
                "invoiced, excluding taxes based on Provider's net income, property or employees. Customer shall "
                "reimburse reasonable travel and out-of-pocket expenses only if they are pre-approved in writing by "
                "Customer and incurred in accordance with Customer's travel policy, and only at actual cost without "
                "mark-up.",
            ),
            S(
                "3.8",
                "Most Favored Customer",
                "Provider represents that the Fees are no less favorable than the fees Provider charges any other "
                "customer for substantially similar services in comparable volumes and on comparable terms. If, "
                "during the Term, Provider offers any other customer lower fees for substantially similar services "
                "in comparable volumes and on comparable terms, Provider shall promptly offer the same lower fees to "
                "Customer, effective from the date on which they were first offered to that other customer, and "
                "shall credit Customer with any resulting difference already paid. An officer of Provider shall "
                "certify Provider's compliance with this Section 3.8 in writing annually, and Customer may verify "
                "compliance under Article 11.",
            ),
        ],
    ),
    Art(
        4,
        "CONFIDENTIALITY",
        [
            S(
                "4.1",
                "Obligations",
                "The Receiving Party shall:",
                a(
                    "a",
                    "use the Disclosing Party's Confidential Information only to perform its obligations and "
                    "exercise its rights under this Agreement;",
                ),
                a(
                    "b",
                    "not disclose the Disclosing Party's Confidential Information to any person other than its "
                    "and its Affiliates' employees, officers, contractors and professional advisers who need to "
                    "know it for the purposes of this Agreement and who are bound by written or professional "
                    "obligations of confidentiality no less protective than this Article 4 (its "
                    '"Representatives"); and',
                ),
                a(
                    "c",
                    "protect the Disclosing Party's Confidential Information using at least the degree of care it "
                    "uses to protect its own information of a similar nature, and in no event less than "
                    "reasonable care.",
                ),
                "The Receiving Party is responsible for any breach of this Article 4 by its Representatives.",
            ),
            S(
                "4.2",
                "Exclusions",
                "The obligations in Section 4.1 do not apply to information that the Receiving Party can demonstrate "
                "by written evidence:",
                a(
                    "a",
                    "is or becomes generally available to the public other than through a breach of this Agreement;",
                ),
                a(
                    "b",
                    "was lawfully known to the Receiving Party without restriction before its disclosure by the "
                    "Disclosing Party;",
                ),
                a(
                    "c",
                    "is lawfully received from a third party without restriction and without breach of any "
                    "obligation owed to the Disclosing Party; or",
                ),
                a(
                    "d",
                    "is independently developed by the Receiving Party without use of or reference to the "
                    "Disclosing Party's Confidential Information.",
                ),
                "None of these exclusions applies to Customer Data or Personal Data.",
            ),
            S(
                "4.3",
                "Compelled Disclosure",
                "The Receiving Party may disclose Confidential Information to the extent required by Applicable Law "
                "or by order of a court or governmental authority, provided that, where legally permitted, it gives "
                "the Disclosing Party prompt written notice of the requirement, cooperates with any effort by the "
                "Disclosing Party to obtain a protective order, and discloses only the portion of the Confidential "
                "Information that it is legally required to disclose.",
            ),
            S(
                "4.4",
                "Return or Destruction",
                "On the Disclosing Party's written request, and in any event on expiration or termination of this "
                "Agreement, the Receiving Party shall return or destroy the Disclosing Party's Confidential "
                "Information and certify that it has done so. The Receiving Party may retain copies held in routine "
                "electronic backups or required to be retained by Applicable Law, which remain subject to this "
                "Article 4 for as long as they are retained. The return of Customer Data is governed by Section "
                "12.6.",
            ),
            S(
                "4.5",
                "Duration",
                "The obligations in this Article 4 apply during the Term and continue for five (5) years after the "
                "expiration or termination of this Agreement, except that obligations regarding trade secrets and "
                "Customer Data continue for as long as the information remains a trade secret or is held by the "
                "Receiving Party.",
            ),
            S(
                "4.6",
                "Equitable Relief",
                "A breach of this Article 4 may cause the Disclosing Party irreparable harm for which monetary "
                "damages would be an inadequate remedy. The Disclosing Party is entitled to seek injunctive or other "
                "equitable relief for any actual or threatened breach, without posting a bond, in addition to any "
                "other remedy available to it.",
            ),
        ],
    ),
    Art(
        5,
        "INTELLECTUAL PROPERTY",
        [
            S(
                "5.1",
                "Pre-Existing Materials",
                "Each Party retains all right, title and interest in and to its Pre-Existing Materials. Nothing in "
                "this Agreement transfers ownership of a Party's Pre-Existing Materials to the other Party.",
            ),
            S(
                "5.2",
                "Ownership of Deliverables",
                "Subject to Customer's payment of the Fees for the relevant Deliverable, Customer owns all right, "
                "title and interest, including all Intellectual Property Rights, in and to the Deliverables, "
                "excluding any Provider Pre-Existing Materials and the Platform. To the extent any Deliverable is "
                "not a work made for hire under Applicable Law, Provider hereby assigns to Customer all of its "
                "right, title and interest in that Deliverable, and shall execute such further documents as "
                "Customer reasonably requests to perfect that assignment.",
            ),
            S(
                "5.3",
                "License to Provider Materials",
                "To the extent any Provider Pre-Existing Materials are incorporated into a Deliverable, Provider "
                "grants Customer and its Affiliates a non-exclusive, perpetual, irrevocable, worldwide, royalty-free "
                "license to use, copy and modify those materials solely as part of that Deliverable for their "
                "internal business purposes. This license survives any expiration or termination of this Agreement.",
            ),
            S(
                "5.4",
                "Platform",
                "Provider and its licensors own all right, title and interest in and to the Platform. Subject to this "
                "Agreement, Provider grants Customer and its Affiliates a non-exclusive, non-transferable right "
                "during the Term to access and use the Platform for their internal business purposes, through the "
                "number of named users stated in the applicable Statement of Work. Customer shall not:",
                a("a", "copy, modify or create derivative works of the Platform;"),
                a(
                    "b",
                    "reverse engineer, decompile or disassemble the Platform, except to the extent Applicable Law "
                    "expressly permits it despite this limitation; or",
                ),
                a(
                    "c",
                    "resell, sublicense or make the Platform available to any third party other than its "
                    "contractors acting on its behalf.",
                ),
            ),
            S(
                "5.5",
                "Customer Data",
                "As between the Parties, Customer owns all Customer Data. Customer grants Provider a non-exclusive "
                "license during the Term to process Customer Data solely to the extent necessary to provide the "
                "Services, in accordance with Article 6 and Customer's documented instructions.",
            ),
            S(
                "5.6",
                "Aggregated Data",
                "Provider may compile statistical information about the performance and use of the Platform, "
                "provided that such information (i) does not identify Customer, its Affiliates, its customers or "
                "any individual, (ii) does not include Customer Data in a form from which it can be reconstructed, "
                "and (iii) is used only to maintain and improve the Platform.",
            ),
            S(
                "5.7",
                "Reservation of Rights",
                "All rights not expressly granted in this Agreement are reserved. No license is granted by "
                "implication, estoppel or otherwise.",
            ),
        ],
    ),
    Art(
        6,
        "DATA PROTECTION AND SECURITY",
        [
            S(
                "6.1",
                "Compliance",
                "Each Party shall comply with all Applicable Law relating to privacy, data protection and data "
                "security in connection with this Agreement. Where Provider processes Personal Data on behalf of "
                "Customer, the Parties shall, on Customer's request, enter into a data processing addendum in the "
                "form reasonably required by Applicable Law, which shall form part of this Agreement.",
            ),
            S(
                "6.2",
                "Processing Instructions",
                "Provider shall process Customer Data only on Customer's documented instructions, which include this "
                "Agreement and each Statement of Work, and shall not sell, rent or disclose Customer Data or use it "
                "for any purpose other than providing the Services. Provider shall promptly inform Customer if, in "
                "its opinion, an instruction infringes Applicable Law.",
            ),
            S(
                "6.3",
                "Security Program",
                "Provider shall maintain a written information security program containing administrative, "
                "physical and technical safeguards designed to protect Customer Data against Security Incidents, "
                "consistent with recognized industry standards such as ISO/IEC 27001. Provider shall obtain an "
                "annual SOC 2 Type II report covering the Platform and provide a copy to Customer on request. "
                "Provider shall ensure that Customer Data is encrypted in transit and at rest.",
            ),
            S(
                "6.4",
                "Security Incidents",
                "Provider shall notify Customer of any Security Incident without undue delay, and in any event "
                "within seventy-two (72) hours after becoming aware of it. The notice shall describe the nature of "
                "the Security Incident, the categories of Customer Data affected, the likely consequences and the "
                "measures taken or proposed to address it. Provider shall cooperate with Customer's investigation "
                "and, where the Security Incident results from Provider's breach of this Article 6, shall bear the "
                "reasonable costs of notifying affected individuals and regulators and of providing credit "
                "monitoring where required by Applicable Law.",
            ),
            S(
                "6.5",
                "Data Location",
                "Provider shall store and process Customer Data only in data centers located in the United States, "
                "unless Customer gives its prior written consent to another location.",
            ),
        ],
    ),
    Art(
        7,
        "REPRESENTATIONS AND WARRANTIES",
        [
            S(
                "7.1",
                "Mutual Representations",
                "Each Party represents and warrants to the other that (a) it is duly organized, validly existing and "
                "in good standing under the laws of its jurisdiction of organization; (b) it has full power and "
                "authority to enter into and perform this Agreement; and (c) its execution and performance of this "
                "Agreement do not conflict with any other agreement to which it is a party.",
            ),
            S(
                "7.2",
                "Provider Warranties",
                "Provider warrants that:",
                a(
                    "a",
                    "the Services will be performed in a professional and workmanlike manner, consistent with "
                    "generally accepted industry standards, by appropriately qualified personnel;",
                ),
                a(
                    "b",
                    "each Deliverable will conform in all material respects to its specifications and acceptance "
                    "criteria for three (3) months after its acceptance;",
                ),
                a("c", "the Platform will perform materially in accordance with its documentation;"),
                a(
                    "d",
                    "Provider will use industry standard measures to ensure that the Platform and the "
                    "Deliverables do not contain any virus, time bomb or other malicious code; and",
                ),
                a("e", "Provider will comply with all Applicable Law in performing the Services."),
            ),
            S(
                "7.3",
                "Warranty Remedies",
                "If Provider breaches a warranty in Section 7.2, Provider shall, at its own expense and at "
                "Customer's option:",
                a("a", "re-perform the non-conforming Services or correct the non-conforming Deliverable; or"),
                a(
                    "b",
                    "if Provider is unable to do so within a reasonable time, refund the Fees paid for the "
                    "non-conforming Services or Deliverable.",
                ),
                "These remedies are in addition to, and not in place of, Customer's rights under Article 12.",
            ),
            S(
                "7.4",
                "Disclaimer",
                "EXCEPT AS EXPRESSLY SET OUT IN THIS AGREEMENT, NEITHER PARTY MAKES ANY WARRANTY, EXPRESS, IMPLIED OR "
                "STATUTORY, AND EACH PARTY SPECIFICALLY DISCLAIMS ALL IMPLIED WARRANTIES OF MERCHANTABILITY, FITNESS "
                "FOR A PARTICULAR PURPOSE, TITLE AND NON-INFRINGEMENT.",
            ),
        ],
    ),
    Art(
        8,
        "INDEMNIFICATION",
        [
            S(
                "8.1",
                "Indemnification by Provider",
                "Provider shall defend Customer, its Affiliates and their respective officers, directors and "
                "employees against any Third-Party Claim, and shall indemnify them against all Losses arising from "
                "that Third-Party Claim, to the extent the Third-Party Claim:",
                a(
                    "a",
                    "alleges that the Services, the Platform or any Deliverable infringes or misappropriates the "
                    "Intellectual Property Rights of a third party;",
                ),
                a(
                    "b",
                    "arises from bodily injury, death or damage to tangible property caused by the negligence or "
                    "wilful misconduct of Provider or its personnel; or",
                ),
                a("c", "arises from a Security Incident or from Provider's breach of Article 6."),
            ),
            S(
                "8.2",
                "Exceptions",
                "Provider has no obligation under Section 8.1(a) to the extent a Third-Party Claim arises from (i) "
                "modifications made by anyone other than Provider or its subcontractors; (ii) the combination of a "
                "Deliverable with materials not supplied or specified by Provider, if the claim would not have "
                "arisen but for that combination; or (iii) Provider's compliance with detailed written "
                "specifications provided by Customer.",
            ),
            S(
                "8.3",
                "Mitigation",
                "If the Platform or any Deliverable becomes, or in Provider's reasonable opinion is likely to "
                "become, the subject of an infringement claim, Provider shall at its expense either procure for "
                "Customer the right to continue using it or modify or replace it so that it is non-infringing "
                "without material loss of functionality. If neither option is commercially reasonable, either Party "
                "may terminate the affected Statement of Work, and Provider shall refund any prepaid Fees for the "
                "period after termination.",
            ),
            S(
                "8.4",
                "Indemnification by Customer",
                "Customer shall defend Provider, its Affiliates and their respective officers, directors and "
                "employees against any Third-Party Claim, and shall indemnify them against all Losses arising from "
                "that Third-Party Claim, to the extent the Third-Party Claim alleges that Customer Data, as provided "
                "by Customer, infringes the rights of a third party or was collected by Customer in violation of "
                "Applicable Law.",
            ),
            S(
                "8.5",
                "Procedure",
                "The Party seeking indemnification shall (a) give the indemnifying Party prompt written notice of "
                "the Third-Party Claim, provided that delay relieves the indemnifying Party of its obligations only "
                "to the extent it is materially prejudiced; (b) give the indemnifying Party sole control of the "
                "defense and settlement of the Third-Party Claim; and (c) provide reasonable cooperation at the "
                "indemnifying Party's expense. The indemnifying Party shall not settle any Third-Party Claim in a "
                "manner that admits fault on behalf of, or imposes any non-monetary obligation on, the indemnified "
                "Party without its prior written consent. The indemnified Party may participate in the defense "
                "with counsel of its choice at its own expense.",
            ),
        ],
    ),
    Art(
        9,
        "LIMITATION OF LIABILITY",
        [
            S(
                "9.1",
                "Liability Cap",
                "Except as provided in Section 9.3, each Party's total aggregate liability arising out of or relating "
                "to this Agreement, whether in contract, tort (including negligence) or otherwise, shall not exceed "
                "the total Fees paid by Customer under this Agreement in the twelve (12) months preceding the event "
                "giving rise to the claim.",
            ),
            S(
                "9.2",
                "Exclusion of Consequential Damages",
                "EXCEPT AS PROVIDED IN SECTION 9.3, IN NO EVENT SHALL EITHER PARTY BE LIABLE TO THE OTHER FOR ANY "
                "INDIRECT, INCIDENTAL, SPECIAL, CONSEQUENTIAL, EXEMPLARY OR PUNITIVE DAMAGES, OR FOR ANY LOSS OF "
                "PROFITS, REVENUE, GOODWILL OR ANTICIPATED SAVINGS, ARISING OUT OF OR RELATING TO THIS AGREEMENT, "
                "EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGES.",
            ),
            S(
                "9.3",
                "Exceptions",
                "The limitations in Sections 9.1 and 9.2 do not apply to:",
                a("a", "a Party's indemnification obligations under Article 8;"),
                a("b", "a Party's breach of Article 4 or Provider's breach of Article 6;"),
                a("c", "a Party's gross negligence, wilful misconduct or fraud; or"),
                a("d", "Customer's obligation to pay Fees properly due under this Agreement."),
            ),
            S(
                "9.4",
                "Allocation of Risk",
                "The Parties acknowledge that the Fees reflect the allocation of risk set out in this Article 9 and "
                "that neither Party would have entered into this Agreement without these limitations. The "
                "limitations apply even if a limited remedy fails of its essential purpose.",
            ),
        ],
    ),
    Art(
        10,
        "INSURANCE",
        [
            S(
                "10.1",
                "Required Coverage",
                "During the Term, Provider shall maintain, at its own expense, the following insurance:",
                a(
                    "a",
                    "commercial general liability insurance with limits of not less than USD 2,000,000 per "
                    "occurrence and USD 4,000,000 in the aggregate;",
                ),
                a(
                    "b",
                    "technology errors and omissions (professional liability) insurance with limits of not less "
                    "than USD 5,000,000 per claim and in the aggregate;",
                ),
                a(
                    "c",
                    "cyber liability insurance covering network security and privacy liability, including "
                    "notification costs, with limits of not less than USD 3,000,000 per claim;",
                ),
                a(
                    "d",
                    "workers' compensation insurance as required by Applicable Law and employer's liability "
                    "insurance with limits of not less than USD 1,000,000 per accident; and",
                ),
                a(
                    "e",
                    "automobile liability insurance covering owned, hired and non-owned vehicles, where Provider "
                    "personnel drive in connection with the Services.",
                ),
            ),
            S(
                "10.2",
                "Insurers and Additional Insured",
                "All policies shall be issued by insurers with an A.M. Best rating of A- VII or better. Customer "
                "and its Affiliates shall be named as additional insureds under the commercial general liability "
                "policy. Coverage written on a claims-made basis shall be maintained, or an extended reporting "
                "period purchased, for at least eighteen (18) months after the end of the Term.",
            ),
            S(
                "10.3",
                "Certificates",
                "Provider shall provide certificates of insurance evidencing the coverage required by this Article "
                "10 on Customer's request and shall give Customer prompt written notice of any cancellation or "
                "material reduction of coverage. The insurance required by this Article 10 does not limit "
                "Provider's liability under this Agreement.",
            ),
        ],
    ),
    Art(
        11,
        "RECORDS AND AUDIT",
        [
            S(
                "11.1",
                "Records",
                "Provider shall keep complete and accurate books and records relating to the Services, the Fees "
                "charged and the expenses invoiced, and to its compliance with Article 6 and Section 3.8, during the "
                "Term and for two (2) years after the final payment under this Agreement.",
            ),
            S(
                "11.2",
                "Audit Rights",
                "Customer, or an independent auditor appointed by Customer and bound by obligations of "
                "confidentiality, may audit the records described in Section 11.1 no more than once per Contract "
                "Year, on at least thirty (30) days' written notice to Provider. Audits shall be conducted during "
                "Provider's normal business hours, in a manner that does not unreasonably interfere with Provider's "
                "operations, and shall not give Customer access to the confidential information of Provider's other "
                "customers. The frequency limit does not apply to audits required by a regulator with jurisdiction "
                "over Customer or to an audit following a Security Incident.",
            ),
            S(
                "11.3",
                "Audit Results",
                "If an audit reveals that Provider has overcharged Customer, Provider shall promptly credit or "
                "refund the overcharged amount. If the overcharge exceeds five percent (5%) of the Fees due for the "
                "audited period, Provider shall also reimburse Customer for the reasonable costs of the audit. Each "
                "Party otherwise bears its own costs of the audit.",
            ),
        ],
    ),
    Art(
        12,
        "TERM AND TERMINATION",
        [
            S(
                "12.1",
                "Initial Term",
                "This Agreement commences on the Effective Date and continues for an initial term of three (3) years "
                '(the "Initial Term"), unless terminated earlier in accordance with this Article 12.',
            ),
            S(
                "12.2",
                "Renewal",
                "After the Initial Term, this Agreement renews automatically for successive renewal terms of one (1) "
                'year each (each a "Renewal Term" and, together with the Initial Term, the "Term"), unless '
                "either Party gives the other written notice of non-renewal at least sixty (60) days before the end "
                "of the Initial Term or the then-current Renewal Term. Each Statement of Work continues for the "
                "period stated in it, but no Statement of Work extends beyond the Term unless the Parties agree "
                "otherwise in writing.",
            ),
            S(
                "12.3",
                "Termination for Convenience",
                "Either Party may terminate this Agreement, or any Statement of Work, for any reason or no reason "
                "upon ninety (90) days' prior written notice to the other Party. If Customer terminates under this "
                "Section 12.3, Customer shall pay for Services performed up to the effective date of termination and "
                "for any non-cancellable commitments expressly identified in the applicable Statement of Work, and "
                "no other termination fee or penalty shall be payable.",
            ),
            S(
                "12.4",
                "Termination for Cause",
                "Either Party may terminate this Agreement or an affected Statement of Work by written notice if the "
                "other Party materially breaches this Agreement or that Statement of Work and fails to cure the "
                "breach within thirty (30) days after receiving written notice describing the breach in reasonable "
                "detail. A breach that is not capable of cure may be treated as grounds for termination without a "
                "cure period.",
            ),
            S(
                "12.5",
                "Insolvency",
                "Either Party may terminate this Agreement immediately by written notice if the other Party (a) "
                "becomes insolvent or admits in writing its inability to pay its debts as they become due; (b) makes "
                "a general assignment for the benefit of creditors; (c) has a receiver, trustee or similar officer "
                "appointed over all or a substantial part of its assets; or (d) becomes the subject of a voluntary or "
                "involuntary bankruptcy petition that, if involuntary, is not dismissed within two (2) months after "
                "filing.",
            ),
            S(
                "12.6",
                "Effects of Termination",
                "On expiration or termination of this Agreement or a Statement of Work:",
                a("a", "Customer shall pay Provider:"),
                rn("i", "all undisputed Fees for Services performed up to the effective date of termination; and"),
                rn("ii", "any expenses incurred before that date that are reimbursable under Section 3.7;"),
                a("b", "Provider shall refund to Customer any prepaid Fees for Services not performed;"),
                a(
                    "c",
                    "each Party shall return or destroy the other Party's Confidential Information in accordance "
                    "with Section 4.4;",
                ),
                a(
                    "d",
                    "Provider shall return all Customer Data to Customer in a commonly used, machine-readable "
                    "format within twenty (20) Business Days and shall then securely delete all copies, except "
                    "as required by Applicable Law; and",
                ),
                a(
                    "e",
                    "termination of this Agreement terminates every Statement of Work then in effect, but "
                    "termination of a Statement of Work does not terminate this Agreement or any other Statement "
                    "of Work.",
                ),
            ),
            S(
                "12.7",
                "Transition Assistance",
                "On Customer's request, Provider shall provide reasonable transition assistance for up to four (4) "
                "months after the effective date of expiration or termination, including continued access to the "
                "Platform and cooperation with any successor provider, at the rates set out in the applicable "
                "Statement of Work. If Provider terminates under Section 12.4 for Customer's failure to pay, Provider "
                "may require payment in advance for transition assistance.",
            ),
            S(
                "12.8",
                "Survival",
                "Articles 1, 4, 5, 8, 9, 11, 16 and 18 and Sections 3.4, 3.5, 12.6, 12.7 and 14.1, together with any "
                "other provision that by its nature is intended to survive, survive the expiration or termination "
                "of this Agreement for the periods stated in them or, if no period is stated, indefinitely.",
            ),
        ],
    ),
    Art(
        13,
        "ASSIGNMENT AND CHANGE OF CONTROL",
        [
            S(
                "13.1",
                "Assignment",
                "Neither Party may assign, delegate or otherwise transfer this Agreement or any of its rights or "
                "obligations under it, whether voluntarily, by operation of law or otherwise, without the prior "
                "written consent of the other Party, which shall not be unreasonably withheld. Any attempted "
                "assignment, delegation or transfer in violation of this Section 13.1 is void.",
            ),
            S(
                "13.2",
                "Change of Control",
                "A Party that undergoes a Change of Control shall notify the other Party in writing within seven (7) "
                "days after its completion. Upon a Change of Control of a Party, the other Party may terminate this "
                "Agreement by written notice given within six (6) months after it receives notice of the Change of "
                "Control, with effect on the date stated in that notice, and no termination fee or penalty shall be "
                "payable by the terminating Party. A Change of Control is not an assignment for the purposes of "
                "Section 13.1.",
            ),
            S(
                "13.3",
                "Binding Effect",
                "Subject to this Article 13, this Agreement binds and benefits the Parties and their respective "
                "permitted successors and assigns.",
            ),
        ],
    ),
    Art(
        14,
        "NON-SOLICITATION",
        [
            S(
                "14.1",
                "Non-Solicitation of Employees",
                "During the Term and for twelve (12) months after its expiration or termination, neither Party shall, "
                "directly or indirectly, solicit for employment or engagement any employee of the other Party who "
                "was directly involved in the performance or receipt of the Services, without the other Party's "
                "prior written consent.",
            ),
            S(
                "14.2",
                "Exceptions",
                "Section 14.1 does not prohibit (a) general solicitations, such as job advertisements or recruiter "
                "searches, that are not specifically directed at the other Party's employees, or (b) hiring any "
                "person who responds to such a general solicitation or who approaches the hiring Party on his or her "
                "own initiative.",
            ),
        ],
    ),
    Art(
        15,
        "FORCE MAJEURE",
        [
            S(
                "15.1",
                "Force Majeure Events",
                "Neither Party is liable for any failure or delay in performing its obligations, other than payment "
                "obligations, to the extent caused by events beyond its reasonable control, including fire, flood, "
                "earthquake, epidemic, war, terrorism, civil unrest, governmental action, or failure of public "
                'utilities or telecommunications networks not caused by that Party (each a "Force Majeure '
                "Event\"). Labor disputes involving a Party's own personnel and failures of a Party's subcontractors "
                "are not Force Majeure Events unless they are themselves caused by a Force Majeure Event.",
            ),
            S(
                "15.2",
                "Notice and Mitigation",
                "The affected Party shall promptly notify the other Party of the Force Majeure Event and its expected "
                "duration, use commercially reasonable efforts to mitigate its effects and resume performance as "
                "soon as practicable. A Force Majeure Event does not excuse Provider from performing its business "
                "continuity and disaster recovery obligations under Section 15.4.",
            ),
            S(
                "15.3",
                "Prolonged Force Majeure",
                "If a Force Majeure Event prevents the performance of a material part of the Services for more than "
                "one hundred twenty (120) consecutive days, either Party may terminate the affected Statement of Work "
                "by written notice, and Provider shall refund any prepaid Fees for Services not performed.",
            ),
            S(
                "15.4",
                "Business Continuity",
                "Provider shall maintain a business continuity and disaster recovery plan for the Platform, test it "
                "at least annually, and provide Customer with a summary of the test results on request.",
            ),
        ],
    ),
    Art(
        16,
        "GOVERNING LAW AND DISPUTE RESOLUTION",
        [
            S(
                "16.1",
                "Governing Law",
                "This Agreement and any dispute arising out of or relating to it are governed by the laws of the "
                "State of Delaware, without regard to its conflict of laws principles. The United Nations Convention "
                "on Contracts for the International Sale of Goods does not apply to this Agreement.",
            ),
            S(
                "16.2",
                "Escalation",
                "Before commencing any proceeding, other than a proceeding for injunctive relief, a Party shall refer "
                "any dispute to the other Party's executive sponsor identified in the applicable Statement of Work. "
                "The executive sponsors shall meet within fourteen (14) days after the referral and negotiate in "
                "good faith to resolve the dispute. If the dispute is not resolved within one month after that "
                "meeting, either Party may proceed under Section 16.3.",
            ),
            S(
                "16.3",
                "Venue",
                "Each Party irrevocably submits to the exclusive jurisdiction of the state and federal courts located "
                "in New Castle County, Delaware for any action arising out of or relating to this Agreement and "
                "waives any objection to venue in those courts, except that either Party may seek injunctive relief "
                "in any court of competent jurisdiction.",
            ),
            S(
                "16.4",
                "Waiver of Jury Trial",
                "EACH PARTY KNOWINGLY AND VOLUNTARILY WAIVES ANY RIGHT TO A TRIAL BY JURY IN ANY ACTION ARISING OUT "
                "OF OR RELATING TO THIS AGREEMENT.",
            ),
        ],
    ),
    Art(
        17,
        "NOTICES",
        [
            S(
                "17.1",
                "Form of Notice",
                "All notices under this Agreement shall be in writing and delivered by hand, by nationally "
                "recognized overnight courier or by certified mail, return receipt requested, to the address of the "
                "receiving Party stated on the first page of this Agreement, marked for the attention set out in "
                "Section 17.2, with a copy by e-mail. A notice is effective when received or when delivery is "
                "refused. E-mail alone is sufficient for routine operational communications but not for notices of "
                "breach, termination or non-renewal.",
            ),
            S(
                "17.2",
                "Notice Contacts",
                "Notices shall be marked for the attention of the following, with copies as indicated:",
                Sub(
                    "a",
                    "if to Provider: Attention: General Counsel, e-mail legal@northwind-analytics.example, with a "
                    "copy (which shall not constitute notice) to Pell, Marchetti & Osei LLP, 500 Granary Street, "
                    "Boston, Massachusetts 02110, Attention: Technology Transactions Group; and",
                    ragged=True,
                ),
                Sub(
                    "b",
                    "if to Customer: Attention: Vice President, Procurement, e-mail "
                    "contracts@harborvale-logistics.example, with a copy to Attention: General Counsel at the "
                    "same address.",
                    ragged=True,
                ),
            ),
            S(
                "17.3",
                "Change of Address",
                "A Party may change its notice address or contacts by notice given to the other Party in accordance "
                "with this Article 17.",
            ),
        ],
    ),
    Art(
        18,
        "GENERAL PROVISIONS",
        [
            S(
                "18.1",
                "Independent Contractors",
                "The Parties are independent contractors. Nothing in this Agreement creates a partnership, joint "
                "venture, agency or employment relationship, and neither Party may bind the other.",
            ),
            S(
                "18.2",
                "Entire Agreement",
                "This Agreement, including its Exhibits and Schedules and all Statements of Work, constitutes the "
                "entire agreement between the Parties regarding its subject matter and supersedes all prior and "
                "contemporaneous agreements, proposals and understandings, whether written or oral. Pre-printed "
                "terms on any purchase order, invoice or online click-through are of no effect.",
            ),
            S(
                "18.3",
                "Order of Precedence",
                "In the event of a conflict, the following order of precedence applies: (i) the body of this "
                "Agreement; (ii) Schedule 1; and (iii) the applicable Statement of Work, except that a Statement of "
                "Work prevails over the body of this Agreement where it expressly identifies the Section of this "
                "Agreement that it varies, and then only for the purposes of that Statement of Work.",
            ),
            S(
                "18.4",
                "Amendment and Waiver",
                "This Agreement may be amended only by a written instrument signed by an authorized representative "
                "of each Party. No failure or delay in exercising any right operates as a waiver of it, and no waiver "
                "is effective unless it is in writing.",
            ),
            S(
                "18.5",
                "Severability",
                "If any provision of this Agreement is held invalid or unenforceable, it shall be enforced to the "
                "maximum extent permissible and the remaining provisions shall continue in full force and effect.",
            ),
            S(
                "18.6",
                "Counterparts and Electronic Signatures",
                "This Agreement and any Statement of Work may be executed in counterparts, each of which is an "
                "original and all of which together constitute one instrument. Signatures delivered electronically "
                "or by PDF are binding as originals.",
            ),
            S(
                "18.7",
                "Publicity",
                "Neither Party shall use the other Party's name, logos or trademarks in any publicity, advertising "
                "or customer list without the other Party's prior written consent.",
            ),
            S(
                "18.8",
                "No Third-Party Beneficiaries",
                "Except for the persons entitled to indemnification under Article 8, nothing in this Agreement "
                "confers any right or remedy on any person other than the Parties and their permitted successors and "
                "assigns.",
            ),
            S(
                "18.9",
                "Interpretation",
                'Headings are for convenience only and do not affect interpretation. The words "including" and '
                '"include" mean "including without limitation". References to Articles, Sections, Exhibits and '
                "Schedules are to those of this Agreement unless stated otherwise, and a reference to a defined term "
                "has the meaning given in Article 1.",
            ),
        ],
    ),
]

SIGNATURE_INTRO = (
    "IN WITNESS WHEREOF, the Parties have caused this Agreement to be executed by their duly authorized "
    "representatives as of the Effective Date."
)
SIGNATORIES = [
    (PROVIDER.upper(), "Dana R. Whitfield", "Chief Executive Officer"),
    (CUSTOMER.upper(), "Marcus T. Oyelaran", "Chief Operating Officer"),
]

# Exhibit A and Schedule 1: numbered paragraphs; each entry is (number, title, body items)
EXHIBIT_A_INTRO = (
    'This Statement of Work No. 1 (this "SOW") is entered into under, and is governed by, the Master '
    'Services Agreement between Northwind Analytics, Inc. ("Provider") and Harbor & Vale Logistics LLC '
    '("Customer") dated as of the Effective Date (the "Agreement"). Capitalized terms not defined in this '
    "SOW have the meanings given in Article 1 of the Agreement."
)

EXHIBIT_A = [
    (
        "1",
        "Project Overview",
        [
            "Provider shall implement the Platform for Customer's freight network under the project name \"Harbor "
            "Lens\", integrate it with Customer's transportation management and warehouse management systems, "
            "build demand forecasting models for Customer's principal freight lanes and, after go-live, operate "
            "the Platform and the models as a managed analytics service."
        ],
    ),
    (
        "2",
        "SOW Term",
        [
            "This SOW commences on April 1, 2025 and continues until the expiration or termination of the "
            "Agreement, unless terminated earlier in accordance with Article 12 of the Agreement."
        ],
    ),
    (
        "3",
        "Deliverables",
        [
            "Provider shall deliver the following Deliverables, each subject to acceptance under Section 2.4 of "
            "the Agreement:",
            a(
                "D-1",
                "Discovery Report: a current-state assessment of Customer's freight data sources, data "
                "quality findings and the target data model;",
            ),
            a(
                "D-2",
                "Data Integration: production connectors loading shipment, carrier and warehouse data from "
                "Customer's systems into the Platform at least every fifteen minutes;",
            ),
            a(
                "D-3",
                "Forecasting Models: lane-level weekly volume forecasts for Customer's top 150 freight lanes, "
                "with documented accuracy on a twelve-week holdout period;",
            ),
            a(
                "D-4",
                "Dashboards: carrier performance, lane cost and capacity dashboards for up to 250 named users; and",
            ),
            a(
                "D-5",
                "Training and Runbook: four training sessions for Customer personnel and an operations "
                "runbook for the managed service.",
            ),
        ],
    ),
    (
        "4",
        "Fees",
        [
            "Customer shall pay the following one-time milestone Fees upon acceptance of the relevant Deliverable:",
            "@MILESTONE_TABLE",
            "After acceptance of Deliverable D-4, Customer shall pay the following recurring and rate-based Fees:",
            "@RECURRING_TABLE",
        ],
    ),
    (
        "5",
        "Key Personnel and Governance",
        [
            "Provider's Key Personnel are Priya Anand-Castellanos (Engagement Lead) and Tomasz Iwanicki (Lead "
            "Data Engineer). Customer's project manager is Renata Sollberg, Director of Network Planning. The "
            "executive sponsors for the purposes of Section 16.2 of the Agreement are Provider's Chief "
            "Operating Officer and Customer's Chief Financial Officer. The Parties shall hold a steering committee "
            "meeting every month during implementation and every quarter thereafter."
        ],
    ),
    (
        "6",
        "Assumptions",
        [
            "The Fees assume that Customer provides read access to its transportation and warehouse management "
            "systems by April 15, 2025 and that no more than three source systems are integrated. Changes to these "
            "assumptions are handled in accordance with Section 2.3 of the Agreement."
        ],
    ),
]

MILESTONE_TABLE = [
    ["Milestone", "Deliverable", "Target Date", "Fee (USD)"],
    ["M1 - Discovery complete", "D-1", "May 16, 2025", "42,000"],
    ["M2 - Integration live", "D-2", "July 11, 2025", "96,000"],
    ["M3 - Models accepted", "D-3", "September 5, 2025", "118,000"],
    ["M4 - Dashboards go-live", "D-4", "October 17, 2025", "74,000"],
    ["M5 - Training and handover", "D-5", "November 14, 2025", "20,000"],
    ["Total one-time Fees", "", "", "350,000"],
]

RECURRING_TABLE = [
    ["Item", "Basis", "Fee (USD)"],
    ["Platform subscription (up to 250 named users)", "per month", "21,000"],
    ["Managed analytics service", "per month", "48,500"],
    ["Additional named users", "per user per month", "85"],
    ["Principal consultant (change orders)", "per hour", "285"],
    ["Data engineer (change orders)", "per hour", "210"],
    ["Analyst (change orders)", "per hour", "165"],
]

SCHEDULE_1_INTRO = (
    "This Schedule 1 forms part of the Agreement and sets out the Service Levels referred to in Section 2.8 "
    "of the Agreement."
)

SCHEDULE_1 = [
    (
        "1",
        "Definitions",
        [
            '"Monthly Availability" means, for a calendar month, the total minutes in the month less the minutes '
            "of Downtime, divided by the total minutes in the month less the minutes of Scheduled Maintenance, "
            'expressed as a percentage. "Downtime" means any period during which the production Platform is '
            "unavailable to Customer's users, as measured by Provider's external monitoring at one-minute "
            "intervals, excluding Scheduled Maintenance and unavailability caused by Customer's systems or by a "
            "Force Majeure Event."
        ],
    ),
    (
        "2",
        "Availability Commitment",
        [
            "Provider shall make the production Platform available with a Monthly Availability of at least 99.9% "
            "in each calendar month."
        ],
    ),
    (
        "3",
        "Scheduled Maintenance",
        [
            "Scheduled Maintenance means maintenance performed on Sundays between 02:00 and 06:00 Eastern Time, "
            "of which Provider has given Customer at least forty-eight (48) hours' notice. Scheduled Maintenance "
            "shall not exceed eight hours in any calendar month."
        ],
    ),
    (
        "4",
        "Incident Response",
        [
            "Provider shall respond to and resolve incidents reported by Customer within the following times, "
            "measured from the time the incident is reported:",
            "@SEVERITY_TABLE",
        ],
    ),
    (
        "5",
        "Service Credits",
        [
            "If Monthly Availability in a calendar month falls below the commitment in paragraph 2, Provider shall "
            "credit Customer with the following percentage of the monthly Platform subscription Fee for that "
            "month:",
            "@CREDIT_TABLE",
            "Provider shall apply service credits to the next invoice, or pay them to Customer if no further invoice "
            "is due. Customer need not request a service credit for it to apply.",
        ],
    ),
    (
        "6",
        "Chronic Failure",
        [
            "If Monthly Availability is below 99.0% in three (3) consecutive calendar months, the failure is a "
            "material breach that is not capable of cure, and Customer may terminate the affected Statement of "
            "Work under Section 12.4 of the Agreement without a cure period."
        ],
    ),
    (
        "7",
        "Reporting",
        [
            "Provider shall deliver to Customer, by the fifth Business Day of each month, a report showing the "
            "Monthly Availability, all incidents and their response and resolution times, and any service credits "
            "for the previous month."
        ],
    ),
]

SEVERITY_TABLE = [
    ["Severity", "Description", "Response", "Resolution Target"],
    ["Severity 1", "Platform unavailable or data loss for all users", "30 minutes", "4 hours"],
    ["Severity 2", "Major function impaired, no workaround", "1 hour", "1 Business Day"],
    ["Severity 3", "Function impaired, workaround available", "4 business hours", "5 Business Days"],
    ["Severity 4", "Question or cosmetic defect", "1 Business Day", "Next scheduled release"],
]

CREDIT_TABLE = [
    ["Monthly Availability", "Service Credit"],
    ["Less than 99.9% but at least 99.5%", "5%"],
    ["Less than 99.5% but at least 99.0%", "10%"],
    ["Less than 99.0% but at least 98.0%", "15%"],
    ["Less than 98.0%", "25%"],
]

TABLES = {
    "@MILESTONE_TABLE": MILESTONE_TABLE,
    "@RECURRING_TABLE": RECURRING_TABLE,
    "@SEVERITY_TABLE": SEVERITY_TABLE,
    "@CREDIT_TABLE": CREDIT_TABLE,
}

# Facts for expected.json: (question, expected verbatim substring, section label). Pages are computed.
FACTS = [
    ("What is the notice period for termination for convenience?", "ninety (90) days' prior written notice", "12.3"),
    (
        "What is the cap on each party's liability?",
        "the twelve (12) months preceding the event giving rise to the claim",
        "9.1",
    ),
    ("Which law governs the agreement?", "laws of the State of Delaware", "16.1"),
    (
        "How long do the confidentiality obligations survive after termination?",
        "continue for five (5) years after the expiration or termination",
        "4.5",
    ),
    ("What commercial general liability insurance must the Provider carry?", "USD 2,000,000 per occurrence", "10.1"),
    ("What is the initial term of the agreement?", "initial term of three (3) years", "12.1"),
    ("When are invoices due for payment?", "within forty-five (45) days after Customer's receipt", "3.4"),
    (
        "What happens if a party undergoes a change of control?",
        "the other Party may terminate this Agreement by written notice",
        "13.2",
    ),
    ("How often may Customer audit Provider's records?", "no more than once per Contract Year", "11.2"),
    ("What uptime does the Provider commit to?", "Monthly Availability of at least 99.9%", "Schedule 1, paragraph 2"),
]

# Strings that must occur exactly once in the whole extracted document (the one-fact-one-place rule).
UNIQUE_STRINGS = [
    "ninety",
    "(90)",
    "forty-five (45)",
    "five (5) years",
    "three (3) years",
    "State of Delaware",
    "2,000,000",
    "sixty (60)",
    "thirty (30) days after",
    "99.9% in",
]

# ---------------------------------------------------------------------------------------------------
# Typesetting
# ---------------------------------------------------------------------------------------------------


def markup(text: str) -> str:
    """Escape for reportlab's paragraph mini-language, then turn **x** into bold."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escape(text))


def headings() -> list[tuple[str, str]]:
    """(label, heading text as it appears in the document), in document order."""
    out: list[tuple[str, str]] = [("Article 1", "ARTICLE 1 DEFINITIONS")]
    out.extend((f"1.{n}", f'1.{n} "{term}"') for n, (term, _) in enumerate(DEFINITIONS, start=1))
    for art in ARTICLES:
        out.append((f"Article {art.num}", f"ARTICLE {art.num} {art.title}"))
        out.extend((sec.num, f"{sec.num} {sec.title}.") for sec in art.sections)
    out.append(("Exhibit A", "EXHIBIT A STATEMENT OF WORK NO. 1"))
    out.extend((f"Exhibit A, paragraph {n}", f"{n}. {t}") for n, t, _ in EXHIBIT_A)
    out.append(("Schedule 1", "SCHEDULE 1 SERVICE LEVELS"))
    out.extend((f"Schedule 1, paragraph {n}", f"{n}. {t}") for n, t, _ in SCHEDULE_1)
    return out


def build_pdf(out: Path) -> int:
    """Typeset the contract into ``out``; returns the page count."""
    from reportlab import rl_config
    from reportlab.lib import colors
    from reportlab.lib.enums import TA_CENTER, TA_JUSTIFY, TA_LEFT
    from reportlab.lib.pagesizes import LETTER
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.lib.units import inch
    from reportlab.platypus import (
        BaseDocTemplate,
        CondPageBreak,
        Frame,
        KeepTogether,
        PageBreak,
        PageTemplate,
        Paragraph,
        Spacer,
        Table,
        TableStyle,
    )

    rl_config.invariant = 1

    body = ParagraphStyle(
        "Body", fontName="Times-Roman", fontSize=10.5, leading=12.5, alignment=TA_JUSTIFY, spaceAfter=4
    )
    styles = {
        "body": body,
        "cont": ParagraphStyle("Cont", parent=body, firstLineIndent=0),
        "sub1": ParagraphStyle("Sub1", parent=body, leftIndent=0.6 * inch, bulletIndent=0.3 * inch, spaceAfter=4),
        "sub2": ParagraphStyle("Sub2", parent=body, leftIndent=0.9 * inch, bulletIndent=0.6 * inch, spaceAfter=4),
        "subwide": ParagraphStyle(
            "SubWide", parent=body, leftIndent=0.75 * inch, bulletIndent=0.3 * inch, spaceAfter=4
        ),
        "sub1ragged": ParagraphStyle(
            "Sub1Ragged", parent=body, leftIndent=0.6 * inch, bulletIndent=0.3 * inch, spaceAfter=4, alignment=TA_LEFT
        ),
        "defn": ParagraphStyle("Defn", parent=body, leftIndent=0.3 * inch),
        "title": ParagraphStyle(
            "Title", fontName="Times-Bold", fontSize=18, leading=22, alignment=TA_CENTER, spaceAfter=6
        ),
        "subtitle": ParagraphStyle(
            "Subtitle", fontName="Times-Roman", fontSize=11, leading=14, alignment=TA_CENTER, spaceAfter=18
        ),
        "party": ParagraphStyle(
            "Party", fontName="Times-Roman", fontSize=11, leading=14, alignment=TA_CENTER, spaceAfter=4
        ),
        "between": ParagraphStyle(
            "Between",
            fontName="Times-Italic",
            fontSize=10.5,
            leading=14,
            alignment=TA_CENTER,
            spaceAfter=10,
            spaceBefore=6,
        ),
        "article": ParagraphStyle(
            "Article",
            fontName="Times-Bold",
            fontSize=11,
            leading=14,
            alignment=TA_CENTER,
            spaceBefore=12,
            spaceAfter=8,
            keepWithNext=1,
        ),
        "exhibit": ParagraphStyle(
            "Exhibit", fontName="Times-Bold", fontSize=13, leading=16, alignment=TA_CENTER, spaceAfter=8, keepWithNext=1
        ),
        "para": ParagraphStyle(
            "Para", parent=body, fontName="Times-Bold", spaceBefore=4, spaceAfter=4, keepWithNext=1, alignment=0
        ),
        "cell": ParagraphStyle("Cell", fontName="Times-Roman", fontSize=9.5, leading=11),
        "cellhead": ParagraphStyle("CellHead", fontName="Times-Bold", fontSize=9.5, leading=11),
        "sig": ParagraphStyle("Sig", fontName="Times-Roman", fontSize=10.5, leading=15),
    }

    def P(text: str, style: str = "body", **kw) -> Paragraph:
        return Paragraph(markup(text), styles[style], **kw)

    def body_items(items: list, first_prefix: str = "") -> list:
        flow = []
        for n, item in enumerate(items):
            if isinstance(item, Sub) and not item.label.isalpha():
                flow.append(P(item.text, "subwide", bulletText=item.label))  # e.g. D-1 in Exhibit A
            elif isinstance(item, Sub):
                style = f"sub{item.level}" + ("ragged" if item.ragged else "")
                flow.append(P(item.text, style, bulletText=f"({item.label})"))
            elif isinstance(item, str) and item in TABLES:
                # keep a table with the sentence that introduces it
                lead = [flow.pop()] if flow and isinstance(flow[-1], Paragraph) else []
                flow.append(KeepTogether(lead + [make_table(TABLES[item]), Spacer(1, 8)]))
            elif n == 0 and first_prefix:
                flow.append(Paragraph(first_prefix + markup(item), body))
            else:
                flow.append(P(item, "cont"))
        return flow

    def make_table(rows: list[list[str]]) -> Table:
        ncols = len(rows[0])
        width = 6.5 * inch
        if ncols == 4:
            widths = [0.14 * width, 0.44 * width, 0.17 * width, 0.25 * width]
            if rows is MILESTONE_TABLE:
                widths = [0.4 * width, 0.16 * width, 0.26 * width, 0.18 * width]
        elif ncols == 3:
            widths = [0.5 * width, 0.3 * width, 0.2 * width]
        else:
            widths = [0.7 * width, 0.3 * width]
        data = [
            [Paragraph(markup(c), styles["cellhead" if r == 0 or row[0].startswith("Total") else "cell"]) for c in row]
            for r, row in enumerate(rows)
        ]
        t = Table(data, colWidths=widths, repeatRows=1, hAlign="CENTER")
        t.setStyle(
            TableStyle(
                [
                    ("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                    ("BACKGROUND", (0, 0), (-1, 0), colors.Color(0.88, 0.88, 0.88)),
                    ("VALIGN", (0, 0), (-1, -1), "TOP"),
                    ("TOPPADDING", (0, 0), (-1, -1), 2),
                    ("BOTTOMPADDING", (0, 0), (-1, -1), 3),
                ]
            )
        )
        return t

    def make_story() -> list:
        """A fresh story each time: flowables are consumed by a build."""
        story: list = []
        # Title block
        story += [
            Spacer(1, 0.3 * inch),
            P(TITLE_BLOCK["title"], "title"),
            P(TITLE_BLOCK["date"], "subtitle"),
            P("between", "between"),
        ]
        for n, (name, kind, addr, short) in enumerate(TITLE_BLOCK["parties"]):
            if n:
                story.append(P("and", "between"))
            story.append(P(f"**{name}**,", "party"))
            story.append(P(f"{kind}, with its principal office at", "party"))
            story += [P(line, "party") for line in addr]
            story.append(P(short, "party"))
        story += [Spacer(1, 0.25 * inch), P(PREAMBLE), P("RECITALS", "article")]
        story += [P(r) for r in RECITALS]
        story.append(P(NOW_THEREFORE))

        # Article 1
        story += [P("ARTICLE 1 DEFINITIONS", "article"), P(DEFINITIONS_INTRO)]
        for n, (term, meaning) in enumerate(DEFINITIONS, start=1):
            story.append(P(f'1.{n} **"{term}"** {meaning}', "defn"))

        # Articles 2..18
        for art in ARTICLES:
            story.append(CondPageBreak(1.3 * inch))
            story.append(P(f"ARTICLE {art.num} {art.title}", "article"))
            for sec in art.sections:
                prefix = f"<b>{markup(sec.num)} {markup(sec.title)}.</b> "
                story += body_items(sec.body, first_prefix=prefix)

        # Signature block
        story.append(Spacer(1, 10))
        sig_cells = []
        for company, person, title in SIGNATORIES:
            sig_cells.append(
                [
                    P(f"**{company}**", "sig"),
                    Spacer(1, 22),
                    P("By: ______________________________", "sig"),
                    P(f"Name: {person}", "sig"),
                    P(f"Title: {title}", "sig"),
                    P("Date: ____________________________", "sig"),
                ]
            )
        sig_table = Table([sig_cells], colWidths=[3.25 * inch, 3.25 * inch])
        sig_table.setStyle(TableStyle([("VALIGN", (0, 0), (-1, -1), "TOP"), ("LEFTPADDING", (0, 0), (-1, -1), 0)]))
        story.append(KeepTogether([P(SIGNATURE_INTRO), Spacer(1, 12), sig_table]))

        # Exhibit A
        story += [PageBreak(), P("EXHIBIT A STATEMENT OF WORK NO. 1", "exhibit"), P(EXHIBIT_A_INTRO)]
        for num, title, items in EXHIBIT_A:
            story.append(P(f"{num}. {title}", "para"))
            story += body_items(items)
        # Schedule 1
        story += [PageBreak(), P("SCHEDULE 1 SERVICE LEVELS", "exhibit"), P(SCHEDULE_1_INTRO)]
        for num, title, items in SCHEDULE_1:
            story.append(P(f"{num}. {title}", "para"))
            story += body_items(items)
        return story

    def header(canv, doc):
        """Running header (pages 2+), drawn before the page body so it extracts first."""
        if doc.page > 1:
            w, h = LETTER
            canv.saveState()
            canv.setFont("Times-Italic", 8.5)
            canv.drawString(inch, h - 0.6 * inch, SHORT_TITLE)
            canv.setLineWidth(0.4)
            canv.line(inch, h - 0.66 * inch, w - inch, h - 0.66 * inch)
            canv.restoreState()

    def footer(total: int):
        """Footer drawn after the page body so "Page N of M" extracts last."""

        def draw(canv, doc):
            w, _ = LETTER
            canv.saveState()
            canv.setFont("Times-Roman", 8.5)
            canv.drawString(inch, 0.55 * inch, FOOTER_NOTE)
            canv.drawRightString(w - inch, 0.55 * inch, f"Page {doc.page} of {total}")
            canv.restoreState()

        return draw

    def make_doc(target, total: int) -> BaseDocTemplate:
        doc = BaseDocTemplate(
            target,
            pagesize=LETTER,
            leftMargin=inch,
            rightMargin=inch,
            topMargin=0.9 * inch,
            bottomMargin=0.85 * inch,
            title="Master Services Agreement (fictional sample)",
            author="docpipe sample generator",
            subject=SHORT_TITLE,
            creator="docpipe samples/make_sample.py",
            keywords="fictional, sample, contract",
            invariant=1,
        )
        frame = Frame(
            doc.leftMargin,
            doc.bottomMargin,
            doc.width,
            doc.height,
            id="body",
            leftPadding=0,
            rightPadding=0,
            topPadding=0,
            bottomPadding=0,
        )
        doc.addPageTemplates([PageTemplate(id="page", frames=[frame], onPage=header, onPageEnd=footer(total))])
        return doc

    # Pass 1 counts pages; pass 2 writes the file with "Page N of M". Header and footer are drawn on the
    # canvas, not as flowables, so both passes lay out identically.
    doc = make_doc(io.BytesIO(), 0)
    doc.build(make_story())
    total = doc.page
    doc = make_doc(str(out), total)
    doc.build(make_story())
    if doc.page != total:
        raise RuntimeError(f"page count changed between passes: {total} -> {doc.page}")
    return total


# ---------------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------------


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def extract_pages(pdf: Path) -> list[str]:
    from pypdf import PdfReader

    return [norm(p.extract_text() or "") for p in PdfReader(str(pdf)).pages]


def locate(pages: list[str]) -> tuple[str, list[int], dict[str, int]]:
    """Join pages; return (text, page start offsets, {heading label: offset}). Raises if a heading is absent
    or occurs more than once."""
    starts, parts, pos = [], [], 0
    for p in pages:
        starts.append(pos)
        parts.append(p)
        pos += len(p) + 1
    text = " ".join(parts)
    where: dict[str, int] = {}
    for label, heading in headings():
        n = text.count(heading)
        if n != 1:
            raise AssertionError(f"heading {heading!r} found {n} times in extracted text (want 1)")
        where[label] = text.index(heading)
    return text, starts, where


def section_at(offset: int, where: dict[str, int]) -> str:
    """The innermost heading label at ``offset``: the last section/paragraph heading before it."""
    best, best_pos = "", -1
    for label, pos in where.items():
        if label.startswith("Article ") or label in ("Exhibit A", "Schedule 1"):
            continue
        if best_pos < pos <= offset:
            best, best_pos = label, pos
    return best


def compute_expected(pdf: Path) -> list[dict]:
    pages = extract_pages(pdf)
    text, starts, where = locate(pages)
    out = []
    for question, expected, section in FACTS:
        n = text.count(expected)
        if n != 1:
            raise AssertionError(f"expected string {expected!r} occurs {n} times (want exactly 1)")
        off = text.index(expected)
        page = max(k for k, s in enumerate(starts) if s <= off) + 1
        if expected not in pages[page - 1]:
            raise AssertionError(f"{expected!r} spans a page break near page {page}")
        found = section_at(off, where)
        if found != section:
            raise AssertionError(f"{expected!r} is in section {found!r}, FACTS says {section!r}")
        out.append({"question": question, "expected": expected, "page": page, "section": section})
    return out


def check(expected_path: Path, bundled: Path) -> list[str]:
    """Regenerate to a temp file and verify expected.json against it. Returns a list of problems."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "msa.pdf"
        build_pdf(fresh)
        pages = extract_pages(fresh)
        try:
            text, _, where = locate(pages)
        except AssertionError as exc:
            return [str(exc)]
        for s in UNIQUE_STRINGS:
            n = text.count(s)
            if n != 1:
                problems.append(f"{s!r} occurs {n} times in the document (want exactly 1)")
        try:
            entries = json.loads(expected_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return problems + [f"cannot read {expected_path}: {exc}"]
        for e in entries:
            exp, page, sec = e.get("expected", ""), e.get("page"), e.get("section")
            if not isinstance(page, int) or not 1 <= page <= len(pages):
                problems.append(f"{exp!r}: page {page!r} out of range 1..{len(pages)}")
                continue
            if norm(exp) not in pages[page - 1]:
                problems.append(f"{exp!r}: not found on page {page}")
                continue
            if text.count(norm(exp)) != 1:
                problems.append(f"{exp!r}: occurs {text.count(norm(exp))} times in the document (want 1)")
                continue
            found = section_at(text.index(norm(exp)), where)
            if found != sec:
                problems.append(f"{exp!r}: in section {found!r}, expected.json says {sec!r}")
        if bundled.exists():
            if extract_pages(bundled) != pages:
                problems.append(f"{bundled.name} is stale: its text differs from a fresh build; regenerate it")
            elif bundled.read_bytes() != fresh.read_bytes():
                print(
                    f"note: {bundled.name} text matches but bytes differ (different reportlab version?)",
                    file=sys.stderr,
                )
        else:
            problems.append(f"{bundled} does not exist; run make_sample.py")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help="output PDF (default: master_services_agreement.pdf next to this script)",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="regenerate to a temp file and verify expected.json (and the bundled PDF) against it",
    )
    ap.add_argument(
        "--write-expected", action="store_true", help="after generating, recompute pages and write expected.json"
    )
    ap.add_argument("--expected", type=Path, default=EXPECTED_JSON, help="path of expected.json")
    args = ap.parse_args(argv)

    if args.check:
        problems = check(args.expected, args.out)
        for p in problems:
            print(f"FAIL: {p}", file=sys.stderr)
        if problems:
            return 1
        print(f"OK: {args.expected.name} matches a fresh build of {args.out.name}")
        return 0

    args.out.parent.mkdir(parents=True, exist_ok=True)
    pages = build_pdf(args.out)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(f"wrote {args.out} ({pages} pages, sha256 {digest})")
    if args.write_expected:
        entries = compute_expected(args.out)
        args.expected.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.expected} ({len(entries)} facts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
