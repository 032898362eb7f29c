"""A page of a stored PDF as an image, with a quote marked on it: what a reviewer checks a citation against.

`render_page` renders one page with pypdfium2, finds the quote's characters in pdfium's own text of that page
(tolerant of whitespace, line-break hyphens, ligatures and curly quotes; failing that, the citation's
`highlight` sentence, then the start of the quote) and draws translucent marks over their boxes with PIL.
`show_citation` does it for a `Citation` of a `Document` the caller already may read (the tabs check that).

The PDF is untrusted: like extraction, the work runs in a ``python -I`` child process, at a lower CPU priority,
with a memory cap, and is killed at `RENDER_TIMEOUT_S`; the page number is checked, the scale capped and the
image bounded in pixels. The child's reply is a JSON header and the PNG it drew (no pickle comes back from the
process that parsed the PDF), and the PNG is checked against the size it claims before it is opened.
"""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import struct
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe import DocpipeError, InputError

if TYPE_CHECKING:
    from PIL import Image

    from docpipe import Citation, DocPipe, Document

__all__ = [
    "DEFAULT_SCALE",
    "MAX_PIXELS",
    "MAX_SCALE",
    "RENDER_TIMEOUT_S",
    "PageView",
    "locate",
    "normalise",
    "render_page",
    "show_citation",
]

logger = logging.getLogger(__name__)

DEFAULT_SCALE = 1.5  # 108 dpi: a Letter page is 918 x 1188 pixels, quotes readable at a glance
MAX_SCALE = 3.0
MAX_SIDE_PX = 2400  # a page with a giant MediaBox is drawn smaller, never bigger than this
MAX_PIXELS = 6_000_000
RENDER_TIMEOUT_S = 20.0
RENDER_MEMORY_MB = 1024
MAX_PDF_BYTES = 512 * 1024 * 1024
MAX_PAGE_CHARS = 200_000  # pdfium's characters on one page searched for the quote; past that it is not marked
MAX_MARKS = 200  # rectangles drawn for one quote (one per line of it)
MARK_FILL = (255, 200, 0, 90)  # translucent yellow over the quoted characters
MARK_EDGE = (214, 120, 0, 255)

# Dropped when comparing a quote with the page: pdfium's line-break hyphen (U+FFFE), soft and hard hyphens.
_IGNORED = {"\ufffe", "\u00ad", "-", "\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\x02"}
_SAME = {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00a0": " "}
_PREFIXES = (120, 60, 30)  # normalised characters of the quote's start tried when the whole is not found


@dataclass(frozen=True, slots=True)
class PageView:
    """One rendered page: the PNG, its 1-based number of `pages`, the rectangles marked (pixels: left, top,
    right, bottom), what was found (``quote``, ``highlight``, ``prefix`` or ``""``) and a caption saying so."""

    png: bytes
    page: int
    pages: int
    width: int
    height: int
    boxes: tuple[tuple[int, int, int, int], ...]
    matched: str
    caption: str

    def image(self) -> Image.Image:
        """Returns the page as a PIL image (RGB)."""
        from PIL import Image

        with Image.open(io.BytesIO(self.png)) as img:
            return img.convert("RGB")


def normalise(text: str) -> tuple[str, list[int]]:
    """Returns `text` folded for matching (no whitespace or hyphens, case-folded, NFKC: ligatures split,
    curly quotes straight) and, for each character of it, the index of the character of `text` it came from."""
    out: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        char = _SAME.get(char, char)
        if char in _IGNORED or char.isspace():
            continue
        for folded in unicodedata.normalize("NFKC", char).casefold():
            if folded.isspace() or folded in _IGNORED:
                continue
            out.append(folded)
            where.append(index)
    return "".join(out), where


def locate(page_text: str, quote: str, highlight: str = "") -> tuple[int, int, str] | None:
    """Returns (first, last, what) indexes into `page_text` of the quote (``quote``), else of its `highlight`
    sentence (``highlight``), else of the longest start of the quote tried (``prefix``); None if none is there."""
    text, where = normalise(page_text)
    if not text:
        return None
    tries: list[tuple[str, str]] = []
    whole = normalise(quote)[0]
    if whole:
        tries.append((whole, "quote"))
    marked = normalise(highlight)[0]
    if marked:
        tries.append((marked, "highlight"))
    tries += [(whole[:size], "prefix") for size in _PREFIXES if len(whole) > size]
    for needle, what in tries:
        at = text.find(needle)
        if at >= 0:
            return where[at], where[at + len(needle) - 1], what
    return None


def _scale(width_pt: float, height_pt: float, scale: float) -> float:
    """Returns `scale` capped at MAX_SCALE and to what keeps the image within MAX_SIDE_PX and MAX_PIXELS."""
    scale = min(max(float(scale), 0.1), MAX_SCALE)
    width_pt, height_pt = max(width_pt, 1.0), max(height_pt, 1.0)
    scale = min(scale, MAX_SIDE_PX / width_pt, MAX_SIDE_PX / height_pt)
    return min(scale, (MAX_PIXELS / (width_pt * height_pt)) ** 0.5)


def _caption(page: int, pages: int, matched: str, wanted: bool, lines: int) -> str:
    where = f"Page {page} of {pages}"
    plural = "s" if lines != 1 else ""
    if not wanted:
        return f"{where}."
    if matched == "quote":
        return f"{where}: the quote is marked ({lines} line{plural})."
    if matched == "highlight":
        return (
            f"{where}: the quote's key sentence is marked ({lines} line{plural}); the whole quote was not found here."
        )
    if matched == "prefix":
        return (
            f"{where}: the start of the quote is marked ({lines} line{plural}); the rest was not found on this page "
            "(it may continue on the next)."
        )
    return f"{where}: the quote could not be located on this page; it is shown unmarked."


def render_page(
    pdf: bytes,
    page: int,
    quote: str = "",
    *,
    highlight: str = "",
    password: str | None = None,
    scale: float = DEFAULT_SCALE,
    timeout_s: float = RENDER_TIMEOUT_S,
    memory_limit_mb: int = RENDER_MEMORY_MB,
    ocr: tuple[str, tuple[tuple[int, int, float, float, float, float], ...]] | None = None,
) -> PageView:
    """Returns page `page` (1-based) of the PDF `pdf` rendered at `scale` (capped), with `quote` marked where it
    is found on the page (see `locate`); the caption says when it is not. A scanned page has no text of its own:
    `ocr` gives the text OCR read from it and its word boxes (`Page.text`, `Page.words`), and the quote is
    found in that text and marked over the words' boxes. Raises `InputError` for a page the PDF does not have or
    a password that does not open it, `DocpipeError` when rendering fails or takes longer than `timeout_s`."""
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise InputError(f"page {page!r} is not a page number: pages are numbered from 1")
    if not isinstance(pdf, (bytes, bytearray)) or not pdf:
        raise InputError("no PDF to render")
    if len(pdf) > MAX_PDF_BYTES:
        raise InputError(f"the PDF is over {MAX_PDF_BYTES // 1048576} MB: too big to render here")
    request = {
        "sys_path": list(sys.path),
        "pdf": bytes(pdf),
        "page": page,
        "quote": str(quote or "")[:20_000],
        "highlight": str(highlight or "")[:5_000],
        "password": password or None,
        "scale": float(scale),
        "memory_limit_mb": int(memory_limit_mb),
        "timeout_s": float(timeout_s),
        "ocr_text": ocr[0][:MAX_PAGE_CHARS] if ocr else None,
        "ocr_words": [list(w) for w in ocr[1][:20_000]] if ocr else None,
    }
    reply, png = _run_child(request, timeout_s)
    if "error" in reply:
        kind, message = reply["error"]
        raise (InputError if kind == "input" else DocpipeError)(message)
    width, height = int(reply["width"]), int(reply["height"])
    if not (0 < width * height <= MAX_PIXELS) or png[:8] != b"\x89PNG\r\n\x1a\n":
        raise DocpipeError(f"rendering page {page} gave no usable image")
    boxes = tuple(tuple(int(v) for v in box) for box in reply["boxes"][:MAX_MARKS])
    return PageView(
        png=png,
        page=page,
        pages=int(reply["pages"]),
        width=width,
        height=height,
        boxes=boxes,  # type: ignore[arg-type]
        matched=str(reply["matched"]),
        caption=_caption(page, int(reply["pages"]), str(reply["matched"]), bool(quote or highlight), len(boxes))
        + (" The page is a scan read by OCR: check the quote against the image." if ocr else ""),
    )


def show_citation(
    dp: DocPipe, doc: Document, citation: Citation, *, password: str | None = None, scale: float = DEFAULT_SCALE
) -> PageView:
    """Returns the first page of `citation` in `doc` (a document the caller has already checked the user may
    read) with its quote marked. The page must be one of the document's; its PDF comes from the store."""
    pages = len(doc.pages)
    page = citation.page_start
    if isinstance(page, bool) or not isinstance(page, int) or not 1 <= page <= pages:
        raise InputError(f"the citation names page {page!r}, but {doc.name} has pages 1 to {pages}")
    if citation.document_id and citation.document_id != doc.id:
        raise InputError("the citation quotes another document")
    if doc.kind == "docx":
        raise InputError(
            f"{doc.name} is a Word file: it has no pages to show; the citation gives its section and paragraph "
            f"({citation.heading}, {citation.pages})"
        )
    if doc.encrypted and not password:
        raise InputError(f"{doc.name} is encrypted: type its password in the Password field to see its pages")
    data = dp.store.load_source(doc.id)
    if data is None:
        raise InputError(f"{doc.name} is no longer stored: upload it again")
    limit = getattr(getattr(dp.settings, "extraction", None), "memory_limit_mb", RENDER_MEMORY_MB)
    scanned = doc.pages[page - 1]
    return render_page(
        data,
        page,
        citation.quote,
        highlight=citation.highlight,
        password=password,
        scale=scale,
        memory_limit_mb=max(RENDER_MEMORY_MB, int(limit)),
        ocr=(scanned.text, scanned.words) if scanned.status.value == "ocr" and scanned.words else None,
    )


# -- the child process ------------------------------------------------------------------------------------------
# It loads this file by path under a private name (not as docpipe.ui.pageview, which would import Gradio's
# neighbours), ignores Ctrl-C (the parent kills it), and writes only its reply to the reply descriptor.
_BOOTSTRAP = """\
import importlib.util, os, pickle, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
reply_fd = os.dup(1)
os.dup2(2, 1)
request = pickle.load(sys.stdin.buffer)
sys.path[:] = request["sys_path"]
spec = importlib.util.spec_from_file_location("_docpipe_pageview_child", request["module"])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
module._child_main(request, reply_fd)
"""


def _run_child(request: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any], bytes]:
    request = {**request, "module": os.path.abspath(__file__)}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOTSTRAP],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise DocpipeError(f"cannot start the page renderer: {exc}") from exc
    try:
        out, err = proc.communicate(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise DocpipeError(
            f"rendering page {request['page']} took longer than {timeout_s:g} s: the page is too complex to show here"
        ) from None
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if err:
        logger.debug("page renderer %s wrote to stderr: %s", proc.pid, err.decode("utf-8", "replace")[-2000:])
    if len(out) >= 4:
        (size,) = struct.unpack(">I", out[:4])
        if size <= 1 << 20 and len(out) >= 4 + size:
            try:
                reply = json.loads(out[4 : 4 + size])
            except ValueError:
                reply = None
            if isinstance(reply, dict):
                return reply, out[4 + size :]
    raise DocpipeError(
        f"the page renderer stopped without an image (exit code {proc.returncode}): the page may be too large or "
        "damaged to show here"
    )


def _child_main(request: dict[str, Any], reply_fd: int) -> None:
    """Renders the page, marks the quote and writes the reply (4-byte length, JSON header, PNG)."""
    import signal

    if hasattr(signal, "alarm"):
        signal.alarm(int(request["timeout_s"]) + 5)  # dies even if the parent was killed first
    try:
        os.nice(10)
    except (AttributeError, OSError):
        pass
    png = b""
    try:
        import pypdfium2
        from PIL import Image, ImageDraw

        from docpipe.ingest.extract.common import limit_memory  # the extraction worker's cap

        limit_memory(request["memory_limit_mb"])
        header, png = _draw(request, pypdfium2, Image, ImageDraw)
    except _Refused as exc:
        header = {"error": [exc.kind, str(exc)]}
    except MemoryError:
        header = {"error": ["render", "the page needs more memory than the renderer may use: it is not shown"]}
    except Exception as exc:  # a damaged page: the reason, not a traceback, goes to the user
        header = {"error": ["render", f"the page could not be rendered ({type(exc).__name__})"]}
    data = json.dumps(header).encode()
    with os.fdopen(reply_fd, "wb") as out:
        out.write(struct.pack(">I", len(data)) + data + (png if "error" not in header else b""))


def _ocr_boxes(request: dict[str, Any], width: int, height: int) -> tuple[list[tuple[int, int, int, int]], str]:
    """Returns the pixel boxes of the OCR words that hold the quote (found in the OCR text), and what matched."""
    found = locate(str(request["ocr_text"] or ""), request["quote"], request["highlight"])
    if found is None:
        return [], ""
    first, last, matched = found
    boxes: list[tuple[int, int, int, int]] = []
    for word in request["ocr_words"]:
        start, end, left, top, right, bottom = (float(v) for v in word[:6])
        if end <= first or start > last:
            continue
        box = (
            max(int(left * width) - 2, 0),
            max(int(top * height) - 2, 0),
            min(int(right * width) + 2, width),
            min(int(bottom * height) + 2, height),
        )
        if box[2] > box[0] and box[3] > box[1]:
            boxes.append(box)
        if len(boxes) >= MAX_MARKS:
            break
    return boxes, matched


class _Refused(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _draw(request: dict[str, Any], pdfium: Any, image_module: Any, draw_module: Any) -> tuple[dict[str, Any], bytes]:
    import pypdfium2.raw as pdfium_c

    try:
        doc = pdfium.PdfDocument(request["pdf"], password=request["password"])
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            wrong = "the password does not open it" if request["password"] else "it needs its password"
            raise _Refused("input", f"the PDF is encrypted and {wrong}: type the right password") from None
        raise _Refused("render", "the PDF could not be opened to show its page") from None
    pages = len(doc)
    number = request["page"]
    if not 1 <= number <= pages:
        raise _Refused("input", f"page {number} is not in the document: it has pages 1 to {pages}")
    page = doc[number - 1]
    width_pt, height_pt = page.get_size()
    bitmap = page.render(scale=_scale(width_pt, height_pt, request["scale"]))
    if bitmap.width * bitmap.height > MAX_PIXELS:
        raise _Refused("render", "the page is too large to show here")
    img = bitmap.to_pil().convert("RGB")
    boxes: list[tuple[int, int, int, int]] = []
    matched = ""
    if request.get("ocr_words") is not None and (request["quote"] or request["highlight"]):
        boxes, matched = _ocr_boxes(request, img.width, img.height)
    elif request["quote"] or request["highlight"]:
        textpage = page.get_textpage()
        count = textpage.count_chars()
        if 0 < count <= MAX_PAGE_CHARS:
            text = "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(count))
            found = locate(text, request["quote"], request["highlight"])
            if found is not None:
                first, last, matched = found
                convert = bitmap.get_posconv(page)
                for index in range(min(textpage.count_rects(first, last - first + 1), MAX_MARKS)):
                    left, bottom, right, top = textpage.get_rect(index)
                    corners = [convert.to_bitmap(left, top), convert.to_bitmap(right, bottom)]
                    xs, ys = [int(x) for x, _ in corners], [int(y) for _, y in corners]
                    box = (
                        max(min(xs) - 2, 0),
                        max(min(ys) - 2, 0),
                        min(max(xs) + 2, img.width),
                        min(max(ys) + 2, img.height),
                    )
                    if box[2] > box[0] and box[3] > box[1]:
                        boxes.append(box)
    if not boxes:
        matched = ""
    else:
        overlay = image_module.new("RGBA", img.size, (0, 0, 0, 0))
        pen = draw_module.Draw(overlay)
        for box in boxes:
            pen.rectangle(box, fill=MARK_FILL, outline=MARK_EDGE, width=2)
        img = image_module.alpha_composite(img.convert("RGBA"), overlay).convert("RGB")
    out = io.BytesIO()
    img.save(out, format="PNG", optimize=False, compress_level=6)
    header = {"pages": pages, "width": img.width, "height": img.height, "boxes": boxes, "matched": matched}
    return header, out.getvalue()
