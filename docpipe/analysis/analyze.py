"""Contract analysis: the clause checklist (`docpipe.analysis.checklist`) run over one contract as one engine batch.

Each category is retrieved on its own (question plus the wording such clauses use, within
`analysis.budget_tokens`, with the definitions and cross-referenced sections the retrieved clauses lean on),
then all categories go to the engine together, in thinking mode. A finding is ``present`` only when a quote
backing it is found verbatim in one of the sections the model was given for it; ``absent`` means the listed sections were searched and held no
such clause; anything else is ``uncertain``. Without a language model the report lists, per category, the
best-matching sentences as ``candidate`` (for a reviewer, not a finding) or ``not_found``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from docpipe.answer.compose import Citation, extractive_answer, prime_sentences
from docpipe.audit import AuditManifest
from docpipe.analysis.checklist import Category, select_categories

if TYPE_CHECKING:
    from docpipe.types import Document
    from docpipe.pipeline import DocLike, DocPipe
    from docpipe.retrieve.fusion import Hit

__all__ = ["CategoryFinding", "ContractReport", "Status", "analyze"]

logger = logging.getLogger(__name__)

Status = Literal["present", "absent", "uncertain", "candidate", "not_found"]

STATUS_LABELS = {
    "present": "yes",
    "absent": "no (searched, none found)",
    "uncertain": "uncertain",
    "candidate": "candidate (review)",
    "not_found": "no candidate found",
}


@dataclass(slots=True)
class CategoryFinding:
    """Returns nothing; holds one checklist row: status, verbatim quotes with pages, a note, what was searched."""

    category: str
    group: str
    question: str
    status: Status
    quotes: list[Citation]
    note: str
    searched: list[dict[str, Any]]
    thinking: str | None = None
    score: float | None = None
    # The context that went to the model (not serialised: `searched` summarises it).
    hits: list[Hit] = field(default_factory=list, repr=False)

    @property
    def pages(self) -> str:
        """Returns the pages of the verified quotes, e.g. ``p. 3; pp. 9-10``."""
        seen: list[str] = []
        for quote in self.quotes:
            if quote.verified and quote.pages not in seen:
                seen.append(quote.pages)
        return "; ".join(seen)

    @property
    def clause(self) -> str:
        """Returns the verified quotes joined, for a table cell."""
        return " […] ".join(" ".join(q.quote.split()) for q in self.quotes if q.verified)

    def to_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "group": self.group,
            "question": self.question,
            "status": self.status,
            "quotes": [{**_citation_dict(q)} for q in self.quotes],
            "pages": self.pages,
            "note": self.note,
            "searched": self.searched,
            "thinking": self.thinking,
            "score": self.score,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CategoryFinding:
        quotes = [
            Citation(**{k: v for k, v in q.items() if k in Citation.__dataclass_fields__}) for q in data["quotes"]
        ]
        return cls(
            category=data["category"],
            group=data.get("group", "-"),
            question=data.get("question", ""),
            status=data["status"],
            quotes=quotes,
            note=data.get("note", ""),
            searched=data.get("searched", []),
            thinking=data.get("thinking"),
            score=data.get("score"),
        )


def _citation_dict(citation: Citation) -> dict[str, Any]:
    return {
        "section_id": citation.section_id,
        "heading": citation.heading,
        "page_start": citation.page_start,
        "page_end": citation.page_end,
        "pages": citation.pages,
        "quote": citation.quote,
        "verified": citation.verified,
        "score": citation.score,
    }


@dataclass(slots=True)
class ContractReport:
    """Returns nothing; holds a checklist report for one contract, with its audit manifest.

    >>> report = dp.analyze("contract.pdf", ["Governing Law"])   # doctest: +SKIP
    >>> report.findings[0].status, report.findings[0].pages     # doctest: +SKIP
    ('candidate', 'p. 12')
    >>> print(report.to_markdown())                              # doctest: +SKIP
    """

    document_id: str
    document_name: str
    mode: Literal["generative", "extractive"]
    findings: list[CategoryFinding]
    manifest: AuditManifest
    seconds: float = 0.0
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            body = json.dumps(self._body(), sort_keys=True, ensure_ascii=False).encode()
            self.id = hashlib.sha256(body).hexdigest()[:24]

    def _body(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "document_name": self.document_name,
            "mode": self.mode,
            "findings": [f.to_dict() for f in self.findings],
            "manifest": self.manifest.to_dict(),
            "seconds": self.seconds,
        }

    def finding(self, category: str) -> CategoryFinding:
        """Returns the finding for `category` (case-insensitive); KeyError if it was not analysed."""
        for item in self.findings:
            if item.category.casefold() == category.casefold():
                return item
        raise KeyError(category)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, **self._body()}

    def to_json(self) -> str:
        """Returns the whole report (findings, quotes, searched sections, manifest) as indented JSON."""
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContractReport:
        return cls(
            document_id=data["document_id"],
            document_name=data["document_name"],
            mode=data["mode"],
            findings=[CategoryFinding.from_dict(f) for f in data["findings"]],
            manifest=AuditManifest.from_dict(data["manifest"]),
            seconds=data.get("seconds", 0.0),
            id=data.get("id", ""),
        )

    def rows(self) -> list[dict[str, str]]:
        """Returns one flat row per category: category, status, clause (verified quotes), pages, note."""
        return [
            {
                "category": f.category,
                "status": f.status,
                "clause": f.clause,
                "pages": f.pages,
                "note": f.note,
            }
            for f in self.findings
        ]

    def to_csv(self) -> str:
        """Returns the rows as CSV with a header line."""
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=["category", "status", "clause", "pages", "note"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows())
        return out.getvalue()

    def to_markdown(self) -> str:
        """Returns a reviewer's table in Markdown, with how the report was made underneath."""
        heading = "Candidates for review" if self.mode == "extractive" else "Clause checklist"
        lines = [f"# {heading}: {self.document_name}", ""]
        if self.mode == "extractive":
            lines += [
                "No language model was configured: each row shows the sentences that best match the category, "
                "for a reviewer to judge. They are candidates, not findings.",
                "",
            ]
        lines += ["| Category | Found | Clause | Pages | Note |", "|---|---|---|---|---|"]
        for f in self.findings:
            clause = f.clause
            if len(clause) > 400:
                clause = clause[:400].rstrip() + " …"
            cells = [f.category, STATUS_LABELS[f.status], clause, f.pages, f.note]
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        m = self.manifest
        lines += [
            "",
            f"Document SHA-256 `{m.document_sha256}` · engine {m.engine}"
            + (f" · model {m.model} ({m.model_revision})" if m.model else "")
            + f" · settings `{m.settings_fingerprint}` · {m.created} · report `{self.id}`",
        ]
        return "\n".join(lines) + "\n"


def _md_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def analyze(
    dp: DocPipe,
    doc: DocLike,
    categories: list[str] | None = None,
    *,
    mode: str = "think",
    password: str | None = None,
    use_cache: bool = True,
    expand: bool | None = None,
) -> ContractReport:
    """Returns the checklist report for `doc` (see the module docstring); `DocPipe.analyze` calls this."""
    from docpipe import __version__
    from docpipe.audit import model_revision
    from docpipe.answer.prompts import ANALYSIS_PROMPT_VERSION, PROMPT_VERSION

    if mode not in ("think", "no_think", "auto"):
        from docpipe.errors import ConfigError

        raise ConfigError(f"unknown mode {mode!r}: use think (the default for analysis), no_think or auto")
    started = time.perf_counter()
    chosen = select_categories(categories)
    settings = dp.settings.analysis
    index = dp._index_for(doc, password)
    document = index.doc
    engine = dp.engine
    budget = min(settings.budget_tokens, dp._context_budget(engine))
    expand = settings.expand_references if expand is None else expand
    vectors = dp.embedder.embed([c.query for c in chosen])
    contexts = [
        dp.context(document, c.query, k=settings.k, budget_tokens=budget, expand=expand, _query=v)
        for c, v in zip(chosen, vectors)
    ]
    if engine is None:
        # Every category's sentences in one embedding call, then each category reads them from the cache.
        prime_sentences([h for hits in contexts for h in hits], dp.embedder, index.sentence_cache)
        findings = [_candidates(dp, index, c, hits, v) for c, hits, v in zip(chosen, contexts, vectors)]
    else:
        findings = _judge(dp, document, chosen, contexts, mode, use_cache)
    # Analysis thinks unless told not to (wants_thinking with analysis=True).
    thinking = engine is not None and mode != "no_think"
    manifest = AuditManifest(
        kind="report",
        document_sha256=document.id,
        document_name=document.name,
        engine=engine.name if engine else "extractive",
        model=engine.model if engine else None,
        model_revision=model_revision(
            dp.settings.engine, engine.name if engine else None, engine.model if engine else None
        ),
        thinking=thinking,
        # The checklist's questions ride on the cited-QA system prompt: a change to either changes output.
        prompt_version=f"{ANALYSIS_PROMPT_VERSION}+{PROMPT_VERSION}" if engine else "",
        settings_fingerprint=dp.settings.settings_fingerprint(),
        index_fingerprint=dp.fingerprint,
        section_ids=tuple(dict.fromkeys(h.section_id for hits in contexts for h in hits)),
        docpipe_version=__version__,
    )
    report = ContractReport(
        document_id=document.id,
        document_name=document.name,
        mode="generative" if engine else "extractive",
        findings=findings,
        manifest=manifest,
        seconds=round(time.perf_counter() - started, 3),
    )
    logger.info("analysed %s: %d categories in %.1f s", document.name, len(findings), report.seconds)
    return report


def _searched(hits: list[Hit]) -> list[dict[str, Any]]:
    return [{"section_id": h.section_id, "heading": h.heading, "pages": h.pages, "role": h.role} for h in hits]


def _candidates(dp: DocPipe, index, category: Category, hits: list[Hit], query: Any) -> CategoryFinding:
    settings = dp.settings.analysis
    answer = extractive_answer(
        category.query,
        hits,
        index.doc,
        dp.embedder,
        sentences=settings.candidate_sentences,
        cache=index.sentence_cache,
        query=query,
    )
    best = answer.citations[0].score if answer.citations else None
    if best is not None and best >= settings.min_candidate_score:
        status: Status = "candidate"
        quotes = answer.citations
        note = "Best-matching sentences, for review: no language model judged them."
    else:
        status, quotes = "not_found", []
        note = f"No sentence resembling this clause in the {len(hits)} sections searched."
    return CategoryFinding(
        category=category.name,
        group=category.group,
        question=category.question,
        status=status,
        quotes=quotes,
        note=note,
        searched=_searched(hits),
        score=round(best, 4) if best is not None else None,
        hits=hits,
    )


def _judge(
    dp: DocPipe,
    doc: Document,
    chosen: list[Category],
    contexts: list[list[Hit]],
    mode: str,
    use_cache: bool,
) -> list[CategoryFinding]:
    """Returns the model's findings: every category in one engine batch, each quote checked against the
    sections given for that category (a quote from elsewhere in the document is unverified)."""
    from docpipe.answer.compose import generative_answer
    from docpipe.engine.base import PRIORITY_ANALYSIS
    from docpipe.answer.prompts import analysis_question

    questions = [analysis_question(c.name, c.question, c.note) for c in chosen]
    requests = [
        replace(dp._request(q, hits, doc, mode, True), priority=PRIORITY_ANALYSIS)  # type: ignore[arg-type]
        for q, hits in zip(questions, contexts)
    ]
    keys = [dp._cache_key(doc, r, q, hits) for q, r, hits in zip(questions, requests, contexts)]
    stored: list[dict[str, Any] | None] = [None] * len(chosen)
    if use_cache:
        stored = [dp._cache_call("get", key) for key in keys]
    todo = [i for i, item in enumerate(stored) if item is None]
    engine = dp.engine
    assert engine is not None
    results = engine.generate([requests[i] for i in todo]) if todo else []
    findings: list[CategoryFinding | None] = [
        CategoryFinding.from_dict(item) if item is not None else None for item in stored
    ]
    for i, result in zip(todo, results):
        answer = generative_answer(
            questions[i], result, contexts[i], doc, engine=engine.name, model=engine.model, fingerprint=dp.fingerprint
        )
        finding = _finding(chosen[i], answer.text, answer.citations, contexts[i], result.error)
        finding.thinking = result.thinking
        findings[i] = finding
        if use_cache and not result.error:
            # Findings quote the contract: filed under the document and matter, so deleting either removes them.
            dp._cache_call("put", keys[i], finding.to_dict(), document_id=doc.id, matter=doc.matter)
    for finding, hits in zip(findings, contexts):
        assert finding is not None
        finding.hits = hits
    return findings  # type: ignore[return-value]


def _finding(
    category: Category, text: str, citations: list[Citation], hits: list[Hit], error: str | None
) -> CategoryFinding:
    from docpipe.answer.prompts import parse_finding

    status, note = parse_finding(text)
    verified = [c for c in citations if c.verified]
    if error:
        result: Status = "uncertain"
        note = f"The engine failed on this category: {error}"
    elif status == "present" and not verified:
        result = "uncertain"
        note = "The model reported such a clause, but none of its quotes is in the sections it was given. " + note
    elif status == "absent":
        result = "absent"
        note = note or f"Searched {len(hits)} sections; no such clause."
    elif status is None:
        result = "uncertain"
        note = "The model's reply did not follow the checklist format: read it and the sections searched."
    else:
        result = status  # type: ignore[assignment]
    return CategoryFinding(
        category=category.name,
        group=category.group,
        question=category.question,
        status=result,
        quotes=citations,
        note=note.strip(),
        searched=_searched(hits),
    )

