"""Per-user API keys and the matters they may use: who may read, write or administer which matter.

A matter is the unit of isolation on a shared server (a client's deal, a dispute): its documents, answers,
reports and cache entries are invisible to keys without it. A key is ``dpk_<key id>_<secret>``; only the
SHA-256 of the secret is kept (the secret is 32 random bytes, so a fast hash is enough: there is nothing
to guess), in ``<store>/access/keys.json`` (0600). The file is re-read when it changes, so a key revoked
with ``docpipe keys revoke`` stops working in a running server at its next request.

Roles, each including the ones before it: ``read`` (list, ask, analyze, read answers and reports),
``write`` (upload and delete documents), ``admin`` (delete the whole matter). A grant on ``*`` covers
every matter (an operator's key).

>>> import tempfile; keys = KeyStore(Path(tempfile.mkdtemp()))
>>> secret, info = keys.create("alice", {"deal-x": "write"})
>>> keys.authenticate(secret).can("deal-x", "read"), keys.authenticate(secret).can("other", "read")
(True, False)
>>> _ = keys.revoke(info.key_id); keys.authenticate(secret) is None
True
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docpipe.errors import ConfigError, StoreError
from docpipe.storage.store import atomic_write, make_private_dir

__all__ = ["ROLES", "ApiKey", "KeyStore", "Principal", "check_matter_name", "parse_grants"]

logger = logging.getLogger(__name__)

ROLES = ("read", "write", "admin")
ALL_MATTERS = "*"
_KEY = re.compile(r"^dpk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
_MATTER = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_USER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")


def check_matter_name(name: str) -> str:
    """Returns `name` when it is a valid matter name (lowercase letters, digits, ``.``, ``_``, ``-``)."""
    if not isinstance(name, str) or not _MATTER.match(name):
        raise ConfigError(
            f"{str(name)[:80]!r} is not a matter name: use 1-63 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit (e.g. deal-x or 2026-acme)"
        )
    return name


def parse_grants(values: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Returns {matter: role} from ``MATTER[:ROLE]`` strings (role defaults to read; ``*`` is every matter).

    >>> parse_grants(["deal-x:write", "precedents"])
    {'deal-x': 'write', 'precedents': 'read'}
    """
    grants: dict[str, str] = {}
    for value in values:
        matter, _, role = value.partition(":")
        role = role or "read"
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r} in {value!r}: use read, write or admin (e.g. deal-x:write)")
        if matter != ALL_MATTERS:
            check_matter_name(matter)
        grants[matter] = role
    if not grants:
        raise ConfigError("a key needs at least one matter: --matter NAME[:read|write|admin]")
    return grants


@dataclass(frozen=True, slots=True)
class Principal:
    """Returns what a caller may do: its user, key id and grants ({matter: role}).

    >>> p = Principal("alice", "0123456789ab", {"deal-x": "write"})
    >>> p.can("deal-x", "write"), p.can("deal-x", "admin"), p.matters()
    (True, False, ['deal-x'])
    """

    user: str
    key_id: str
    grants: Mapping[str, str] = field(default_factory=dict)

    def role(self, matter: str) -> str | None:
        own = self.grants.get(matter)
        every = self.grants.get(ALL_MATTERS)
        ranked = [r for r in (own, every) if r]
        return max(ranked, key=ROLES.index) if ranked else None

    def can(self, matter: str, role: str) -> bool:
        """Returns True when the principal holds `role` (or a higher one) on `matter`."""
        held = self.role(matter)
        return held is not None and ROLES.index(held) >= ROLES.index(role)

    def matters(self) -> list[str]:
        """Returns the matters granted by name (not those reached through ``*``)."""
        return sorted(m for m in self.grants if m != ALL_MATTERS)

    @property
    def everywhere(self) -> bool:
        return ALL_MATTERS in self.grants


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One key's public record: whose it is, its grants, when made and revoked (never its secret)."""

    key_id: str
    user: str
    grants: dict[str, str]
    created: float
    revoked: float | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "user": self.user,
            "grants": dict(self.grants),
            "created": self.created,
            "revoked": self.revoked,
            "note": self.note,
        }


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class KeyStore:
    """Returns principals for API keys and keeps the keys' records in ``<root>/access/keys.json``."""

    def __init__(self, root: Path) -> None:
        self.folder = Path(root) / "access"
        self.path = self.folder / "keys.json"
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._records: dict[str, dict[str, Any]] = {}

    # -- reading -----------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, Any]]:
        """Returns the records, re-read when the file changed (a revocation applies at once)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            self._seen, self._records = None, {}
            return self._records
        marker = (stat.st_mtime_ns, stat.st_size)
        if marker != self._seen:
            try:
                data = json.loads(self.path.read_bytes())
                records = data["keys"] if isinstance(data, dict) else None
                if not isinstance(records, dict):
                    raise ValueError("no 'keys' object")
            except (OSError, ValueError, KeyError) as exc:
                # Failing closed: an unreadable key file admits nobody.
                logger.error("cannot read the API keys in %s (%s): no key is accepted", self.path, exc)
                records = {}
            self._records, self._seen = records, marker
        return self._records

    def configured(self) -> bool:
        """Returns True when any key (revoked or not) was ever created: the server then requires keys. A key
        file that exists but cannot be read counts too (failing closed: it admits nobody, rather than turning
        the server keyless)."""
        with self._lock:
            return bool(self._load()) or self.path.exists()

    def keys(self) -> list[ApiKey]:
        """Returns every key's public record, oldest first."""
        with self._lock:
            records = self._load()
        out = [
            ApiKey(kid, r["user"], dict(r["grants"]), r["created"], r.get("revoked"), r.get("note", ""))
            for kid, r in records.items()
        ]
        return sorted(out, key=lambda k: k.created)

    def authenticate(self, secret: str | None) -> Principal | None:
        """Returns the key's principal, or None for an unknown, malformed or revoked key (constant-time compare)."""
        match = _KEY.match(secret or "")
        if match is None:
            return None
        key_id, raw = match.groups()
        with self._lock:
            record = self._load().get(key_id)
        if record is None or record.get("revoked"):
            return None
        if not secrets.compare_digest(_digest(raw), str(record.get("sha256", ""))):
            return None
        return Principal(record["user"], key_id, dict(record["grants"]))

    def principal_for_user(self, user: str) -> Principal | None:
        """Returns the union of the grants of `user`'s live keys (the workbench session's rights), or None."""
        grants: dict[str, str] = {}
        for key in self.keys():
            if key.user != user or key.revoked:
                continue
            for matter, role in key.grants.items():
                if matter not in grants or ROLES.index(role) > ROLES.index(grants[matter]):
                    grants[matter] = role
        return Principal(user, "workbench", grants) if grants else None

    # -- writing -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _writing(self) -> Iterator[dict[str, dict[str, Any]]]:
        """Yields the records to change under an exclusive file lock (the CLI and a server may race)."""
        try:
            make_private_dir(self.folder)
            lock = os.fdopen(os.open(self.folder / ".keys.lock", os.O_RDWR | os.O_CREAT, 0o600), "r+")
        except OSError as exc:
            raise StoreError(f"cannot write the API keys: {exc.strerror}", path=str(self.folder)) from exc
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with self._lock:
                self._seen = None
                records = dict(self._load())
            yield records
            atomic_write(self.path, json.dumps({"format": 1, "keys": records}, indent=1).encode())
            os.chmod(self.path, 0o600)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()

    def create(self, user: str, grants: Mapping[str, str], *, note: str = "") -> tuple[str, ApiKey]:
        """Returns (the secret key, shown once; its record). Keep the secret: only its hash is stored."""
        if not isinstance(user, str) or not _USER.match(user):
            raise ConfigError(f"{str(user)[:80]!r} is not a user name: letters, digits and . _ @ + - (e.g. alice)")
        grants = parse_grants([f"{m}:{r}" for m, r in grants.items()])
        key_id = secrets.token_hex(6)
        raw = secrets.token_urlsafe(32)
        created = time.time()
        record = {"user": user, "grants": grants, "sha256": _digest(raw), "created": created, "note": note}
        with self._writing() as records:
            records[key_id] = record
        return f"dpk_{key_id}_{raw}", ApiKey(key_id, user, grants, created, None, note)

    def revoke(self, key_id: str) -> ApiKey:
        """Returns the revoked key's record; it stops working at once (servers re-read the file)."""
        with self._writing() as records:
            record = records.get(key_id)
            if record is None:
                raise ConfigError(f"no key with id {key_id[:40]!r}: docpipe keys list shows the ids")
            record = {**record, "revoked": record.get("revoked") or time.time()}
            records[key_id] = record
        return ApiKey(key_id, record["user"], dict(record["grants"]), record["created"], record["revoked"])
