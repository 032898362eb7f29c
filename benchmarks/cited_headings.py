"""Cited headings: how often the heading a citation names is not the quoted clause's own, before and after a change
of `docpipe/ingest/sections.py`, side by side in one run.

    .venv/bin/python benchmarks/cited_headings.py                 # cuad-dev and cuad-collection-dev
    .venv/bin/python benchmarks/cited_headings.py --sets cuad-dev --misses 20

A citation shows the heading of the section its quote lies in (`Section.heading`, "(part i of n)" left out). The
measure takes every *numbered sentence* of a contract: a sentence that starts with a clause number, at a line start
or after the end of another sentence on the same line ("4.2 Termination by Anixa. This ...", "Section 7. ...",
"12.3(b) The ...", "7. No waiver ..."). The number is "N." / "Section N" / "ARTICLE N" or a dotted "N.N[.N]",
followed by a capital, a quote or "(" (so "Section 7.3 of this Agreement" and a wrapped "2.5 million" are not
clauses). Left out as no quote a citation would carry: table-of-contents lines (a page number at the end, or a
second clause number before the sentence ends: "16.1 Stock Ownership 16.2 Compliance"), a short title line right
above another numbered line ("4. Term and Termination" over "4.1 Term. ..."), and wrapped references ("Section
12.1(f), but ...", "10.2 (Products Liability Indemnity) for ..."). For each numbered sentence the measure compares
its clause number with the number that starts the heading of the section holding it:

- *same*: the heading carries the quote's own number ("4.2 Termination by Anixa" for "4.2 ...");
- *enclosing*: the heading names a clause that holds it ("4. Term and Termination" for "4.2 ...");
- *inner*: the heading names one of its sub-clauses ("4.1 Term" for the title line "4. Term and Termination");
- *other*: the heading names another clause ("4.1 Term" for "4.2 ..."): the citation points at the wrong clause;
- *unnumbered*: the heading has no number ("Preamble", "EXHIBIT A", "GOVERNING LAW").

The mismatch share is 1 - same / numbered sentences; the wrong-clause share is other / numbered sentences; both are
also given for the dotted numbers alone ("4.2", "9.3.1": sub-clauses, never list items, which a plain "3." inside
a clause can be). Each contract is extracted once as ingestion does it (default settings) and split twice with the
default chunking settings and the real token counter: BEFORE with the sectioner (`docpipe/ingest/sections.py`, and
`headings.py` where the revision has it) at a git revision, AFTER with the working tree. Results go to
docs/benchmarks/cited_headings.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe.errors import DocpipeError
from docpipe.ingest import sections as after
from docpipe.ingest.extract import extract_pages
from docpipe.ingest.headings import roman_value
from docpipe.settings import ChunkingSettings, ExtractionSettings
from docpipe.tokens import get_token_counter
from docpipe.types import Document, Section

EVAL = ROOT.parent / "shared" / "eval"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "cited_headings.json"
SETS = ("cuad-dev", "cuad-collection-dev")
KINDS = ("same", "enclosing", "inner", "other", "unnumbered")
SAMPLES = 2

_PREFIX = r"(?:(?P<word>Section|SECTION|Article|ARTICLE|§)\s*)?"
# A clause number where a sentence starts: "4.2", "12.3(b)", "Section 7", "ARTICLE 5", "7." (one level needs its dot
# or a word before it), then what a clause goes on with (a title, a sentence, a list item), never lowercase.
_CLAUSE = re.compile(_PREFIX + r"(?P<number>\d{1,2}(?:\.\d{1,2}){0,3})(?P<dot>\.)?(?:(?=\()|[^\S\n]+(?=[A-Z\"“(]))")
# After the number, "(" opens a list item ("6. (a) if ...", "12.3(b) The ..."), not a title in brackets
# ("10.2 (Products Liability Indemnity) for ...", a wrapped reference).
_ITEM = re.compile(r"[^\S\n]*\((?:[a-z]{1,4}|\d{1,2})\)")
# Another clause number before the sentence ends: a line of contents ("16.1 Stock Ownership 16.2 Compliance").
_NEXT_NUMBER = re.compile(r"[^.;:\n]*?[^\S\n]\d{1,2}(?:\.\d{1,2})*\.?[^\S\n]+[A-Z]")
_SENTENCE_START = re.compile(r"(?:^|(?<=\n)|(?<=[.;:])[^\S\n]+)[^\S\n]*", re.MULTILINE)
_TOC_LINE = re.compile(r"(?:\.{4,}|[^\S\n]\d{1,3})[^\S\n]*$")
_HEADING_NUMBER = re.compile(_PREFIX + r"(?P<number>\d{1,2}(?:\.\d{1,2}){0,3}|[IVXL]{1,6}\b)")


def committed_sectioner(revision: str) -> ModuleType:
    """Returns docpipe.ingest.sections as committed at `revision`, with the headings module of that revision
    where it has one, loaded as modules of their own (the working tree's stay as they are)."""

    def load(path: str, name: str) -> ModuleType | None:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{path}"], capture_output=True, text=True)
        if shown.returncode != 0:
            return None
        spec = importlib.util.spec_from_loader(name, loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while the class is made
        exec(compile(shown.stdout, f"{revision}:{path}", "exec"), module.__dict__)
        return module

    current = sys.modules.get("docpipe.ingest.headings")
    try:
        headings = load("docpipe/ingest/headings.py", "docpipe_headings_before")
        if headings is not None:
            sys.modules["docpipe.ingest.headings"] = headings  # what that revision's sections.py imports
        sections = load("docpipe/ingest/sections.py", "docpipe_sections_before")
    finally:
        if current is not None:
            sys.modules["docpipe.ingest.headings"] = current
    if sections is None:
        raise SystemExit(f"no docpipe/ingest/sections.py at {revision}")
    return sections


def numbered_sentences(text: str) -> list[tuple[int, tuple[int, ...]]]:
    """Returns (offset, clause number) for each sentence of `text` that starts with a clause number.

    >>> numbered_sentences("4.1 Term. It runs. 4.2 Termination by Anixa. See Section 4.3 of it.\\n7. No waiver.")
    [(0, (4, 1)), (19, (4, 2)), (68, (7,))]
    """
    found = []
    for start in _SENTENCE_START.finditer(text):
        match = _CLAUSE.match(text, start.end())
        if not match or not (match.group("dot") or match.group("word") or "." in match.group("number")):
            continue
        line_end = text.find("\n", match.start())
        line = text[match.start() : len(text) if line_end < 0 else line_end]
        rest = line[match.end() - match.start() :]
        if len(line) <= 120 and _TOC_LINE.search(line) or _NEXT_NUMBER.match(rest):
            continue
        # A title alone on its line over another numbered line is an entry of a table of contents, or an
        # article's title over its first sub-clause, not a sentence that a citation quotes.
        if line_end >= 0 and len(line.split()) <= 8 and _CLAUSE.match(text[line_end:].lstrip()):
            continue
        # "Section 12.1(f), but ..." and "Section 5.2 (Pricing)" wrap references onto a line.
        if rest.lstrip().startswith("(") and (match.group("word") or not _ITEM.match(rest)):
            continue
        found.append((match.start(), tuple(int(part) for part in match.group("number").split("."))))
    return found


def heading_number(heading: str) -> tuple[int, ...] | None:
    """Returns the clause number a cited heading starts with, None when it has none.

    >>> heading_number("4.2 Termination by Anixa (part 2 of 3)"), heading_number("ARTICLE V TERM"), heading_number("Preamble")
    ((4, 2), (5,), None)
    """
    match = _HEADING_NUMBER.match(heading)
    if not match:
        return None
    number = match.group("number")
    if number[0].isdigit():
        return tuple(int(part) for part in number.split("."))
    # Roman numerals number articles only after the word ("ARTICLE IV"); a bare "I" starts a sentence.
    return (roman_value(number),) if match.group("word") and re.fullmatch(r"X{0,3}(?:IX|IV|V?I{0,3})", number) else None


def classify(clause: tuple[int, ...], heading: tuple[int, ...] | None) -> str:
    """Returns how a cited heading's number relates to the quoted clause's own (one of `KINDS`)."""
    if heading is None:
        return "unnumbered"
    if heading == clause:
        return "same"
    if clause[: len(heading)] == heading:
        return "enclosing"
    if heading[: len(clause)] == clause:
        return "inner"
    return "other"


def cited_headings(doc: Document, sections: list[Section]) -> list[dict[str, Any]]:
    """Returns one row per numbered sentence of `doc`: its clause number, the heading its section cites and how
    the two relate."""
    rows = []
    ordered = sorted(sections, key=lambda s: s.start)
    position = 0
    for offset, clause in numbered_sentences(doc.text):
        while position < len(ordered) and ordered[position].end <= offset:
            position += 1
        if position == len(ordered) or ordered[position].start > offset:
            continue  # blank text between sections
        heading = re.sub(r" \(part \d+ of \d+\)$", "", ordered[position].heading)
        rows.append(
            {
                "clause": ".".join(map(str, clause)),
                "heading": heading,
                "kind": classify(clause, heading_number(heading)),
                "page": doc.page_of(offset),
                "sentence": " ".join(doc.text[offset : offset + 80].split()),
            }
        )
    return rows


def measure(module: ModuleType, doc: Document, counter: Any, chunking: ChunkingSettings) -> dict[str, Any]:
    sections = module.split_sections(doc, counter, chunking)
    rows = cited_headings(doc, sections)
    return {
        "sections": len(sections),
        "kinds": dict(Counter(row["kind"] for row in rows)),
        "dotted": dict(Counter(row["kind"] for row in rows if "." in row["clause"])),
        "rows": rows,
    }


def shares(kinds: Counter[str]) -> dict[str, Any]:
    total = sum(kinds.values())
    return {
        "numbered_sentences": total,
        **{kind: kinds[kind] for kind in KINDS},
        "mismatch_share": 1 - kinds["same"] / total if total else 0.0,
        "wrong_clause_share": kinds["other"] / total if total else 0.0,
    }


def run_set(pdfs: list[Path], before: ModuleType, counter: Any, chunking: ChunkingSettings) -> dict[str, Any]:
    files = []
    totals = {"before": Counter[str](), "after": Counter[str]()}
    dotted = {"before": Counter[str](), "after": Counter[str]()}
    sections = {"before": 0, "after": 0}
    started = time.perf_counter()
    for index, pdf in enumerate(pdfs, 1):
        try:
            pages = extract_pages(pdf.read_bytes(), settings=ExtractionSettings(), name=pdf.name)
        except DocpipeError as exc:
            files.append({"file": pdf.name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        doc = Document(id=pdf.stem, name=pdf.name, pages=pages)
        sides = {"before": measure(before, doc, counter, chunking), "after": measure(after, doc, counter, chunking)}
        for side, result in sides.items():
            totals[side].update(result["kinds"])
            dotted[side].update(result["dotted"])
            sections[side] += result["sections"]
        old = {(r["page"], r["sentence"]): r for r in sides["before"]["rows"]}
        changed = [
            {
                "clause": r["clause"],
                "page": r["page"],
                "sentence": r["sentence"],
                "before": old[key]["heading"],
                "after": r["heading"],
                "kinds": f"{old[key]['kind']} -> {r['kind']}",
            }
            for r in sides["after"]["rows"]
            if (key := (r["page"], r["sentence"])) in old and old[key]["heading"] != r["heading"]
        ]
        misses = [r for r in sides["after"]["rows"] if r["kind"] != "same"]
        files.append(
            {
                "file": pdf.name,
                "sections": {side: result["sections"] for side, result in sides.items()},
                "kinds": {side: result["kinds"] for side, result in sides.items()},
                # A few of each, for reading by eye (all of them make the file megabytes long).
                "changed": changed[:SAMPLES],
                "misses_after": misses[:SAMPLES],
                "counts": {"changed": len(changed), "misses_after": len(misses)},
            }
        )
        b, a = shares(Counter(sides["before"]["kinds"])), shares(Counter(sides["after"]["kinds"]))
        print(
            f"[{index:3d}/{len(pdfs)}] {pdf.name[:58]:58s} numbered {a['numbered_sentences']:4d}  "
            f"mismatch {b['mismatch_share']:6.1%} -> {a['mismatch_share']:6.1%}  "
            f"wrong clause {b['wrong_clause_share']:6.1%} -> {a['wrong_clause_share']:6.1%}",
            flush=True,
        )
    return {
        "documents": sum("error" not in f for f in files),
        "errors": sum("error" in f for f in files),
        "seconds": time.perf_counter() - started,
        "sections": sections,
        "before": shares(totals["before"]),
        "after": shares(totals["after"]),
        "dotted": {side: shares(counts) for side, counts in dotted.items()},
        "files": files,
    }


def report(name: str, result: dict[str, Any], misses: int) -> None:
    b, a = result["before"], result["after"]
    print(f"\n{name}: {result['documents']} contracts ({result['errors']} errors), {result['seconds']:.0f} s")
    print(f"{'':22s} {'before':>8s} {'after':>8s}")
    print(f"{'sections':22s} {result['sections']['before']:8d} {result['sections']['after']:8d}")
    for key in ("numbered_sentences", *KINDS):
        print(f"{key:22s} {b[key]:8d} {a[key]:8d}")
    for key in ("mismatch_share", "wrong_clause_share"):
        print(f"{key:22s} {b[key]:8.1%} {a[key]:8.1%}")
    db, da = result["dotted"]["before"], result["dotted"]["after"]
    print(f"{'dotted numbers only':22s} {db['numbered_sentences']:8d} {da['numbered_sentences']:8d}")
    for key in ("mismatch_share", "wrong_clause_share"):
        print(f"{'  ' + key:22s} {db[key]:8.1%} {da[key]:8.1%}")
    rows = [(f["file"], r) for f in result["files"] for r in f.get("misses_after", [])]
    for file, row in rows[:misses]:
        print(
            f"  {row['kind']:10s} {file[:32]:32s} p{row['page']:<3d} {row['clause']:7s} [{row['heading'][:40]}] "
            f"{row['sentence'][:60]}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-dir", type=Path, default=EVAL)
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--before", default="HEAD", help="git revision of the BEFORE sections.py")
    parser.add_argument("--misses", type=int, default=0, help="print this many AFTER headings that do not match")
    args = parser.parse_args()

    chunking = ChunkingSettings()
    counter = get_token_counter(chunking.tokenizer)
    revision = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.before], capture_output=True, text=True
    ).stdout.strip()
    before = committed_sectioner(revision or args.before)
    results = {}
    for name in args.sets:
        pdfs = sorted((args.eval_dir / name / "pdf").glob("*.pdf"))
        if not pdfs:
            print(f"no PDFs in {args.eval_dir / name / 'pdf'}: the CUAD sets live in ../shared/eval", file=sys.stderr)
            return 2
        results[name] = run_set(pdfs, before, counter, chunking)
    for name, result in results.items():
        report(name, result, args.misses)

    out = {
        "benchmark": "cited_headings",
        "command": "python benchmarks/cited_headings.py"
        + (f" --sets {' '.join(args.sets)}" if args.sets != list(SETS) else ""),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "before": f"docpipe/ingest/sections.py at {args.before} ({revision})",
        "after": "docpipe/ingest/sections.py in the working tree",
        "extraction": ExtractionSettings().extractor,
        "chunking": chunking.model_dump(),
        "token_counter": counter.name,
        # Relative to the repository: results must not carry this machine's paths.
        "eval_dir": os.path.relpath(args.eval_dir, ROOT),
        "sets": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
