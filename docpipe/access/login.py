"""Whether a listening address needs a login, and the shared ``user:password`` login of the workbench: one
implementation for `docpipe serve` and the standalone workbench (``docpipe ui``)."""

from __future__ import annotations

import ipaddress

from docpipe.errors import ConfigError

__all__ = ["UI_AUTH_ENV", "is_loopback", "parse_login"]

UI_AUTH_ENV = "DOCPIPE_UI_AUTH"


def is_loopback(host: str) -> bool:
    """Returns True for an address only this machine can reach (localhost, 127.0.0.0/8, ::1, [::1]).

    >>> is_loopback("127.0.0.2"), is_loopback("[::1]"), is_loopback("0.0.0.0"), is_loopback("example.org")
    (True, True, False, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_login(value: str | None, *, option: str = "--ui-auth") -> tuple[str, str] | None:
    """Returns (user, password) from ``user:password`` (the password may hold colons); None for empty or None.
    A ConfigError naming `option` and ``DOCPIPE_UI_AUTH`` for anything else.

    >>> parse_login("alice:s3:cret"), parse_login("")
    (('alice', 's3:cret'), None)
    """
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"{option} / {UI_AUTH_ENV} must look like user:password")
    return user, password
