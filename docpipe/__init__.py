"""docpipe: ask questions of long contracts and get answers with checked page citations.

>>> from docpipe import DocPipe                                   # doctest: +SKIP
>>> dp = DocPipe()                                                # doctest: +SKIP
>>> answer = dp.ask("contract.pdf", "What is the notice period for termination for convenience?")  # doctest: +SKIP
>>> [(c.pages, c.quote, c.verified) for c in answer.citations]  # doctest: +SKIP

Importing docpipe is cheap: torch, faiss and the embedder load when first used.
"""

from docpipe.access.log import AccessLog
from docpipe.analysis.report import CategoryFinding, ContractReport
from docpipe.audit import AuditManifest
from docpipe.analysis.checklist import CHECKLIST, Category
from docpipe.types import Answer, Citation, Document, Hit, Page, PageStatus, Passage, Section
from docpipe.embed.base import HashingEmbedder
from docpipe.errors import (
    BusyError,
    ConfigError,
    DependencyError,
    DocpipeError,
    EmptyFileError,
    EncryptionCheckError,
    EngineError,
    EngineUnavailableError,
    ExtractionError,
    ExtractionTimeoutError,
    FileMissingError,
    InputError,
    MalformedPDFError,
    NoTextError,
    NotAPDFError,
    PasswordRequiredError,
    StoreError,
    TooMuchTextError,
    WrongPasswordError,
)
from docpipe.access.keys import KeyStore, Principal
from docpipe.access.matters import MatterDocument, MatterStore
from docpipe.pipeline import DocPipe
from docpipe.settings import Settings
from docpipe.answer.streaming import AnswerEvent

from docpipe.version import __version__

__all__ = [
    "CHECKLIST",
    "AccessLog",
    "Answer",
    "AuditManifest",
    "BusyError",
    "Category",
    "CategoryFinding",
    "AnswerEvent",
    "Citation",
    "ConfigError",
    "ContractReport",
    "DependencyError",
    "DocPipe",
    "DocpipeError",
    "Document",
    "EmptyFileError",
    "EncryptionCheckError",
    "EngineError",
    "EngineUnavailableError",
    "ExtractionError",
    "ExtractionTimeoutError",
    "FileMissingError",
    "HashingEmbedder",
    "Hit",
    "InputError",
    "KeyStore",
    "MalformedPDFError",
    "MatterDocument",
    "MatterStore",
    "NoTextError",
    "NotAPDFError",
    "Page",
    "PageStatus",
    "Passage",
    "PasswordRequiredError",
    "Principal",
    "Section",
    "Settings",
    "StoreError",
    "TooMuchTextError",
    "WrongPasswordError",
    "__version__",
]
