"""Who is using the workbench, and which matters they may see.

With API keys created (``docpipe keys create``) the workbench is behind the same keys as the REST API: log
in with your user name and one of your API keys as the password. A session then acts in one of the user's
matters at a time, with the rights the user's live keys grant there (revoking a key applies at the next
click); it sees that matter's documents under the names they were uploaded with, and every action on
contract content is written to the access log, as over the API.

Without keys (a single user on this machine, or a shared ``user:password`` login) the workbench works in the
store's own matter: the documents and collections the command line made on the same store are there, and what
is uploaded here is there for the command line. Its actions are logged in that matter.
"""

from __future__ import annotations

import secrets
from typing import Any

from docpipe import AccessLog, DocPipe, DocpipeError, Document, KeyStore, MatterStore, Principal
from docpipe.access.keys import check_matter_name
from docpipe.access.scope import adopt_own_store
from docpipe.types import OWN_MATTER

__all__ = ["WorkbenchAccess"]


class WorkbenchAccess:
    """Who may use the workbench and what they see: the login check, the caller's principal and matters, and
    the access-log lines of their actions.

    >>> import tempfile; from docpipe import Settings                  # doctest: +SKIP
    >>> access = WorkbenchAccess(DocPipe(Settings.preset("test", home=tempfile.mkdtemp())))  # doctest: +SKIP
    >>> access.auth() is None                                           # doctest: +SKIP
    True
    """

    def __init__(self, dp: DocPipe, ui_auth: tuple[str, str] | None = None) -> None:
        self.dp = dp
        self.keys = KeyStore(dp.store.root)
        self.matters = MatterStore(dp.store.root)
        self.log = AccessLog(dp.store.root, key_file=dp.settings.audit_key_file)
        self.log.prepare()  # the wrong audit key fails at the start, not at the first click
        # What the command line and the library ingested is the store's own matter's, before the first click.
        adopt_own_store(dp.store, dp.settings.extraction.extractor)
        self.ui_auth = ui_auth

    # -- login -------------------------------------------------------------------------------------
    def login(self, user: str, password: str) -> bool:
        """Returns True for the shared ``user:password`` login, or a user name with one of its live keys."""
        if self.ui_auth is not None:
            same_user = secrets.compare_digest(str(user).encode(), self.ui_auth[0].encode())
            same_password = secrets.compare_digest(str(password).encode(), self.ui_auth[1].encode())
            if same_user and same_password:
                return True
        principal = self.keys.authenticate(password)
        return principal is not None and principal.user == user

    def auth(self) -> Any:
        """Returns Gradio's ``auth`` argument: the login check when anyone must log in, else None."""
        return self.login if (self.ui_auth is not None or self.keys.configured()) else None

    @property
    def keyed(self) -> bool:
        """Returns True when the server has API keys: matters, not browser sessions, scope documents."""
        return self.keys.configured()

    def principal(self, request: Any) -> Principal:
        """Returns the logged-in user's rights (the union of their live keys); without keys, the single user's:
        the store's own matter, what the command line and the library see (`docpipe.types.OWN_MATTER`).
        Raises DocpipeError when keys exist but the session has no user who holds one."""
        if not self.keyed:
            return Principal(self.user(request), "workbench", {OWN_MATTER: "admin"})
        user = getattr(request, "username", None)
        principal = self.keys.principal_for_user(user) if user else None
        if principal is None:
            raise DocpipeError(
                "log in with your user name and API key (docpipe keys create); a key that was revoked no longer "
                "opens the workbench"
            )
        return principal

    def user(self, request: Any) -> str:
        """Returns the logged-in user's name, or ``local`` without a login."""
        return getattr(request, "username", None) or "local"

    # -- matters -----------------------------------------------------------------------------------
    def matter_choices(self, principal: Principal) -> list[str]:
        """Returns the matters the principal may read, by name (all known ones for an operator's ``*``)."""
        names = set(principal.matters())
        if principal.everywhere:
            names |= set(self.matters.matters())
        return sorted(names)

    def check(self, principal: Principal, matter: str | None, role: str, *, action: str = "request") -> str:
        """Returns `matter` when the principal holds `role` in it; DocpipeError saying what is missing. A refusal
        of a well-formed matter is written to the access log as `action` with outcome ``denied``, as the API's
        refusals are."""
        matter = self.matter_or_own(matter)
        if not matter:
            raise DocpipeError("choose a matter first (the Matter list at the top)")
        check_matter_name(matter)  # the page sends what the browser sends: never log an arbitrary string
        if not principal.can(matter, role):
            held = principal.role(matter)
            message = (
                f"you may {held} in matter {matter!r}; this needs {role}: ask an admin of the matter"
                if held
                else f"no matter {matter!r} for your keys"
            )
            self.log.record(
                user=principal.user,
                key_id="workbench",
                matter=matter,
                action=action,
                outcome="denied",
                detail=message,
            )
            raise DocpipeError(message)
        return matter

    def matter_or_own(self, matter: str | None) -> str | None:
        """Returns `matter`; without keys, where there is no Matter list, the store's own when none is given."""
        return matter or (None if self.keyed else OWN_MATTER)

    def documents(self, principal: Principal, matter: str | None) -> list[tuple[str, str]]:
        """Returns (label, id) for the matter's documents the principal may read."""
        matter = self.matter_or_own(matter)
        if not matter or not principal.can(matter, "read"):
            return []
        return [(f"{d.name} ({d.id[:8]})", d.id) for d in self.matters.documents(matter)]

    def collections(self, principal: Principal, matter: str | None) -> list[str]:
        """Returns the names of the matter's collections the principal may read."""
        matter = self.matter_or_own(matter)
        if not matter or not principal.can(matter, "read"):
            return []
        return [c.name for c in self.dp.collections(matter=matter)]

    def grant_ids(self, principal: Principal) -> set[str]:
        """Returns the ids an encrypted document's grant may name for this user: their live keys and their
        workbench logins."""
        ids = {k.key_id for k in self.keys.keys() if k.user == principal.user and not k.revoked}
        return ids | {f"workbench:{principal.user}"}

    def open(self, principal: Principal, matter: str | None, doc_id: str | None) -> Document:
        """Returns the matter's view of the document for reading; an encrypted one only for a user granted
        it (who opened it with its password)."""
        matter = self.check(principal, matter, "read", action="read_document")
        record = self.matters.get(matter, doc_id or "")
        if record is None:
            raise DocpipeError("choose a document of this matter from the list first")
        if record.encrypted and not (set(record.granted) & self.grant_ids(principal)):
            raise DocpipeError(f"{record.name} is encrypted: upload it again with its password (Upload tab) to open it")
        doc = self.dp.document(record.id, authorized=True, name=record.name, matter=matter)
        if doc is None:
            raise DocpipeError(f"{record.name} is no longer stored: upload it again")
        return doc

    def added(self, principal: Principal, matter: str, doc: Document, name: str) -> None:
        """Records an upload in the matter (an encrypted PDF opened with its password is granted to the user)."""
        self.matters.add(
            self.matter_or_own(matter) or matter,
            doc.id,
            name=name,
            user=principal.user,
            key_id=f"workbench:{principal.user}",
            encrypted=doc.encrypted,
        )

    def record(
        self,
        request: Any,
        matter: str | None,
        action: str,
        document: str | None = None,
        questions: list[str] | None = None,
        outcome: str = "ok",
    ) -> None:
        """Appends the action to the access log, as the API's routes do."""
        self.log.record(
            user=self.user(request),
            key_id="workbench",
            matter=matter or OWN_MATTER,
            action=action,
            document=document,
            question=questions,
            outcome=outcome,
        )
