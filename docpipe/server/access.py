"""Who is calling and in which matter: a request's bearer credential becomes a `Principal` (a per-user API
key; the server's single ``--token``; or, on a loopback server with neither, the local user), and its
``X-Matter`` header (or ``?matter=``) the matter it acts in, checked against the principal's grants."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from docpipe.access.keys import ROLES, KeyStore, Principal, check_matter_name

__all__ = ["DEFAULT_MATTER", "MATTER_HEADER", "AccessDenied", "Caller", "authenticate", "choose_matter"]

DEFAULT_MATTER = "default"
MATTER_HEADER = "X-Matter"
# The server's single token and an unauthenticated loopback server act for one party: every matter.
LOCAL = Principal("local", "local", {"*": "admin"})
TOKEN = Principal("token", "token", {"*": "admin"})


class AccessDenied(Exception):
    """A request the caller may not make: the HTTP status (401, 403, 404, 400), a message saying what to do and,
    for a matter refused to a known caller (403, 404), the matter."""

    def __init__(self, status: int, message: str, *, matter: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.matter = matter


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling, the matter the request acts in, and the role they hold there."""

    principal: Principal
    matter: str
    role: str

    @property
    def user(self) -> str:
        return self.principal.user

    @property
    def key_id(self) -> str:
        return self.principal.key_id


def authenticate(keys: KeyStore, token: str | None, header: str | None) -> Principal:
    """Returns the principal for an ``Authorization`` header; AccessDenied(401) when it proves nothing.

    With keys created (``docpipe keys create``) a key is required (the server's token, if any, still works
    as an operator's credential); with only a token, the token; with neither, the local user (the server
    refuses to bind a non-loopback address in that case)."""
    scheme, _, given = (header or "").partition(" ")
    given = given.strip() if scheme.lower() == "bearer" else ""
    if token is not None and given and secrets.compare_digest(given.encode(), token.encode()):
        return TOKEN
    if keys.configured():
        principal = keys.authenticate(given)
        if principal is None:
            raise AccessDenied(
                401,
                "missing API key: send Authorization: Bearer <key> (docpipe keys create gives one)"
                if not given
                else "unknown or revoked API key: ask the server's operator for a key (docpipe keys create)",
            )
        return principal
    if token is not None:
        raise AccessDenied(
            401,
            "missing bearer token: send the header Authorization: Bearer <token> (the server's token)"
            if not given
            else "wrong bearer token: check the token the server was started with",
        )
    return LOCAL


def choose_matter(principal: Principal, requested: str | None, role: str) -> Caller:
    """Returns the caller in the requested matter (or their only one); AccessDenied when they may not act
    there. A matter the principal has no grant on is reported as not found, not as forbidden, so its
    existence does not leak."""
    if requested:
        try:
            matter = check_matter_name(requested.strip())
        except ValueError as exc:
            raise AccessDenied(400, str(exc)) from None
    else:
        named = principal.matters()
        if principal.everywhere:
            matter = DEFAULT_MATTER
        elif len(named) == 1:
            matter = named[0]
        else:
            raise AccessDenied(
                400,
                f"this key can use several matters ({', '.join(named)}): name one in the {MATTER_HEADER} header "
                "or ?matter=",
            )
    held = principal.role(matter)
    if held is None:
        raise AccessDenied(404, f"no matter {matter!r} for this key: GET /v1/matters lists yours", matter=matter)
    if ROLES.index(held) < ROLES.index(role):
        raise AccessDenied(
            403,
            f"your key may {held} in matter {matter!r}; this needs {role}: ask an admin of the matter",
            matter=matter,
        )
    return Caller(principal, matter, held)
