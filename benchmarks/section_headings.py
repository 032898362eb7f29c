"""Section headings before and after unnumbered-heading detection, on the CUAD contracts, side by side in one run.

    .venv/bin/python benchmarks/section_headings.py            # writes docs/benchmarks/section_headings.json
    .venv/bin/python benchmarks/section_headings.py --collection 60   # also a sample of cuad-collection-dev

Each contract is extracted once, the way ingestion does it (default extraction settings), and split twice with
the default chunking settings and the real token counter: BEFORE with `docpipe/ingest/sections.py` as committed
at git HEAD (loaded from `git show`), AFTER with the working tree. The figure that matters is the share of
sections labelled "Preamble (part i of n)": text that a citation could only name as part of the opening.
Headings that AFTER adds or retitles are listed, for reading them by eye.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a fresh clone without `pip install -e .`
    sys.path.insert(0, str(ROOT))

from docpipe.errors import DocpipeError
from docpipe.ingest import sections as after
from docpipe.ingest.extract import extract_pages
from docpipe.settings import ChunkingSettings, ExtractionSettings
from docpipe.tokens import get_token_counter
from docpipe.types import Document

EVAL = ROOT.parent / "shared" / "eval"
DEFAULT_OUT = ROOT / "docs" / "benchmarks" / "section_headings.json"


def committed_sections(revision: str) -> ModuleType:
    """Returns docpipe.ingest.sections as committed at `revision`, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{revision}:docpipe/ingest/sections.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("docpipe_sections_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    exec(compile(source, f"{revision}:docpipe/ingest/sections.py", "exec"), module.__dict__)
    return module


def measure(module: ModuleType, doc: Document, counter: Any, chunking: ChunkingSettings) -> dict[str, Any]:
    sections = module.split_sections(doc, counter, chunking)
    return {
        "sections": len(sections),
        "preamble": sum(s.heading.startswith("Preamble") for s in sections),
        "preamble_parts": sum(s.heading.startswith("Preamble (part") for s in sections),
        "headings": len(module.find_headings(doc.text)),
    }


def changes(before: ModuleType, doc: Document) -> dict[str, list[dict[str, Any]]]:
    """Returns the headings AFTER adds and those it retitles, with their page."""
    old = {h.offset: h.title for h in before.find_headings(doc.text)}
    new = {h.offset: h.title for h in after.find_headings(doc.text)}
    added = [{"page": doc.page_of(o), "title": t} for o, t in sorted(new.items()) if o not in old]
    retitled = [
        {"page": doc.page_of(o), "before": old[o], "after": t}
        for o, t in sorted(new.items())
        if o in old and old[o] != t
    ]
    removed = [{"page": doc.page_of(o), "title": t} for o, t in sorted(old.items()) if o not in new]
    return {"added": added, "retitled": retitled, "removed": removed}


def run_set(pdfs: list[Path], before: ModuleType, counter: Any, chunking: ChunkingSettings) -> dict[str, Any]:
    rows = []
    started = time.perf_counter()
    for index, pdf in enumerate(pdfs, 1):
        try:
            pages = extract_pages(pdf.read_bytes(), settings=ExtractionSettings(), name=pdf.name)
        except DocpipeError as exc:
            rows.append({"file": pdf.name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        doc = Document(id=pdf.stem, name=pdf.name, pages=pages)
        row = {
            "file": pdf.name,
            "pages": len(pages),
            "before": measure(before, doc, counter, chunking),
            "after": measure(after, doc, counter, chunking),
            **changes(before, doc),
        }
        rows.append(row)
        b, a = row["before"], row["after"]
        print(
            f"[{index:3d}/{len(pdfs)}] {pdf.name[:58]:58s} sections {b['sections']:4d} -> {a['sections']:4d}  "
            f"preamble parts {b['preamble_parts']:3d} -> {a['preamble_parts']:3d}  "
            f"headings {b['headings']:4d} -> {a['headings']:4d}",
            flush=True,
        )
    done = [row for row in rows if "error" not in row]
    totals: dict[str, Any] = {}
    for side in ("before", "after"):
        total = {key: sum(row[side][key] for row in done) for key in ("sections", "preamble", "preamble_parts")}
        total["headings"] = sum(row[side]["headings"] for row in done)
        total["preamble_part_share"] = total["preamble_parts"] / total["sections"] if total["sections"] else 0.0
        total["documents_with_preamble_parts"] = sum(row[side]["preamble_parts"] > 0 for row in done)
        totals[side] = total
    totals["headings_added"] = sum(len(row["added"]) for row in done)
    totals["headings_retitled"] = sum(len(row["retitled"]) for row in done)
    totals["headings_removed"] = sum(len(row["removed"]) for row in done)
    totals["documents_with_changed_counts"] = sum(row["before"] != row["after"] for row in done)
    return {
        "documents": len(done),
        "errors": len(rows) - len(done),
        "seconds": time.perf_counter() - started,
        "totals": totals,
        "files": rows,
    }


def report(name: str, result: dict[str, Any]) -> None:
    t = result["totals"]
    b, a = t["before"], t["after"]
    print(f"\n{name}: {result['documents']} contracts ({result['errors']} errors), {result['seconds']:.0f} s")
    print(f"{'':28s} {'before':>8s} {'after':>8s}")
    for key in ("sections", "preamble", "preamble_parts", "documents_with_preamble_parts", "headings"):
        print(f"{key:28s} {b[key]:8d} {a[key]:8d}")
    print(f"{'preamble part share':28s} {b['preamble_part_share']:8.1%} {a['preamble_part_share']:8.1%}")
    print(
        f"headings added {t['headings_added']}, retitled {t['headings_retitled']}, removed {t['headings_removed']}; "
        f"{t['documents_with_changed_counts']} contracts with changed counts"
    )
    for row in result["files"]:
        for added in row.get("added", []):
            print(f"  + {row['file'][:50]:50s} p{added['page']:<3d} {added['title']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-dir", type=Path, default=EVAL)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--before", default="HEAD", help="git revision of the BEFORE sections.py")
    parser.add_argument(
        "--collection", type=int, default=0, help="also this many cuad-collection-dev contracts (0: none, -1: all)"
    )
    parser.add_argument("--seed", type=int, default=12, help="seed of the collection sample")
    args = parser.parse_args()

    dev = sorted((args.eval_dir / "cuad-dev" / "pdf").glob("*.pdf"))
    if not dev:
        print(
            f"no PDFs in {args.eval_dir / 'cuad-dev' / 'pdf'}: the CUAD dev set lives in ../shared/eval",
            file=sys.stderr,
        )
        return 2
    before = committed_sections(args.before)
    chunking = ChunkingSettings()
    counter = get_token_counter(chunking.tokenizer)

    sets = {"cuad-dev": run_set(dev, before, counter, chunking)}
    if args.collection:
        pool = sorted((args.eval_dir / "cuad-collection-dev" / "pdf").glob("*.pdf"))
        sample = (
            pool
            if args.collection < 0
            else sorted(random.Random(args.seed).sample(pool, min(args.collection, len(pool))))
        )
        sets["cuad-collection-dev"] = run_set(sample, before, counter, chunking)
    for name, result in sets.items():
        report(name, result)

    revision = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", args.before], capture_output=True, text=True
    ).stdout.strip()
    out = {
        "benchmark": "section_headings",
        "command": "python benchmarks/section_headings.py"
        + (f" --collection {args.collection}" if args.collection else ""),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count()},
        "before": f"docpipe/ingest/sections.py at {args.before} ({revision})",
        "after": "docpipe/ingest/sections.py in the working tree",
        "extraction": ExtractionSettings().extractor,
        "chunking": chunking.model_dump(),
        "token_counter": counter.name,
        # Relative to the repository: results must not carry this machine's paths.
        "eval_dir": os.path.relpath(args.eval_dir, ROOT),
        "collection_seed": args.seed if args.collection > 0 else None,
        "sets": sets,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
