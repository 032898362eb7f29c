"""How `docpipe serve` runs: `ServeOptions` (address, token, limits, the workbench), the bearer token and the
workbench login."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from docpipe.errors import ConfigError

__all__ = ["TOKEN_ENV", "UI_AUTH_ENV", "ServeOptions", "check_token", "parse_ui_auth", "resolve_token"]

TOKEN_ENV = "DOCPIPE_SERVE_TOKEN"
UI_AUTH_ENV = "DOCPIPE_UI_AUTH"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Returns nothing; holds how `docpipe serve` runs: address, token, limits, the workbench."""

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    max_upload_mb: float = 50.0
    max_json_kb: float = 1024.0
    max_questions: int = 64
    max_question_chars: int = 2000
    max_concurrent_ingests: int = 2
    max_concurrent_analyses: int = 2
    threads: int = 64
    ui: bool = True
    ui_path: str = "/ui"
    ui_auth: tuple[str, str] | None = None
    log_level: str = "info"

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < 16:
            raise ConfigError("the token is too short: use at least 16 random characters (openssl rand -hex 24)")
        if self.max_upload_mb <= 0 or self.max_json_kb <= 0 or self.max_questions < 1 or self.threads < 1:
            raise ConfigError("--max-upload-mb, --max-json-kb and --max-questions must be positive")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, got {self.port}")
        if not self.ui_path.startswith("/") or self.ui_path.rstrip("/") in ("", "/v1", "/metrics", "/docs"):
            raise ConfigError(f"the workbench path {self.ui_path!r} must start with / and not hide an API route")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_json_bytes(self) -> int:
        return int(self.max_json_kb * 1024)


def resolve_token(token: str | None) -> str | None:
    """Returns the bearer token from the argument or ``DOCPIPE_SERVE_TOKEN``; None when neither is set."""
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    return token or None


def check_token(expected: str | None, header: str | None) -> bool:
    """Returns True when no token is configured or `header` is ``Bearer <the token>`` (constant time)."""
    if expected is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), expected.encode())


def parse_ui_auth(value: str | None) -> tuple[str, str] | None:
    """Returns (user, password) from ``user:password``; None for empty; ConfigError for anything else."""
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ConfigError(f"--ui-auth / {UI_AUTH_ENV} must look like user:password")
    return user, password
