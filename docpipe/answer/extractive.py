"""The answer without a language model: the clauses of the retrieved sections that answer the question, quoted
verbatim with their pages, the decisive sentence of each marked (`extractive_answer`); or, when no clause
scores well, a plain "nothing found" that names where it looked.

A clause is a numbered paragraph, sub-clause or paragraph of a section, at most `MAX_CLAUSE_CHARS` long
(`docpipe.ingest.clauses`). Each is scored on several signals, never on one cosine:

- its best sentence's embedding cosine to the question, and the cosine of its sentences' mean embedding
  (the clause as a whole; sentences are embedded once per document, in one batched pass, and looked up by
  text: `docpipe.embed.table.VectorTable`);
- the cosine of its section's heading path ("Termination > Termination for Convenience"): where the
  contract files the clause;
- the share of the question's word stems it contains;
- the retrieval rank of its section, and whether it is the document's opening (title, parties, dates);
- the question's intent: the kind of answer its words ask for ("when" a date, "how long" a duration, "who"
  a party, "how much" an amount, "which law" a place, "restricted" a prohibition or consent, "granted" or
  "licence" a grant, "continue after" a survival clause) held by the clause, weighed by how well the clause
  matches at all.

The weights were fitted on plain-language questions over cuad-dev (``docpipe eval-answers``), with the
sections of INDEX_FORMAT 6 (one per numbered sub-clause): in each of three five-fold splits by contract,
logistic regression (is this clause the gold one?) on four folds, then a search from its weights for the
share answered where "nothing found" covers half of the records without the clause; the fifteen fits, each
scaled so that this floor is 2.6, averaged and rounded (docs/measurements.md, "Offline answers"). No rule
names a clause category or uses a word of the evaluation's questions. The best clause must score
`engine.extractive_min_score` or the answer says that nothing answering was found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from docpipe.answer.verify import locate_quote, normalise_whitespace
from docpipe.embed.table import VectorTable
from docpipe.ingest.clauses import Clause, clause_spans, sentence_spans
from docpipe.ingest.sentences import MAX_CLAUSE_CHARS, heading_text
from docpipe.retrieve.dense import tokenize
from docpipe.retrieve.fusion import SentenceCache
from docpipe.types import Answer, Citation, Document, Hit

if TYPE_CHECKING:
    from docpipe.embed.base import Embedder

__all__ = [
    "ENABLE_MODEL_HINT",
    "NOTHING_FOUND",
    "NOTHING_FOUND_IN_COLLECTION",
    "ScoredClause",
    "extractive_answer",
    "prime_sentences",
    "put_table",
    "rank_clauses",
    "sentence_spans",
    "sentence_table",
]

ENABLE_MODEL_HINT = (
    "No language model is configured, so docpipe quotes the contract instead of writing an answer. "
    "To have Qwen3-14B answer: pip install 'docpipe-contracts[gpu]' on a CUDA machine, or point "
    "DOCPIPE_ENGINE__URL at a server (vllm serve Qwen/Qwen3-14B --reasoning-parser qwen3)."
)

#: The first words of an extractive answer that found nothing worth quoting.
NOTHING_FOUND = "No clause of this contract clearly answers the question."
NOTHING_FOUND_IN_COLLECTION = "No clause of these contracts clearly answers the question."

# Weights of the clause score, in `FEATURES` order (see the module docstring).
FEATURES = ("best_sentence", "clause", "heading", "shared_stems", "section_rank", "opening", "answer_type")
WEIGHTS = (1.7, 2.7, 1.55, 0.4, 0.25, 0.6, 3.4)

_QUESTION_WORDS = {"what", "which", "who", "when", "how", "does", "there", "any", "must", "may", "can"}

# The kind of answer a question asks for, read from its question words, and where a clause holds one: a
# question "when ..." is answered by a clause with a date, "how much ..." by one with an amount.
_ASKS = {
    "date": re.compile(r"\b(?:when|date|dated|what day)\b", re.IGNORECASE),
    "duration": re.compile(
        r"\bhow (?:long|soon|much (?:time|notice))\b|\b(?:term|period|expire[sd]?|expiry|until)\b", re.IGNORECASE
    ),
    "party": re.compile(r"\b(?:who|whom|whose)\b|\bwhich (?:compan|part|person|people|entit)", re.IGNORECASE),
    "title": re.compile(r"\b(?:called|named|name|title)\b", re.IGNORECASE),
    "amount": re.compile(
        r"\bhow (?:much(?! time| notice)|many)\b|\b(?:least|minimum|maximum|price|fees?|amount|cost|royalt\w*|cap)\b",
        re.IGNORECASE,
    ),
    "place": re.compile(
        r"\bwhere\b|\bwhich (?:state|country|court|law)|\b(?:laws?|jurisdiction|venue)\b", re.IGNORECASE
    ),
    "restriction": re.compile(
        r"\b(?:restrict\w*|prohibit\w*|forbid\w*|barred|allowed|permitted|consent)\b", re.IGNORECASE
    ),
    "grant": re.compile(r"\b(?:grant\w*|given|licen[cs]ed?)\b", re.IGNORECASE),
    "survival": re.compile(
        r"\b(?:surviv\w*|continue\w*|after (?:the )?(?:contract|agreement|term)|once the (?:contract|agreement))\b",
        re.IGNORECASE,
    ),
}
_MONTHS = r"(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)"
_HOLDS = {
    "date": re.compile(
        rf"\b{_MONTHS}\.?\s+\d{{1,2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:day\s+of\s+)?{_MONTHS}\b|\b\d{{1,2}}/\d{{1,2}}/\d{{2,4}}\b"
        r"|\b(?:19|20)\d\d\b"
    ),
    "duration": re.compile(
        r"\b(?:\d+|[a-z]+)\s*(?:\(\d+\)\s*)?(?:calendar\s+|business\s+)?(?:day|week|month|year)s?\b", re.IGNORECASE
    ),
    "party": re.compile(
        r"\b(?:Inc|LLC|L\.L\.C|Ltd|Limited|Corporation|Corp|GmbH|AG|S\.A|plc|LLP|L\.P)\b\.?|\bby and between\b"
    ),
    "title": re.compile(r"\b[A-Z][A-Z&\-]+(?:\s+[A-Z][A-Z&\-]+)*\s+(?:AGREEMENT|CONTRACT)\b"),
    "amount": re.compile(
        r"[$€£¥]\s?\d|\b(?:USD|EUR|GBP|dollars|percent)\b|\d\s?%|\b\d[\d,]*\s+(?:units|copies|pieces|tons)\b"
        r"|\b(?:fees|amounts?|sums?|charges)\s+(?:actually\s+)?(?:paid|payable)\b",
        re.IGNORECASE,
    ),
    "place": re.compile(
        r"\blaws?\s+of\b|\b(?:State|Commonwealth|Province)\s+of\b|\bcourts?\s+(?:of|in|located)\b|\bjurisdiction\b|\bvenue\b",
        re.IGNORECASE,
    ),
    "restriction": re.compile(
        r"\b(?:shall|will|may|must)\s+not\b|\bwithout\s+(?:the\s+)?(?:prior\s+)?(?:express\s+)?(?:written\s+)?consent\b"
        r"|\bprohibit\w*|\b(?:neither|no)\s+party\b",
        re.IGNORECASE,
    ),
    "grant": re.compile(
        r"\bhereby\s+grants?\b|\bgrants?\s+(?:to\s+)?\w+(?:\s+\w+)?\s+(?:an?|the)\b|\b(?:is|are)\s+(?:hereby\s+)?granted\b",
        re.IGNORECASE,
    ),
    "survival": re.compile(
        r"\bsurviv\w*|\b(?:after|following|upon)\s+(?:the\s+)?(?:expiration|termination|expiry)\b", re.IGNORECASE
    ),
}


def _asks(question: str) -> list[str]:
    return [kind for kind, pattern in _ASKS.items() if pattern.search(question)]


def _stems(text: str) -> set[str]:
    return {word[:6] for word in tokenize(text) if not word.isdigit()} - _QUESTION_WORDS


def _key(hit: Hit) -> str:
    # A ranked or pinned hit holds its whole section; supporting material (a referenced clause) only a part.
    if hit.role in ("match", "front_matter"):
        return hit.section_id
    return f"{hit.section_id}@{hit.passage_start}:{len(hit.text)}"


def _heading_key(hit: Hit) -> str:
    return "heading:" + " > ".join(hit.heading_path)


def _quotable(hits: list[Hit]) -> list[Hit]:
    # Definitions help a model read a clause; quoted alone they answer nothing.
    return [h for h in hits if h.role != "definition"]


@dataclass(slots=True)
class _Clauses:
    """A section's clauses with the embeddings of their sentences (rows in clause order) and of each clause
    as a whole (the normalised mean of its sentences'), both computed once per section."""

    clauses: list[Clause]
    vectors: Any  # (sentences, dim) float32, unit rows
    rows: list[tuple[int, int]]  # each clause's rows in `vectors`
    wholes: Any  # (clauses, dim) float32, unit rows

    @classmethod
    def of(cls, clauses: list[Clause], vectors: Any) -> _Clauses:
        import numpy as np

        rows, start = [], 0
        for clause in clauses:
            rows.append((start, start + len(clause.sentences)))
            start += len(clause.sentences)
        if not rows:  # a bare heading: nothing to quote
            return cls(clauses, vectors, rows, np.zeros((0, 0), dtype=np.float32))
        wholes = np.array([vectors[a:b].mean(axis=0) for a, b in rows])
        return cls(clauses, vectors, rows, wholes / np.maximum(np.linalg.norm(wholes, axis=1, keepdims=True), 1e-9))


def prime_sentences(hits: list[Hit], embedder: Embedder, cache: SentenceCache) -> None:
    """Cuts every hit not yet in `cache` into clauses and looks up the embeddings of their sentences and the
    hits' heading paths in the document's sentence table (`sentence_table`); what the table lacks is embedded
    in one call and added to it (one call of many texts runs the embedder's batched path)."""
    table = sentence_table(cache, embedder)
    todo: dict[str, tuple[Hit, list[Clause]]] = {}
    headings: dict[str, str] = {}
    wanted: list[str] = []
    for hit in _quotable(hits):
        key = _key(hit)
        if key not in cache and key not in todo:
            clauses = clause_spans(hit.text, max_chars=MAX_CLAUSE_CHARS)
            todo[key] = (hit, clauses)
            wanted.extend(hit.text[a:b] for clause in clauses for a, b in clause.sentences)
        heading = _heading_key(hit)
        if heading not in cache and heading not in headings:
            headings[heading] = heading_text(hit.heading_path)
            wanted.append(headings[heading])
    if not todo and not headings:
        return
    missing = table.missing(wanted)
    if missing:
        table.add(missing, embedder.embed(missing))
    # A section with no quotable sentence (a bare heading) is remembered too, with no vectors.
    for key, (hit, clauses) in todo.items():
        cache[key] = _Clauses.of(clauses, table.rows([hit.text[a:b] for c in clauses for a, b in c.sentences]))
    for heading, text in headings.items():
        cache[heading] = table.rows([text])[0]


def sentence_table(cache: SentenceCache, embedder: Embedder) -> VectorTable:
    """Returns the sentence embeddings by text that `cache` holds for its document (a new, empty table when none
    was put there: `put_table`, from the store or made for the whole document)."""
    with cache.lock:
        if cache.table is None:
            cache.table = VectorTable("", dim=embedder.dim)
        return cache.table


def put_table(cache: SentenceCache, table: VectorTable) -> None:
    """Makes `table` the document's sentence table in `cache`; what `cache` embedded before is kept in it."""
    old = cache.table
    if old is not None and old is not table:
        table.merge(old)
    cache.table = table


@dataclass(frozen=True, slots=True)
class ScoredClause:
    """A candidate quote: the clause's text and offsets in its hit, its score and its decisive sentence."""

    hit: Hit
    start: int
    end: int
    score: float
    decisive: tuple[int, int]  # offsets of the best sentence in hit.text
    features: tuple[float, ...] = ()  # the signals the score weighs, in `FEATURES` order

    @property
    def text(self) -> str:
        return self.hit.text[self.start : self.end]


def rank_clauses(
    question: str, hits: list[Hit], embedder: Embedder, cache: SentenceCache, query: Any = None
) -> list[ScoredClause]:
    """Returns every clause of the quotable `hits`, best first, scored as the module docstring says."""

    hits = _quotable(hits)
    prime_sentences(hits, embedder, cache)
    if query is None:
        query = embedder.embed([question])[0]
    terms = _stems(question)
    asks = _asks(question)
    scored: list[ScoredClause] = []
    seen: set[str] = set()
    for hit in hits:
        entry: _Clauses = cache[_key(hit)]
        if not entry.clauses:
            continue
        sentence_scores = entry.vectors @ query
        whole_scores = entry.wholes @ query
        heading = float(cache[_heading_key(hit)] @ query)
        rank = 1.0 / (1 + hit.rank) if hit.role == "match" else 0.0
        opening = 1.0 if hit.role == "front_matter" else 0.0
        for clause, (first, last), whole in zip(entry.clauses, entry.rows, whole_scores):
            scores = sentence_scores[first:last]
            best = float(scores.max())
            text = hit.text[clause.start : clause.end]
            if text in seen:  # a referenced clause may also be part of a ranked section
                continue
            seen.add(text)
            shared = len(terms & _stems(text)) / max(len(terms), 1)
            # Holding the kind of answer asked for counts in proportion to how well the clause matches at all.
            typed = _typed(text, asks) * max(best, 0.0)
            features = (best, float(whole), heading, shared, rank, opening, typed)
            score = sum(w * f for w, f in zip(WEIGHTS, features))
            sentence = _decisive(hit.text, clause, scores, terms, asks)
            scored.append(ScoredClause(hit, clause.start, clause.end, score, sentence, features))
    scored.sort(key=lambda c: -c.score)
    return scored


def _typed(text: str, asks: list[str]) -> float:
    """Returns the share of the answer kinds asked for (`_asks`) that `text` holds."""
    return sum(1 for kind in asks if _HOLDS[kind].search(text)) / len(asks) if asks else 0.0


def _decisive(text: str, clause: Clause, scores: Any, terms: set[str], asks: list[str]) -> tuple[int, int]:
    """Returns the offsets of the clause's sentence that answers best: its cosine, backed by the question's
    word stems it shares and by holding the kind of answer asked for ("ninety (90) days" for "how long")."""
    best, value = clause.sentences[0], float("-inf")
    for (start, end), score in zip(clause.sentences, scores):
        sentence = text[start:end]
        shared = len(terms & _stems(sentence)) / max(len(terms), 1)
        total = float(score) + 0.25 * shared + 0.25 * _typed(sentence, asks)
        if total > value:
            best, value = (start, end), total
    return best


def _marked(candidate: ScoredClause) -> str:
    """Returns the clause, whitespace-folded, with its decisive sentence in **bold** (when it is not all of it)."""
    text = candidate.hit.text
    before = normalise_whitespace(text[candidate.start : candidate.decisive[0]])
    sentence = normalise_whitespace(text[candidate.decisive[0] : candidate.decisive[1]])
    after = normalise_whitespace(text[candidate.decisive[1] : candidate.end])
    if not before and not after:
        return sentence
    return " ".join(part for part in (before, f"**{sentence}**", after) if part)


def extractive_answer(
    question: str,
    hits: list[Hit],
    doc: Document,
    embedder: Embedder,
    *,
    clauses: int = 3,
    min_score: float | None = None,
    fingerprint: str = "",
    cache: SentenceCache | None = None,
    query: Any = None,
    documents: dict[str, tuple[Document, SentenceCache]] | None = None,
) -> Answer:
    """Returns the `clauses` clauses of `hits` that best answer `question`, quoted verbatim, each with its
    decisive sentence marked; or, when none scores at least `min_score`, an answer with no quote that says
    so and names the sections searched. `query` is the question's embedding when the caller has it.

    Over a collection `hits` come from several documents: `documents` maps each hit's `document_id` to its
    `Document` and sentence cache, the clauses of every document compete, and each quote names its document
    (`doc` then only stands for the collection's answer)."""
    if documents is None:
        documents = {doc.id: (doc, SentenceCache() if cache is None else cache)}
        for hit in hits:
            documents.setdefault(hit.document_id, documents[doc.id])
    if query is None:
        query = embedder.embed([question])[0]
    ranked: list[ScoredClause] = []
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.document_id, []).append(hit)
    for doc_id, group in groups.items():
        ranked += rank_clauses(question, group, embedder, documents[doc_id][1], query)
    ranked.sort(key=lambda c: -c.score)
    searched = [h.section_id for h in hits]
    several = len({documents[doc_id][0].id for doc_id in groups}) > 1
    if not ranked or (min_score is not None and ranked[0].score < min_score):
        return _nothing_found(question, hits, doc, ranked, fingerprint=fingerprint, several=several)
    citations: list[Citation] = []
    lines = [
        "Extractive answer (no language model configured): the clauses of the "
        + ("contracts" if several else "contract")
        + " that best match the question, quoted verbatim; the sentence that matches best is in bold.",
        "",
    ]
    taken: list[ScoredClause] = []
    for candidate in ranked:
        hit = candidate.hit
        if any(
            c.hit.document_id == hit.document_id
            and c.hit.section_id == hit.section_id
            and c.start < candidate.end
            and candidate.start < c.end
            for c in taken
        ):
            continue
        taken.append(candidate)
        found = locate_quote(candidate.text, [hit], documents[hit.document_id][0])
        first, last = (found.page_start, found.page_end) if found else (hit.page_start, hit.page_end)
        decisive = hit.text[candidate.decisive[0] : candidate.decisive[1]]
        citation = Citation(
            hit.section_id,
            hit.heading,
            first,
            last,
            candidate.text,
            found is not None,
            round(candidate.score, 4),
            highlight=decisive,
            document_id=hit.document_id,
            document_name=hit.document_name,
            **documents[hit.document_id][0].citation_marks(first, last),
        )
        citations.append(citation)
        where = f"{hit.document_name}, " if several else ""
        lines.append(f'{len(citations)}. "{_marked(candidate)}" ({where}{citation.heading}, {citation.pages})')
        if len(citations) >= clauses:
            break
    return Answer(
        question=question,
        text="\n".join(lines),
        mode="extractive",
        citations=citations,
        engine="extractive",
        document_id=doc.id,
        fingerprint=fingerprint,
        section_ids=searched,
        notice=ENABLE_MODEL_HINT,
    )


def _nothing_found(
    question: str,
    hits: list[Hit],
    doc: Document,
    ranked: list[ScoredClause],
    *,
    fingerprint: str,
    several: bool = False,
) -> Answer:
    """Returns the answer that quotes nothing: says so, and where the closest (weak) match was."""

    def named(hit: Hit) -> str:
        return f"{hit.document_name}, {hit.heading}" if several else hit.heading

    where = sorted({(h.document_name if several else "", h.page_start, named(h)) for h in hits if h.role == "match"})
    text = (NOTHING_FOUND_IN_COLLECTION if several else NOTHING_FOUND) + f" docpipe searched {len(where)} sections"
    if where:
        text += " (" + "; ".join(f"{heading}, p. {page}" for _, page, heading in where[:8]) + ")"
    text += " and quotes none of them, because none matches the question well."
    if ranked:
        best = ranked[0]
        text += (
            f" The closest, weak match is in {named(best.hit)} ({best.hit.pages}): read it there, or rephrase "
            "the question with the contract's own words."
        )
    return Answer(
        question=question,
        text=text,
        mode="extractive",
        citations=[],
        engine="extractive",
        document_id=doc.id,
        fingerprint=fingerprint,
        section_ids=[h.section_id for h in hits],
        notice=ENABLE_MODEL_HINT,
    )
