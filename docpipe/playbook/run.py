"""A playbook run over contracts: one review grid holds every cell its rules read, then each rule is judged on
each contract (`docpipe.playbook.judge`).

The grid's columns (`playbook_columns`): each key term a term rule tests (read by its reader offline); each
clause category a clause rule names, searched as a "which contracts ...?" question is (`docpipe.review.each`),
plus the key-term reader that reads the clause for sure where there is one; each question rule's question, typed
yes/no. Cells are cached by content, so a playbook run again, or another playbook over the same terms and
clauses, reads only what it lacks, and a run stopped half-way resumes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.cells import Column
from docpipe.playbook.evidence import CLAUSE_READERS, DocumentMentions
from docpipe.playbook.judge import judge
from docpipe.playbook.report import PlaybookReport

if TYPE_CHECKING:
    import re

    from docpipe.collection.handle import Collection
    from docpipe.ingest.build import Source
    from docpipe.playbook.schema import Playbook
    from docpipe.review.grid import ReviewGrid
    from docpipe.review.run import ReviewProgress
    from docpipe.settings import Settings
    from docpipe.types import Citation, Document

__all__ = ["PlaybookColumns", "check", "judge_grid", "playbook_columns"]


@dataclass(frozen=True, slots=True)
class PlaybookColumns:
    """The grid columns a playbook reads, and for each rule the index of its column and of its clause's
    reader column (None when it has none)."""

    columns: list[Column]
    of_rule: dict[str, int]
    reader_of_rule: dict[str, int | None]


def playbook_columns(playbook: Playbook, settings: Settings) -> PlaybookColumns:
    """Returns the columns of `playbook`'s grid (module docstring), each asked once however many rules read it."""
    from docpipe.analysis.checklist import CHECKLIST
    from docpipe.terms.catalog import key_term_columns

    columns: list[Column] = []
    at: dict[tuple[str, str], int] = {}

    def add(what: tuple[str, str], column: Column) -> int:
        if what not in at:
            at[what] = len(columns)
            columns.append(column)
        return at[what]

    categories = {c.name: c for c in CHECKLIST}
    of_rule: dict[str, int] = {}
    readers: dict[str, int | None] = {}
    for rule in playbook.rules:
        readers[rule.id] = None
        if rule.form == "term":
            term = rule.term
            of_rule[rule.id] = add(("term", term), key_term_columns([term])[0])
        elif rule.form == "clause":
            c = categories[rule.clause]
            of_rule[rule.id] = add(
                ("clause", c.name),
                Column(
                    f"{c.name} (clause)",
                    c.question,
                    c.query,
                    group=c.group,
                    note=c.note,
                    category=True,
                    min_score=settings.review.each_check_score,
                ),
            )
            reader = CLAUSE_READERS.get(c.name)
            if reader:
                readers[rule.id] = add(("term", reader), key_term_columns([reader])[0])
        else:
            question = rule.question
            of_rule[rule.id] = add(
                ("question", question.casefold()),
                Column(question, question, question, kind="yes_no"),
            )
    return PlaybookColumns(columns, of_rule, readers)


def judge_grid(
    playbook: Playbook,
    grid: ReviewGrid,
    layout: PlaybookColumns,
    *,
    open_document: Callable[[str], Document | None],
    settings: Settings,
    seconds: float = 0.0,
) -> PlaybookReport:
    """Returns the report of `playbook` over `grid` (read with `layout`'s columns): every rule judged on every
    row. `open_document` gives a row's document for the whole-text searches some verdicts need (None when it
    cannot be opened: those verdicts then ask for a reviewer)."""
    found_score, sure_score = settings.review.each_found_score, settings.review.playbook_sure_score
    verdicts = []
    for row, cells in zip(grid.rows, grid.cells):
        mentions = _LazyMentions(row.document_id, open_document)
        line = []
        for rule in playbook.rules:
            reader = layout.reader_of_rule[rule.id]
            line.append(
                judge(
                    rule,
                    cells[layout.of_rule[rule.id]],
                    reader_cell=cells[reader] if reader is not None else None,
                    mentions=mentions,
                    found_score=found_score,
                    sure_score=sure_score,
                )
            )
        verdicts.append(line)
    return PlaybookReport(playbook, list(grid.rows), verdicts, grid.manifest, seconds)


class _LazyMentions:
    """A row's whole-text search, its document opened on first use; None (cannot search) when it cannot be."""

    def __init__(self, document_id: str, open_document: Callable[[str], Document | None]) -> None:
        self.document_id = document_id
        self.open_document = open_document
        self.search: DocumentMentions | None = None
        self.failed = not document_id

    def __call__(self, pattern: re.Pattern[str]) -> list[Citation] | None:
        if self.failed:
            return None
        if self.search is None:
            try:
                doc = self.open_document(self.document_id)
            except Exception:  # noqa: BLE001 - any failure to open means: not searched, so not sure
                doc = None
            if doc is None or not doc.sections:
                self.failed = True
                return None
            self.search = DocumentMentions(doc)
        return self.search(pattern)


def check(
    dp: Any,  # a docpipe.pipeline.DocPipe, which calls this (the layer below cannot import it)
    playbook: Playbook,
    docs: Collection | Document | Source | Sequence[Document | Source],
    *,
    mode: str = "think",
    password: str | None = None,
    use_cache: bool = True,
    progress: Callable[[ReviewProgress], None] | None = None,
    cancel: threading.Event | None = None,
) -> PlaybookReport:
    """Returns `playbook` applied to `docs` (see `docpipe.pipeline.DocPipe.check`)."""
    started = time.perf_counter()
    layout = playbook_columns(playbook, dp.settings)
    grid = dp.review(
        docs,
        columns=layout.columns,
        mode=mode,
        password=password,
        use_cache=use_cache,
        progress=progress,
        cancel=cancel,
    )
    matter = grid.manifest.matter

    def open_document(doc_id: str) -> Document | None:
        return dp.document(doc_id, password=password, matter=matter)

    return judge_grid(
        playbook,
        grid,
        layout,
        open_document=open_document,
        settings=dp.settings,
        seconds=time.perf_counter() - started,
    )
