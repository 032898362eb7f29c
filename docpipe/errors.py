"""Errors raised by docpipe. Every message says what went wrong and how to fix it.

The tree::

    DocpipeError
    ├── ConfigError(ValueError)            bad settings or arguments
    ├── InputError(ValueError)             the input is not something docpipe can read
    │   ├── FileMissingError(FileNotFoundError)
    │   ├── EmptyFileError
    │   └── NotAPDFError                   neither a PDF nor a Word (.docx) file
    ├── ExtractionError                    a PDF or Word file could not be turned into text
    │   ├── PasswordRequiredError          encrypted, no password given
    │   ├── EncryptedWordFileError         a password-protected Word file: never decrypted, save a plain copy
    │   ├── WrongPasswordError             encrypted, the password does not open it
    │   ├── MalformedPDFError              broken structure the extractor cannot recover (PDF or Word)
    │   ├── NoTextError                    opens, but no page has a text layer (scanned?)
    │   ├── TooMuchTextError               more text than a contract holds (a crafted expansion?)
    │   ├── EncryptionCheckError           cannot tell whether it is encrypted: treated as locked
    │   └── ExtractionTimeoutError(TimeoutError)  over the per-document time bound
    ├── EngineError(RuntimeError)          the answer engine failed (start-up, a batch)
    │   └── EngineUnavailableError(ConnectionError)  a model server cannot be reached
    ├── BusyError                          every slot for the work is taken; try again later
    ├── DependencyError(ImportError)       an optional package is missing
    │   └── ModelFilesMismatchError        a packaged model or tokenizer file differs from the recorded SHA-256
    ├── StoreError(OSError)                the on-disk store cannot be written
    ├── StoreKeyError                      the store is sealed and its key is missing or another key
    └── SealedDataError(ValueError)        a sealed file does not open under its own key: damaged or moved

Context travels as keyword arguments (``path=``, ``page=``) and is kept on the exception as
attributes, so callers can act on it without parsing the message.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BusyError",
    "ConfigError",
    "DependencyError",
    "DocpipeError",
    "EmptyFileError",
    "EncryptedWordFileError",
    "EncryptionCheckError",
    "EngineError",
    "EngineUnavailableError",
    "ExtractionError",
    "ExtractionTimeoutError",
    "FileMissingError",
    "InputError",
    "MalformedPDFError",
    "ModelFilesMismatchError",
    "NoTextError",
    "NotAPDFError",
    "PasswordRequiredError",
    "SealedDataError",
    "StoreError",
    "StoreKeyError",
    "TooMuchTextError",
    "WrongPasswordError",
]


class DocpipeError(Exception):
    """Root of every error docpipe raises on purpose.

    >>> try:
    ...     raise NotAPDFError("not a PDF: convert it to PDF first", path="notes.txt")
    ... except DocpipeError as exc:
    ...     print(exc.path)
    notes.txt
    """

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context
        for key, value in context.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return self.message


class ConfigError(DocpipeError, ValueError):
    """Settings or arguments that cannot work together."""


class InputError(DocpipeError, ValueError):
    """The input is not something docpipe can read."""


class FileMissingError(InputError, FileNotFoundError):
    """The path does not exist."""


class EmptyFileError(InputError):
    """The file has zero bytes."""


class NotAPDFError(InputError):
    """The bytes are neither a PDF nor a Word (.docx) file."""


class ExtractionError(DocpipeError):
    """A PDF could not be turned into text."""


class PasswordRequiredError(ExtractionError):
    """The PDF is encrypted and no password was given."""


class EncryptedWordFileError(ExtractionError):
    """A password-protected Word file: docpipe does not decrypt Word files (a password would not help)."""


class WrongPasswordError(ExtractionError):
    """The given password does not open the PDF."""


class MalformedPDFError(ExtractionError):
    """The PDF's (or Word file's) structure is broken beyond what the extractor can recover."""


class NoTextError(ExtractionError):
    """The PDF opens, but no page yields text (image-only or scanned without OCR)."""


class TooMuchTextError(ExtractionError):
    """The extracted text passed ``max_page_chars`` on one page or ``max_chars`` in all (``page`` says where)."""


class EncryptionCheckError(ExtractionError):
    """Whether the PDF is encrypted, or whether a password opens it, could not be decided; it counts as locked."""


class ExtractionTimeoutError(ExtractionError, TimeoutError):
    """Extraction ran over the per-document time bound."""


class EngineError(DocpipeError, RuntimeError):
    """The answer engine failed to start or to run a batch."""


class EngineUnavailableError(EngineError, ConnectionError):
    """The language model server cannot be reached, or keeps failing, after the retries."""


class BusyError(DocpipeError):
    """Every slot for the work is taken and none came free in time (``retry_after_s`` says when to retry)."""


class DependencyError(DocpipeError, ImportError):
    """An optional dependency is not installed."""


class ModelFilesMismatchError(DependencyError):
    """A packaged embedder or tokenizer file is missing or not the one docpipe recorded (``path``, ``expected``,
    ``found``): every stored index was built from those files, so docpipe refuses to use others."""


class StoreError(DocpipeError, OSError):
    """The on-disk store cannot be read or written."""


class StoreKeyError(DocpipeError):
    """The store is encrypted at rest and the store key is missing, malformed or not the one that sealed it
    (``key_id`` names the sealing key). Deliberately neither an OSError nor a ValueError: code that rebuilds
    damaged store entries catches those, and a missing key must never be taken for damage."""


class SealedDataError(DocpipeError, ValueError):
    """A sealed store file does not open under the key that sealed it: it was changed, cut short or moved from
    another place. Damage, which the store rebuilds like any damaged entry."""
