"""docpipe: ask questions of long contracts and get answers with checked page citations.

>>> from docpipe import DocPipe                                   # doctest: +SKIP
>>> dp = DocPipe()                                                # doctest: +SKIP
>>> answer = dp.ask("contract.pdf", "What is the notice period for termination for convenience?")  # doctest: +SKIP
>>> [(c.pages, c.quote, c.verified) for c in answer.citations]  # doctest: +SKIP

Importing docpipe is cheap: each public name is imported from its module when first used (PEP 562), and
torch, faiss and the embedder load only when a document is embedded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from docpipe import errors as _errors  # standard library only: cheap to import eagerly
from docpipe.version import __version__

# Public name -> the module that defines it.
_EXPORTS = {
    "AccessLog": "docpipe.access.log",
    "KeyStore": "docpipe.access.keys",
    "Principal": "docpipe.access.keys",
    "MatterDocument": "docpipe.access.matters",
    "MatterStore": "docpipe.access.matters",
    "CHECKLIST": "docpipe.analysis.checklist",
    "Category": "docpipe.analysis.checklist",
    "CategoryFinding": "docpipe.analysis.report",
    "ContractReport": "docpipe.analysis.report",
    "AnswerEvent": "docpipe.answer.streaming",
    "AuditManifest": "docpipe.audit",
    "HashingEmbedder": "docpipe.embed.hashing",
    "EchoEngine": "docpipe.engine.fake",
    "Engine": "docpipe.engine.base",
    "GenerationRequest": "docpipe.engine.base",
    "GenerationResult": "docpipe.engine.base",
    "DocPipe": "docpipe.pipeline",
    "Collection": "docpipe.collection.handle",
    "AddReport": "docpipe.collection.handle",
    "AddProgress": "docpipe.collection.handle",
    "Member": "docpipe.storage.collections",
    "ReviewGrid": "docpipe.review.grid",
    "ReviewProgress": "docpipe.review.run",
    "ReviewCancelled": "docpipe.review.run",
    "Settings": "docpipe.settings",
    **{
        name: "docpipe.types"
        for name in ("Answer", "Citation", "Document", "Hit", "Page", "PageStatus", "Passage", "Section")
    },
    **dict.fromkeys(_errors.__all__, "docpipe.errors"),
}

__all__ = [
    "AccessLog",
    "AddProgress",
    "AddReport",
    "Answer",
    "AnswerEvent",
    "AuditManifest",
    "BusyError",
    "CHECKLIST",
    "Category",
    "CategoryFinding",
    "Citation",
    "Collection",
    "ConfigError",
    "ContractReport",
    "DependencyError",
    "DocPipe",
    "DocpipeError",
    "Document",
    "EchoEngine",
    "EmptyFileError",
    "EncryptedWordFileError",
    "EncryptionCheckError",
    "Engine",
    "EngineError",
    "EngineUnavailableError",
    "ExtractionError",
    "ExtractionTimeoutError",
    "FileMissingError",
    "GenerationRequest",
    "GenerationResult",
    "HashingEmbedder",
    "Hit",
    "InputError",
    "KeyStore",
    "MalformedPDFError",
    "MatterDocument",
    "MatterStore",
    "Member",
    "ModelFilesMismatchError",
    "NoTextError",
    "NotAPDFError",
    "Page",
    "PageStatus",
    "Passage",
    "PasswordRequiredError",
    "Principal",
    "ReviewCancelled",
    "ReviewGrid",
    "ReviewProgress",
    "SealedDataError",
    "Section",
    "Settings",
    "StoreError",
    "StoreKeyError",
    "TooMuchTextError",
    "WrongPasswordError",
    "__version__",
]
assert set(__all__) == {*_EXPORTS, "__version__"}, "every export has a module, and only those are exported"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'docpipe' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from docpipe.access.keys import KeyStore, Principal
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterDocument, MatterStore
    from docpipe.analysis.checklist import CHECKLIST, Category
    from docpipe.analysis.report import CategoryFinding, ContractReport
    from docpipe.answer.streaming import AnswerEvent
    from docpipe.audit import AuditManifest
    from docpipe.collection.handle import AddProgress, AddReport, Collection
    from docpipe.embed.hashing import HashingEmbedder
    from docpipe.engine.base import Engine, GenerationRequest, GenerationResult
    from docpipe.engine.fake import EchoEngine
    from docpipe.errors import (
        BusyError,
        ConfigError,
        DependencyError,
        DocpipeError,
        EmptyFileError,
        EncryptedWordFileError,
        EncryptionCheckError,
        EngineError,
        EngineUnavailableError,
        ExtractionError,
        ExtractionTimeoutError,
        FileMissingError,
        InputError,
        MalformedPDFError,
        ModelFilesMismatchError,
        NotAPDFError,
        NoTextError,
        PasswordRequiredError,
        StoreError,
        TooMuchTextError,
        WrongPasswordError,
    )
    from docpipe.pipeline import DocPipe
    from docpipe.review.grid import ReviewGrid
    from docpipe.review.run import ReviewCancelled, ReviewProgress
    from docpipe.settings import Settings
    from docpipe.storage.collections import Member
    from docpipe.types import Answer, Citation, Document, Hit, Page, PageStatus, Passage, Section
