"""One matter of the store, as its owner acts in it from the command line (``--matter``; the store's own matter,
``default``, when none is named).

What the owner adds is filed in the matter as an upload over the API is (its name there, who and when), so
`docpipe serve` and `docpipe ui` on the same store list it; every action on the matter's documents is written to
the access log as the server writes it, with the user ``owner`` and the key id ``cli``. The owner may act in
every matter (there is no key to check: whoever can read the store folder is its owner), but a document is only
asked, reviewed or listed in a matter that holds it, so nothing crosses matters by accident.

`adopt_own_documents` files into the store's own matter what the command line and the library ingested before
they filed anything (documents no matter holds, and the members of the store's own collections), so a store made
by an older docpipe shows its documents to a server or workbench without keys.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from docpipe.access.keys import check_matter_name
from docpipe.access.log import AccessLog
from docpipe.access.matters import MatterDocument, MatterStore
from docpipe.errors import InputError
from docpipe.ingest.build import stored_label
from docpipe.storage.collections import CollectionStore
from docpipe.types import OWN_MATTER

if TYPE_CHECKING:
    from docpipe.storage.store import Store

__all__ = ["OWNER_KEY_ID", "OWNER_USER", "OwnerScope", "adopt_own_documents", "adopt_own_store", "logged"]

logger = logging.getLogger(__name__)

OWNER_USER = "owner"
OWNER_KEY_ID = "cli"
_ADOPTED = ".adopted-v1"


@dataclass(slots=True)
class OwnerScope:
    """The store's owner in one matter: filing documents there, checking what it holds, logging each action.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> scope = OwnerScope.open(root, "deal-x")
    >>> _ = scope.file("ab" * 32, "msa.pdf", encrypted=False)
    >>> scope.holds("ab" * 32), OwnerScope.open(root, None).holds("ab" * 32)
    (True, False)
    """

    root: Path
    matter: str
    log: AccessLog
    matters: MatterStore

    @classmethod
    def open(cls, root: Path, matter: str | None, *, audit_key_file: Path | None = None) -> OwnerScope:
        """Returns the owner's scope in `matter` (the store's own when None); ConfigError for a bad name."""
        name = check_matter_name(matter) if matter else OWN_MATTER
        return cls(Path(root), name, AccessLog(Path(root), key_file=audit_key_file), MatterStore(Path(root)))

    @property
    def own(self) -> bool:
        """True in the store's own matter (what the library and a server without keys see)."""
        return self.matter == OWN_MATTER

    @property
    def library_matter(self) -> str | None:
        """The matter to give the library's calls (``dp.collection(..., matter=)``): None for the own matter."""
        return None if self.own else self.matter

    def file(self, doc_id: str, name: str, *, encrypted: bool) -> MatterDocument:
        """Returns the matter's record of the document, made now if it had none (an encrypted PDF the owner
        opened grants the owner's key, as an upload with its password does)."""
        return self.matters.add(
            self.matter, doc_id, name=name, user=OWNER_USER, key_id=OWNER_KEY_ID, encrypted=encrypted
        )

    def holds(self, doc_id: str) -> bool:
        """True when the matter holds the document."""
        return self.matters.get(self.matter, doc_id) is not None

    def check_holds(self, doc_id: str, name: str) -> None:
        """InputError (naming the fix) when the matter does not hold the document."""
        if not self.holds(doc_id):
            raise InputError(
                f"{name} is not in matter {self.matter!r}: add it there first "
                f"(docpipe ingest --matter {self.matter} FILE), or leave out --matter"
            )

    def documents(self) -> list[MatterDocument]:
        """Returns the matter's documents, oldest first."""
        return self.matters.documents(self.matter)

    def record(
        self,
        action: str,
        document: str | None = None,
        questions: list[str] | None = None,
        *,
        outcome: str = "ok",
        detail: str = "",
    ) -> None:
        """Appends the access-log line of one action (as `logged`, for an action already done)."""
        self.log.record(
            user=OWNER_USER,
            key_id=OWNER_KEY_ID,
            matter=self.matter,
            action=action,
            document=document,
            question=questions,
            outcome=outcome,
            detail=_who_detail(detail),
        )

    def logged(
        self, action: str, document: str | None = None, questions: list[str] | None = None, detail: str = ""
    ) -> contextlib.AbstractContextManager[None]:
        """Runs the action's body, then appends its access-log line with the outcome (an error's type)."""
        return logged(
            self.log,
            user=OWNER_USER,
            key_id=OWNER_KEY_ID,
            matter=self.matter,
            action=action,
            document=document,
            question=questions,
            detail=_who_detail(detail),
        )


@contextlib.contextmanager
def logged(
    audit: AccessLog,
    *,
    user: str,
    key_id: str,
    matter: str,
    action: str,
    document: str | None = None,
    question: str | list[str] | None = None,
    detail: str = "",
) -> Iterator[None]:
    """Runs the action's body, then appends its access-log line with the outcome: ``ok``, or the error's type
    (the server's routes and the command line both log through it)."""
    outcome = "ok"
    try:
        yield
    except BaseException as exc:
        outcome = type(exc).__name__
        raise
    finally:
        audit.record(
            user=user,
            key_id=key_id,
            matter=matter,
            action=action,
            document=document,
            question=question,
            outcome=outcome,
            detail=detail,
        )


def _who_detail(detail: str) -> str:
    """Returns the detail with the operating-system account the command line ran as (the owner is a role)."""
    try:
        account = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        account = "?"
    return f"{detail}; os user {account}" if detail else f"os user {account}"


def adopt_own_documents(root: Path, document_ids: list[str], describe: Callable[[str], tuple[str, bool]]) -> int:
    """Returns how many documents were filed into the store's own matter: the members of the store's own
    collections it does not hold yet (every time), and once per store the documents no matter holds (what an
    older command line ingested). Run it before a server or workbench takes requests: a document a server is
    uploading into another matter at that moment would otherwise be taken for the owner's.

    `describe` gives a loose document's name and whether it is an encrypted PDF (whose text then needs the
    password, as it did)."""
    matters = MatterStore(Path(root))
    filed = 0

    def adopt(doc_id: str, name: str | None) -> None:
        nonlocal filed
        if matters.get(OWN_MATTER, doc_id) is None:
            stored_name, encrypted = describe(doc_id)
            matters.add(
                OWN_MATTER,
                doc_id,
                name=name or stored_name or doc_id[:12],
                user=OWNER_USER,
                key_id=OWNER_KEY_ID,
                encrypted=encrypted,
                grant=False,
            )
            filed += 1

    own = CollectionStore(Path(root) / "collections")
    for collection in own.names():
        for member in own.members(collection):
            adopt(member.id, member.name)
    marker = matters.root / OWN_MATTER / _ADOPTED
    if not marker.exists():
        held = {r.id for m in matters.matters() for r in matters.documents(m)}
        for doc_id in document_ids:
            if doc_id not in held:
                adopt(doc_id, None)
        matters.ensure(OWN_MATTER, user=OWNER_USER)
        marker.touch(mode=0o600)
    if filed:
        logger.info("filed %d of the store's own documents into its matter %r", filed, OWN_MATTER)
    return filed


def adopt_own_store(store: Store, extractor: str) -> int:
    """`adopt_own_documents` over a store: its documents, named and flagged from their extraction records."""
    return adopt_own_documents(store.root, store.document_ids(), lambda doc_id: stored_label(store, doc_id, extractor))
