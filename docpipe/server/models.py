"""The ``/v1`` request and response models, and the OpenAPI extras (error responses, the upload body) the
routes declare."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "ERROR_RESPONSES",
    "UPLOAD_BODY",
    "AddByIds",
    "AddReportOut",
    "AnalyzeRequest",
    "AnswerOut",
    "AskRequest",
    "AskResponse",
    "CitationOut",
    "CollectionAskResponse",
    "CollectionCreate",
    "CollectionDeleted",
    "CollectionDocuments",
    "CollectionList",
    "DocumentAskRequest",
    "DocumentInfo",
    "ErrorDetail",
    "ErrorResponse",
    "Health",
    "HitOut",
    "Mode",
    "PageWarning",
    "ReportOut",
    "SearchRequest",
    "SearchResponse",
    "check_unicode",
]


# -- request and response models (the OpenAPI description is built from these) ----------------------------
Mode = Literal["auto", "think", "no_think"]

# JSON may spell a lone UTF-16 surrogate ("\\ud800"); Python accepts it in a str, but no encoder does.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_unicode(model: BaseModel) -> None:
    """Raises a ``bad_unicode`` validation error (answered 400) for a text field holding a lone surrogate."""
    for name in type(model).model_fields:
        value = getattr(model, name)
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and _SURROGATE.search(text):
                raise PydanticCustomError(
                    "bad_unicode",
                    '"{field}" is not valid Unicode (it holds a lone surrogate such as \\ud800): send well-formed '
                    "UTF-8 text",
                    {"field": name},
                )


class ErrorDetail(BaseModel):
    type: str = Field(description="Stable error code, e.g. not_a_pdf, password_required, engine_unavailable.")
    message: str = Field(description="What went wrong and how to fix it.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


class PageWarning(BaseModel):
    page: int = Field(description="Page number, from 1.")
    status: str = Field(description="The page's extraction status, e.g. no_text (scanned) or error.")
    message: str = Field(description="One line for a person, e.g. 'page 7: no text layer'.")


class DocumentInfo(BaseModel):
    id: str = Field(description="The document's id: the SHA-256 of the PDF's bytes.")
    name: str = Field(description="Display name (the upload's base name; never used as a path).")
    pages: int
    sections: int = Field(description="Clause-aware sections found.")
    extractor: str
    encrypted: bool = Field(description="True when asking needs the password again.")
    warnings: list[PageWarning] = Field(description="Pages that did not extract cleanly.")


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str | None = Field(
        None, description="One question.", examples=["What is the notice period for termination for convenience?"]
    )
    questions: list[str] | None = Field(None, description="Several questions, answered as one engine batch.")
    mode: Mode | None = Field(None, description="Thinking mode: auto (think for analysis questions), think, no_think.")
    k: int | None = Field(None, ge=1, le=64, description="Sections to retrieve per question (default 4).")
    password: str | None = Field(None, description="The PDF's password, for encrypted documents.")
    use_cache: bool = Field(True, description="Read and write the answer cache.")

    @model_validator(mode="after")
    def _one_form(self) -> AskRequest:
        check_unicode(self)
        if (self.question is None) == (self.questions is None):
            raise ValueError('send either "question" (a string) or "questions" (a list of strings)')
        return self

    def all_questions(self) -> list[str]:
        return [self.question] if self.question is not None else list(self.questions or [])


class CollectionAskRequest(AskRequest):
    """An ask of a collection: a question about every contract can be asked of each."""

    each: bool | None = Field(
        None,
        description="Ask each contract and answer as lists (found / to check / nothing found): true; answer from "
        'the best passages of a few: false; unset: as the wording asks ("Which contracts ...?" is asked of each).',
    )


class DocumentAskRequest(AskRequest):
    """An ask of one document, which can also be streamed."""

    stream: bool = Field(
        False,
        description="Answer as server-sent events (text/event-stream): `thinking` and `answer` pieces "
        '({"text": ...}) as the engine writes them, then `done` with the stored answer (as in `answers`), or '
        '`error` ({"error": {"type", "message"}}) if it fails on the way. One question only.',
    )


class CitationOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    section_id: str
    heading: str
    page_start: int
    page_end: int
    pages: str
    quote: str = Field(description="Verbatim quote from the contract.")
    verified: bool = Field(description="True when the quote was found on the stored page text.")
    score: float = 0.0
    highlight: str = Field("", description="The sentence of the quoted clause that answers best (extractive).")
    document_id: str = Field("", description="The quoted document's id (SHA-256).")
    document_name: str = Field("", description="The quoted document's name in the matter (or the collection).")
    unit: str = Field(
        "page", description="What page_start/page_end count: page, or paragraph in a Word file (it has no pages)."
    )
    ocr: bool = Field(False, description="The quote was verified against OCR text of a scanned page: check the scan.")


class AnswerOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The stored answer's id: GET /v1/answers/{id} returns it again.")
    question: str
    text: str = Field(description="The answer (the model's thinking is never part of it).")
    mode: str = Field(description="generative or extractive (no language model configured).")
    citations: list[CitationOut]
    engine: str
    model: str | None = None
    document_id: str = Field(description='The document asked ("" for a collection answer drawn from several).')
    document_name: str = ""
    collection: str = Field("", description="The collection asked, if one was.")
    document_ids: list[str] = Field(
        default_factory=list, description="A collection answer: every document whose sections were in the context."
    )
    section_ids: list[str]
    thinking: str | None = Field(None, description="The model's reasoning, kept apart for audit.")
    thinking_enabled: bool = False
    notice: str | None = None
    created: float
    each: dict[str, list[str]] | None = Field(
        None,
        description="Asked of each contract of a collection: the contracts by name where it is found, to_check, "
        "not_found, and failed (could not be read); null for an answer from pooled passages.",
    )


class AskResponse(BaseModel):
    document_id: str
    answers: list[AnswerOut]


class AnalyzeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    categories: list[str] | None = Field(
        None, max_length=200, description="Checklist categories to analyse (default: all), e.g. Governing Law."
    )
    mode: Mode = Field("think", description="Thinking mode for the analysis (default think).")
    password: str | None = Field(None, description="The PDF's password, for encrypted documents.")
    use_cache: bool = Field(True, description="Read and write the answer cache.")

    @model_validator(mode="after")
    def _valid_unicode(self) -> AnalyzeRequest:
        check_unicode(self)
        return self


class ReportOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str = Field(description="The report's id: GET /v1/reports/{id} returns it again.")
    document_id: str
    document_name: str
    mode: str
    findings: list[dict[str, Any]]
    manifest: dict[str, Any]
    seconds: float


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    engine: str = Field(description="The engine backend in effect, auto resolved: vllm, openai, echo or extractive.")
    model: str | None
    uptime_s: float


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "Bad input (empty file, malformed request)"),
        (401, "Missing or wrong bearer token"),
        (404, "Unknown document, answer or report"),
        (413, "Body too large"),
        (415, "Not a PDF"),
        (422, "Unreadable PDF, password required, or invalid request"),
        (503, "The answer engine is unavailable: try again"),
    )
}

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "description": "The PDF or Word (.docx) file: the raw body (Content-Type: application/pdf, or the .docx "
        "media type), or multipart/form-data with the "
        'field "file" (and optionally "password").',
        "content": {
            "application/pdf": {"schema": {"type": "string", "format": "binary"}},
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document": {
                "schema": {"type": "string", "format": "binary"}
            },
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "password": {"type": "string"},
                    },
                }
            },
        },
    }
}


# -- matters and their documents ----------------------------------------------------------------------------
class MatterOut(BaseModel):
    name: str = Field(description="The matter's name, e.g. deal-x.")
    role: str = Field(description="Your role in it: read, write or admin.")
    documents: int = Field(description="Documents in the matter.")


class MattersOut(BaseModel):
    user: str = Field(description="Who the key belongs to.")
    matters: list[MatterOut]


class MatterDocumentOut(BaseModel):
    id: str = Field(description="The document's id in this matter: the SHA-256 of the PDF.")
    name: str = Field(description="The name it was uploaded under in this matter.")
    added: float = Field(description="When it was first uploaded into this matter (Unix time).")
    added_by: str = Field(description="Who uploaded it first.")
    encrypted: bool


class DocumentList(BaseModel):
    matter: str
    documents: list[MatterDocumentOut]


class Deleted(BaseModel):
    matter: str
    deleted: str = Field(description="What was deleted: a document id, or the matter's name.")
    documents: int = Field(description="Documents removed from the matter.")
    answers_and_reports: int = Field(description="Stored answers and reports removed.")
    purged: int = Field(
        description="Documents whose PDF, text, indexes and cached answers left the store (no other matter holds them)."
    )
    review_jobs: int = Field(0, description="Review jobs removed with their grids (they quoted what was deleted).")


# -- collections ------------------------------------------------------------------------------------------------
class CollectionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        max_length=200,
        description="1-63 letters, digits, '.', '_' or '-', starting with a letter or digit.",
        examples=["deal-x"],
    )

    @model_validator(mode="after")
    def _valid_unicode(self) -> CollectionCreate:
        check_unicode(self)
        return self


class CollectionOut(BaseModel):
    matter: str
    name: str
    documents: int = Field(description="Documents in the collection.")


class CollectionList(BaseModel):
    matter: str
    collections: list[CollectionOut]


class CollectionMemberOut(BaseModel):
    id: str = Field(description="The document's id: the SHA-256 of the PDF; also a document of the matter.")
    name: str = Field(description="The name it goes by in the collection.")
    added: float = Field(description="When it joined the collection (Unix time).")
    pages: int


class CollectionDocuments(BaseModel):
    matter: str
    name: str
    documents: list[CollectionMemberOut]


class AddByIds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(
        max_length=256, description="Ids of documents already in the matter (GET /v1/documents lists them)."
    )
    password: str | None = Field(None, description="The password of encrypted PDFs among them.")

    @model_validator(mode="after")
    def _valid_unicode(self) -> AddByIds:
        check_unicode(self)
        return self


class AddFailure(BaseModel):
    file: str = Field(description="The file's display name.")
    reason: str = Field(description="Why it was not added, and what to do.")


class AddReportOut(BaseModel):
    matter: str
    collection: str
    added: list[CollectionMemberOut] = Field(description="Documents that joined the collection (and the matter).")
    present: list[CollectionMemberOut] = Field(description="Documents the collection held already.")
    failed: list[AddFailure] = Field(description="Files that were not added; the others were.")
    extracted_pages: int = Field(description="Pages newly extracted (documents already stored take none).")
    seconds: float


class CollectionDeleted(BaseModel):
    matter: str
    deleted: str = Field(description="The collection's name, or the id of the document taken out of it.")
    documents: int = Field(description="Documents taken out of the collection (they stay in the matter).")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(description="What to look for.", examples=["change of control"])
    k: int | None = Field(None, ge=1, le=64, description="Sections to return (default 4).")
    password: str | None = Field(None, description="The password of encrypted PDFs in the collection.")

    @model_validator(mode="after")
    def _valid_unicode(self) -> SearchRequest:
        check_unicode(self)
        return self


class HitOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    document_id: str = Field(description="The document the section is from (SHA-256).")
    document_name: str = Field(description="Its name in the collection.")
    section_id: str
    heading: str
    page_start: int
    page_end: int
    pages: str
    score: float
    rank: int
    role: str = Field(description="match, front_matter, definition or reference.")
    text: str = Field(description="The section's text.")


class SearchResponse(BaseModel):
    matter: str
    collection: str
    hits: list[HitOut]


class CollectionAskResponse(BaseModel):
    matter: str
    collection: str
    answers: list[AnswerOut]
