"""Small contract PDFs drawn with reportlab: text that extracts verbatim, for tests that need a contract of their own."""

from __future__ import annotations

import io


def contract_pdf(*paragraphs: str) -> bytes:
    """Returns a small PDF whose text is `paragraphs`, drawn verbatim (markup-like text stays text)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter)
    y = 740
    for paragraph in paragraphs:
        words, line = paragraph.split(), ""
        for word in words:
            if len(line) + len(word) > 85:
                pdf.drawString(60, y, line)
                y, line = y - 16, ""
            line = f"{line} {word}".strip()
        pdf.drawString(60, y, line)
        y -= 28
        if y < 80:
            pdf.showPage()
            y = 740
    pdf.save()
    return buffer.getvalue()


def lines_pdf(*lines: str, compress: bool = True) -> bytes:
    """Returns a PDF with one drawn line per argument (`compress=False`: page streams readable in the bytes)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter, pageCompression=1 if compress else 0)
    y = 740
    for line in lines:
        pdf.drawString(60, y, line)
        y -= 20
        if y < 80:
            pdf.showPage()
            y = 740
    pdf.save()
    return buffer.getvalue()


def contract(title: str, party: str, days: str, law: str, extra: str = "") -> bytes:
    """Returns a three-article contract of `party` with Northwind Buyer: its notice period and governing law."""
    return lines_pdf(
        title.upper(),
        f"This {title} is made between {party} Inc. and Northwind Buyer LLC.",
        "ARTICLE 1 DEFINITIONS",
        f'1.1 "Services" means the services {party} provides. {extra}',
        "ARTICLE 2 TERMINATION",
        f"2.1 Either party may terminate this Agreement for convenience on {days} days written notice.",
        "ARTICLE 3 GOVERNING LAW",
        f"3.1 This Agreement is governed by the laws of {law}.",
    )


# Three contracts alike but for their party, notice period and law: a question naming one is answered from it.
CONTRACTS = {
    "acme-supply.pdf": contract("Supply Agreement", "Acme Widgets", "ninety (90)", "Delaware"),
    "globex-license.pdf": contract("License Agreement", "Globex Software", "thirty (30)", "New York"),
    "initech-services.pdf": contract("Services Agreement", "Initech Consulting", "sixty (60)", "Texas"),
}
NAMED_QUESTION = "What is the notice period for termination for convenience in the Globex Software license agreement?"

# A supply agreement whose key terms are all written out: its term runs to a date and renews unless notice of
# non-renewal is given 90 days before it ends, so it has both deadlines (expiry 2019-05-07, notice 2019-02-06).
DATED_SUPPLY = lines_pdf(
    "SUPPLY AGREEMENT",
    "This Supply Agreement is made as of May 8, 2014 between Acme Widgets Inc. and Northwind Buyer LLC.",
    "ARTICLE 1 TERM",
    "1.1 The term of this Agreement shall commence on May 8, 2014 and continue until May 7, 2019.",
    "1.2 Thereafter this Agreement renews automatically for successive one (1) year terms unless either party "
    "gives written notice of non-renewal at least ninety (90) days prior to the expiration of the then-current term.",
    "ARTICLE 2 GOVERNING LAW",
    "2.1 This Agreement is governed by the laws of the State of New York.",
)

# Three supply agreements alike in every clause but their parties and their numbers: a question that names one
# must be answered from it, not from a look-alike clause of another.
PARTIES = [
    ("Northwind Traders Inc.", "Contoso Pharmaceuticals LLC", "thirty (30)", "Delaware"),
    ("Fabrikam Robotics GmbH", "Tailspin Aviation Ltd", "sixty (60)", "New York"),
    ("Wingtip Toys Corporation", "Adventure Works Cycles Co", "ninety (90)", "California"),
]


def agreement_pdf(seller: str, buyer: str, notice: str, law: str) -> bytes:
    """Returns a one-page supply agreement between `seller` and `buyer` (one of PARTIES)."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    lines = [
        "SUPPLY AGREEMENT",
        f"This Supply Agreement is made between {seller} (the Seller) and {buyer} (the Buyer).",
        "1. DEFINITIONS",
        "1.1 Products means the goods listed in Schedule A.",
        "2. SUPPLY",
        "2.1 The Seller shall supply the Products ordered by the Buyer under purchase orders.",
        "2.2 The Buyer shall pay each invoice within forty-five (45) days of receipt.",
        "3. TERM AND TERMINATION",
        "3.1 This Agreement starts on the Effective Date and runs for three (3) years.",
        f"3.2 Either party may terminate this Agreement for convenience upon {notice} days prior written notice.",
        "4. GOVERNING LAW",
        f"4.1 This Agreement is governed by the laws of the State of {law}.",
        "5. CONFIDENTIALITY",
        "5.1 Each party shall keep the other party's confidential information secret for five (5) years.",
    ]
    buffer = io.BytesIO()
    pdf = canvas.Canvas(buffer, pagesize=letter)
    y = 740
    for line in lines:
        pdf.drawString(60, y, line)
        y -= 22
    pdf.showPage()
    pdf.save()
    return buffer.getvalue()
