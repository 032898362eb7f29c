"""Every Python example in the docs runs, and the documentation site builds with warnings as errors.

Each page's ```python blocks (README.md, docs/**/*.md, benchmarks/*.md) run in order in one fresh Python process,
as a reader would paste them: a later block goes on from the names an earlier one made. The process works in a
folder that holds what the examples name (``contract.pdf``: the bundled sample; ``dataroom/``: three
contracts, one of them ``supply.pdf`` and one ``old/draft.pdf``; ``samples/``), with its own store
(``DOCPIPE_HOME``), no config file, the hashing embedder and the extractive engine (the offline default).

A line that needs what this machine lacks (a GPU, a Ray cluster, the Hugging Face Hub) ends with the comment
``# needs <what>: stops here``: the page runs up to that line and no further, so its steps before the GPU are
still checked, and an error in them fails the test. Tracebacks name the page and its line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "benchmarks").glob("*.md")])
FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$", re.DOTALL | re.MULTILINE)
STOP = re.compile(r"#\s*needs [^:\n]+: stops here")

# Runs the blocks sent on stdin in one namespace; each block is compiled under its page's name, padded so that
# a traceback's line numbers are the page's own.
RUNNER = """
import json, sys
namespace = {"__name__": "__main__"}
for block in json.load(sys.stdin):
    code = "\\n" * (block["line"] - 1) + block["code"]
    exec(compile(code, block["page"], "exec"), namespace)
"""


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the block's first code line in the page, 1-based
    code: str
    stops: bool  # the block holds a line that needs what this machine lacks: the page runs up to it


def python_blocks(path: Path, *, name: str | None = None) -> list[Block]:
    """Returns the page's ```python blocks, dedented (a block may sit in a list item), each cut before its
    first line marked ``# needs ...: stops here``; `name` (default: the path in the repository) names the page."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        code = textwrap.dedent(match.group("code"))
        line = text.count("\n", 0, match.start("code")) + 1
        lines = code.splitlines(keepends=True)
        stop = next((i for i, source in enumerate(lines) if STOP.search(source)), None)
        if stop is not None:
            code = "".join(lines[:stop])
        blocks.append(Block(name or str(path.relative_to(ROOT)), line, code, stop is not None))
    return blocks


def runnable(blocks: list[Block]) -> list[Block]:
    """The blocks a page runs: all of them, or up to and including the first that stops."""
    for i, block in enumerate(blocks):
        if block.stops:
            return blocks[: i + 1]
    return blocks


PAGES_WITH_EXAMPLES = [page for page in PAGES if python_blocks(page)]


def _contract(path: Path, title: str, parties: str, clauses: list[tuple[str, str]]) -> None:
    """Writes a one-page contract PDF with numbered clauses."""
    from reportlab.lib.pagesizes import letter
    from reportlab.pdfgen import canvas

    path.parent.mkdir(parents=True, exist_ok=True)
    pdf = canvas.Canvas(str(path), pagesize=letter, invariant=1)
    y = 740
    for text in [title.upper(), parties, *(f"{n}. {heading}. {body}" for n, (heading, body) in enumerate(clauses, 1))]:
        for line in textwrap.wrap(text, 95):
            pdf.drawString(60, y, line)
            y -= 15
        y -= 8
    pdf.save()


@pytest.fixture
def workdir(tmp_path: Path, sample_pdf: Path) -> Path:
    """The folder the examples run in: the files they name, made here."""
    work = tmp_path / "work"
    shutil.copytree(ROOT / "samples", work / "samples")
    shutil.copy(sample_pdf, work / "contract.pdf")
    (work / "dataroom").mkdir()
    shutil.copy(sample_pdf, work / "dataroom" / "services.pdf")
    _contract(
        work / "dataroom" / "supply.pdf",
        "Supply Agreement",
        "This Supply Agreement is made between Acme Corp. (Supplier) and Beta Foods LLC (Buyer).",
        [
            ("Exclusivity", "During the Term, Buyer shall purchase all of its requirements of the Products "
             "exclusively from Supplier and shall not purchase similar products from any third party."),
            ("Term", "This Agreement begins on the Effective Date and continues for three (3) years."),
            ("Governing Law", "This Agreement is governed by the laws of the State of Delaware."),
            ("Change of Control", "Either party may terminate this Agreement upon a change of control of the "
             "other party, by thirty (30) days' written notice."),
        ],
    )  # fmt: skip
    _contract(
        work / "dataroom" / "old" / "draft.pdf",
        "Distribution Agreement (draft)",
        "This draft Distribution Agreement is between Acme Corp. and Gamma Retail Inc.",
        [
            ("Territory", "Distributor may resell the Products in Canada only."),
            ("Governing Law", "This Agreement is governed by the laws of the State of New York."),
        ],
    )
    return work


def _environment(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    env.update(
        DOCPIPE_HOME=str(tmp_path / "home"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # no config.toml of the developer's
        DOCPIPE_EMBEDDING__MODEL="hashing",
        DOCPIPE_ENGINE__BACKEND="extractive",
        PYTHONPATH=str(ROOT),
    )
    return env


@pytest.mark.parametrize("page", PAGES_WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_python_examples_run(page: Path, workdir: Path, tmp_path: Path) -> None:
    blocks = runnable(python_blocks(page))
    payload = json.dumps([{"page": b.page, "line": b.line, "code": b.code} for b in blocks])
    out = subprocess.run(
        [sys.executable, "-c", RUNNER],
        input=payload,
        cwd=workdir,
        env=_environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"an example in {page.relative_to(ROOT)} failed:\n{out.stderr[-4000:]}"


def test_every_python_block_is_found_and_every_stop_is_on_a_line_of_its_own_block() -> None:
    """The extraction sees the examples this test exists for, and a stop marker cuts its block where the
    rest still compiles (a marker inside a loop would run half a loop)."""
    pages = {str(p.relative_to(ROOT)) for p in PAGES_WITH_EXAMPLES}
    assert {"README.md", "docs/python-api.md", "benchmarks/GPU.md"} <= pages, pages
    gpu = python_blocks(ROOT / "benchmarks" / "GPU.md")
    assert any(b.stops for b in gpu), "the GPU recipe marks the line that needs the Hub"
    for page in PAGES_WITH_EXAMPLES:
        for block in python_blocks(page):
            compile(block.code, f"{block.page}:{block.line}", "exec")
            assert "._" not in re.sub(r"#.*", "", block.code).replace("__", ""), (
                f"{block.page}:{block.line} reaches a private name: examples use the public API"
            )


def test_a_failing_example_fails_the_test_before_its_stop(tmp_path: Path) -> None:
    """The marker stops a page only where it stands: an error above it still surfaces."""
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\n```\n\n```python\nraise RuntimeError('above the stop')\n"
        "y = gpu()  # needs a GPU: stops here\n```\n\n```python\nnever = run()\n```\n"
    )
    blocks = python_blocks(page, name="page.md")
    assert [b.stops for b in blocks] == [False, True, False]
    ran = runnable(blocks)
    assert len(ran) == 2 and "gpu()" not in ran[1].code
    payload = json.dumps([{"page": b.page, "line": b.line, "code": b.code} for b in ran])
    out = subprocess.run([sys.executable, "-c", RUNNER], input=payload, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "above the stop" in out.stderr and 'File "page.md", line 6' in out.stderr


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """`mkdocs build --strict`, as `make docs` runs it: a broken link or anchor, a page left out of the nav or
    a docstring the API pages cannot render fails it."""
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    for page in ("index.html", "python-api/index.html", "reference/docpipe/index.html", "gpu/index.html"):
        assert (tmp_path / "site" / page).is_file(), page
    api = (tmp_path / "site" / "reference" / "docpipe" / "index.html").read_text(encoding="utf-8")
    assert 'id="docpipe.DocPipe.ask"' in api and 'id="docpipe.Collection.add"' in api, "the API pages are generated"
