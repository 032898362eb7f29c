"""Answers over several contracts at once (a collection question that names none, or several): the context
holds sections of more than one document, so the prompt gives each contract its own delimited block and
section ids that name the contract (``d2.s014``), and every quote is verified against the page text of the
contract it names, never another's.

An answer about one named contract does not come here: it is the one-document answer, asked of that contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from docpipe.answer.core import grounded_request
from docpipe.answer.extractive import extractive_answer
from docpipe.answer.prompts import (
    COLLECTION_PROMPT_VERSION,
    SYSTEM_PROMPT_COLLECTION,
    build_collection_prompt,
    extract_quotes,
)
from docpipe.answer.verify import locate_quote, verify_quote
from docpipe.audit import model_revision
from docpipe.engine.base import GenerationRequest
from docpipe.types import Answer, Citation, Document, Hit

if TYPE_CHECKING:
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine, GenerationResult
    from docpipe.retrieve.fusion import SentenceCache
    from docpipe.settings import Settings

__all__ = ["collection_extractive", "collection_generative", "collection_request", "group_by_document"]


def group_by_document(hits: Sequence[Hit]) -> list[tuple[str, str, list[Hit]]]:
    """Returns (document id, name, its hits in the given order) per document, in order of first appearance."""
    groups: dict[str, tuple[str, str, list[Hit]]] = {}
    for hit in hits:
        groups.setdefault(hit.document_id, (hit.document_id, hit.document_name, []))[2].append(hit)
    return list(groups.values())


def collection_request(
    question: str, hits: Sequence[Hit], *, settings: Settings, mode: ThinkingMode, analysis: bool = False
) -> GenerationRequest:
    """Returns the engine request for `question` over sections of several contracts (see the module docstring);
    thinking and sampling as for one contract."""
    prompt = build_collection_prompt(question, group_by_document(hits))
    return grounded_request(
        question, SYSTEM_PROMPT_COLLECTION, prompt, settings=settings.engine, mode=mode, analysis=analysis
    )


def collection_generative(
    question: str,
    result: GenerationResult,
    hits: Sequence[Hit],
    documents: dict[str, Document],
    *,
    engine: Engine,
    request: GenerationRequest,
    settings: Settings,
    collection: str,
    fingerprint: str,
) -> Answer:
    """Returns the model's answer over several contracts with each quote checked in the contract its section
    id names (``dN.sNNN``; a quote with no id is looked up in every contract given): found there it is a
    verified citation naming that contract; found elsewhere or nowhere it is kept, flagged unverified."""
    groups = group_by_document(hits)
    citations: list[Citation] = []
    for quote, label in extract_quotes(result.text):
        where = groups
        section_id: str | None = None
        if label and "." in label:
            number, section_id = label.split(".", 1)
            n = int(number[1:]) - 1
            where = groups[n : n + 1] if 0 <= n < len(groups) else []
        elif label:
            section_id = label
        citation = None
        for doc_id, name, doc_hits in where:
            found = locate_quote(quote, doc_hits, documents[doc_id], section_id=section_id)
            if found is not None:
                hit = found.hit
                citation = Citation(
                    hit.section_id,
                    hit.heading,
                    found.page_start,
                    found.page_end,
                    quote,
                    True,
                    document_id=doc_id,
                    document_name=name,
                    **documents[doc_id].citation_marks(found.page_start, found.page_end),
                )
                break
        if citation is None:
            doc_id, name = (where[0][0], where[0][1]) if len(where) == 1 else ("", "")
            citation = Citation(section_id or "", "", 0, 0, quote, False, document_id=doc_id, document_name=name)
        citations.append(citation)
    notice = None
    if result.error:
        notice = f"The engine failed on this question: {result.error}"
    elif not result.text:
        notice = "The model returned no answer text."
    elif any(not c.verified for c in citations):
        elsewhere = sum(verify_quote(c.quote, documents[d])[0] for c in citations if not c.verified for d in documents)
        notice = (
            "Some quotes were not found in the sections of the contract they name and are marked unverified: "
            "do not rely on them."
        )
        if elsewhere:
            notice += " Some of them are in another contract's text or in sections the model was not given."
    elif not citations:
        notice = "The answer quotes nothing from the contracts: check it against the cited sections."
    answer = Answer(
        question=question,
        text=result.text,
        mode="generative",
        citations=citations,
        engine=engine.name,
        document_id="",
        fingerprint=fingerprint,
        section_ids=[f"{h.document_id[:12]}:{h.section_id}" for h in hits],
        thinking=result.thinking,
        model=engine.model,
        notice=notice,
        thinking_enabled=request.thinking,
    )
    return _as_collection(answer, hits, collection, settings=settings, prompt_version=COLLECTION_PROMPT_VERSION)


def collection_extractive(
    question: str,
    hits: Sequence[Hit],
    documents: dict[str, tuple[Document, SentenceCache]],
    embedder: Embedder,
    *,
    settings: Settings,
    collection: str,
    fingerprint: str,
    query: Any = None,
) -> Answer:
    """Returns the extractive answer over several contracts: their clauses compete, each quote names its
    contract (`extractive_answer` with `documents`: id -> (document, sentence cache))."""
    first = next(iter(documents.values()))[0] if documents else None
    if first is None:
        raise ValueError("no documents to answer from")
    answer = extractive_answer(
        question,
        list(hits),
        first,
        embedder,
        clauses=settings.engine.extractive_clauses,
        min_score=settings.extractive_floor(),
        fingerprint=fingerprint,
        query=query,
        documents=documents,
    )
    answer.document_id = ""
    answer.section_ids = [f"{h.document_id[:12]}:{h.section_id}" for h in hits]
    return _as_collection(answer, hits, collection, settings=settings, prompt_version="")


def _as_collection(
    answer: Answer, hits: Sequence[Hit], collection: str, *, settings: Settings, prompt_version: str
) -> Answer:
    """Returns `answer` with its provenance over several documents: the collection, every document given."""
    names = {h.document_id: h.document_name for h in hits}
    answer.document_name = ", ".join(names.values())
    answer.settings_fingerprint = settings.settings_fingerprint()
    answer.model_revision = model_revision(settings.engine, answer.engine, answer.model)
    answer.prompt_version = prompt_version
    answer.collection = collection
    answer.document_ids = list(names)
    return answer
