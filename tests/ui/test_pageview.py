"""The workbench's page view (`docpipe.ui.pageview`): a stored PDF's page rendered in a bounded child process,
the quote's characters found on it and marked; a quote not on the page said so; bad page numbers, oversized
pages, slow renders and encrypted PDFs without their password refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from docpipe import Citation, DocPipe, DocpipeError, InputError, Settings

pytest.importorskip("gradio", reason="gradio is not installed: pip install 'docpipe-contracts[ui]'")

from docpipe.ui.pageview import MAX_PIXELS, MAX_SCALE, locate, normalise, render_page, show_citation  # noqa: E402

NINETY = "ninety (90) days' prior written notice"


@pytest.fixture(scope="module")
def sample_bytes(sample_pdf: Path) -> bytes:
    return sample_pdf.read_bytes()


def _yellow(image, box) -> int:
    """Returns how many pixels inside `box` are the mark's yellow (red and green high, blue clearly lower)."""
    left, top, right, bottom = box
    count = 0
    for x in range(left, right):
        for y in range(top, bottom):
            r, g, b = image.getpixel((x, y))
            count += r > 200 and g > 150 and b < 190
    return count


def test_the_termination_quote_is_marked_on_page_9(sample_bytes: bytes) -> None:
    view = render_page(sample_bytes, 9, NINETY)
    assert (view.page, view.pages, view.matched) == (9, 15, "quote")
    assert len(view.boxes) == 1 and "the quote is marked (1 line)" in view.caption
    plain = render_page(sample_bytes, 9)
    assert plain.boxes == () and plain.caption == "Page 9 of 15."
    marked, unmarked = view.image(), plain.image()
    assert marked.size == unmarked.size == (view.width, view.height)
    box = view.boxes[0]
    # The mark is drawn where the quote is, and only there: yellow inside the box, the rest of the page as rendered.
    assert _yellow(marked, box) > 0.3 * (box[2] - box[0]) * (box[3] - box[1])
    assert _yellow(unmarked, box) == 0
    assert (
        marked.crop((0, 0, view.width, box[1] - 5)).tobytes() == unmarked.crop((0, 0, view.width, box[1] - 5)).tobytes()
    )


def test_the_quote_is_on_page_9_only(sample_bytes: bytes) -> None:
    found = {page: render_page(sample_bytes, page, NINETY).matched for page in range(1, 16)}
    assert [page for page, matched in found.items() if matched] == [9], found


def test_a_quote_not_on_the_page_is_said_so(sample_bytes: bytes) -> None:
    view = render_page(sample_bytes, 1, NINETY)
    assert view.boxes == () and view.matched == ""
    assert "could not be located on this page" in view.caption and view.width > 0


def test_the_key_sentence_then_the_start_of_the_quote_are_marked_when_the_whole_is_not(sample_bytes: bytes) -> None:
    long_quote = (
        "Either Party may terminate this Agreement, or any Statement of Work, for any reason or no reason upon "
        + NINETY
    )
    view = render_page(sample_bytes, 9, long_quote + " and a sentence this contract never had in it.")
    assert view.matched == "prefix" and view.boxes and "start of the quote is marked" in view.caption
    view = render_page(sample_bytes, 9, "A quote the model made up entirely.", highlight=NINETY)
    assert view.matched == "highlight" and len(view.boxes) == 1 and "key sentence" in view.caption


def test_matching_ignores_whitespace_hyphenation_ligatures_and_curly_quotes() -> None:
    page = "the Provider shall termi-\r\nnate\ufffe the \ufb01ve  agree\u00adments on Customer\u2019s notice"
    first, last, what = locate(page, "shall terminate the five agreements on Customer's notice")
    assert what == "quote" and page[first:].startswith("shall") and page[last] == "e"
    assert locate(page, "nothing like it") is None
    assert normalise("A-b\u00a0C")[0] == "abc"


@pytest.mark.parametrize("page", [0, -1, 16, 10**9, True, "9", 9.0])
def test_a_bad_page_number_is_refused(sample_bytes: bytes, page) -> None:
    with pytest.raises(InputError, match="page"):
        render_page(sample_bytes, page, NINETY)


def test_scale_and_size_are_capped(sample_bytes: bytes, tmp_path: Path) -> None:
    from reportlab.pdfgen import canvas

    view = render_page(sample_bytes, 9, scale=50)
    assert view.width <= 612 * MAX_SCALE + 1 and view.height <= 792 * MAX_SCALE + 1
    # A page 200 inches square would be 43,200 pixels a side at the default scale.
    giant = tmp_path / "giant.pdf"
    pdf = canvas.Canvas(str(giant), pagesize=(14400, 14400))
    pdf.setFont("Helvetica", 400)
    pdf.drawString(720, 7200, "Termination on ninety days notice.")
    pdf.save()
    view = render_page(giant.read_bytes(), 1, "ninety days notice")
    assert view.width * view.height <= MAX_PIXELS and max(view.width, view.height) <= 2400
    assert view.matched == "quote" and view.boxes


def test_a_slow_render_is_stopped(sample_bytes: bytes) -> None:
    with pytest.raises(DocpipeError, match="took longer than"):
        render_page(sample_bytes, 9, NINETY, timeout_s=0.001)


def test_bytes_that_are_not_a_pdf_are_refused() -> None:
    with pytest.raises(DocpipeError, match="could not be opened"):
        render_page(b"%PDF-1.4 this is not really a PDF" * 10, 1)
    with pytest.raises(InputError):
        render_page(b"", 1)


def test_show_citation_checks_the_page_and_the_document(tmp_path: Path, sample_pdf: Path) -> None:
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    doc = dp.ingest(sample_pdf)
    cite = Citation("s050", "12.3", 9, 9, NINETY, True, document_id=doc.id, document_name=doc.name)
    view = show_citation(dp, doc, cite)
    assert view.matched == "quote" and view.page == 9
    with pytest.raises(InputError, match="pages 1 to 15"):
        show_citation(dp, doc, Citation("s050", "12.3", 99, 99, NINETY, True, document_id=doc.id))
    with pytest.raises(InputError, match="another document"):
        show_citation(dp, doc, Citation("s050", "12.3", 9, 9, NINETY, True, document_id="ab" * 32))


def test_an_encrypted_pdf_needs_its_password(tmp_path: Path, eval_dir: Path) -> None:
    locked = eval_dir / "bad-pdfs" / "pypdf-r2-user-password.pdf"
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    doc = dp.ingest(locked, password="asdfzxcv")
    cite = Citation("s001", "", 1, 1, doc.pages[0].text[:40], True, document_id=doc.id)
    with pytest.raises(InputError, match="encrypted"):
        show_citation(dp, doc, cite)
    with pytest.raises(InputError, match="password does not open it"):
        show_citation(dp, doc, cite, password="wrong")
    view = show_citation(dp, doc, cite, password="asdfzxcv")
    assert view.page == 1 and view.width > 0


def test_a_scanned_page_is_marked_from_the_ocr_words(sample_bytes: bytes, tmp_path: Path) -> None:
    """A scan has no text layer: the quote is found in the page's OCR text and marked over its words' boxes."""
    import io

    import pypdfium2

    page = pypdfium2.PdfDocument(sample_bytes)[8]
    scan = io.BytesIO()
    page.render(scale=100 / 72).to_pil().convert("L").save(scan, format="PDF", resolution=100)
    text = "either Party may terminate upon ninety (90) days' prior written notice to the other Party."
    words, at = [], 0
    for n, word in enumerate(text.split()):
        start = text.index(word, at)
        at = start + len(word)
        left = 0.1 + 0.05 * (n % 14)
        words.append((start, at, left, 0.50 + 0.02 * (n // 14), left + 0.04, 0.515 + 0.02 * (n // 14)))
    view = render_page(scan.getvalue(), 1, NINETY, ocr=(text, tuple(words)))
    assert view.matched == "quote" and len(view.boxes) == len(NINETY.split())
    assert "read by OCR" in view.caption
    first = view.boxes[0]  # "ninety" is the 6th word: left 0.35 of the width, top 0.50 of the height
    assert abs(first[0] - int(0.35 * view.width)) <= 3 and abs(first[1] - int(0.50 * view.height)) <= 3
    assert _yellow(view.image(), first) > 0
    unmarked = render_page(scan.getvalue(), 1, NINETY)  # no OCR words: nothing to find on an image
    assert unmarked.boxes == () and "could not be located" in unmarked.caption


def test_a_word_file_has_no_page_to_show(tmp_path: Path) -> None:
    from docpipe import Document, Page

    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    doc = Document(id="ab" * 32, name="draft.docx", pages=[Page(1, "1. Term. One year.")], kind="docx")
    citation = Citation("s001", "1. Term", 1, 1, "One year.", True, unit="paragraph")
    with pytest.raises(InputError, match="Word file: it has no pages to show.*¶ 1"):
        show_citation(dp, doc, citation)
