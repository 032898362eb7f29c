"""How `docpipe serve` runs: `ServeOptions` (address, token, limits, the workbench), the bearer token and the
workbench login, secrets read from the environment or from private files (never needed on the command line,
where ``ps`` shows them), and the check that refuses an exposed server without authentication."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from docpipe.access.login import UI_AUTH_ENV, is_loopback, parse_login
from docpipe.access.secret_files import read_secret_file
from docpipe.errors import ConfigError

__all__ = [
    "METRICS_TOKEN_ENV",
    "METRICS_TOKEN_FILE_ENV",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "UI_AUTH_ENV",
    "UI_AUTH_FILE_ENV",
    "ServeOptions",
    "check_exposure",
    "check_token",
    "default_allowed_hosts",
    "is_loopback",
    "parse_ui_auth",
    "read_secret_file",
    "resolve_metrics_token",
    "resolve_token",
    "resolve_ui_auth",
]

TOKEN_ENV = "DOCPIPE_SERVE_TOKEN"
TOKEN_FILE_ENV = "DOCPIPE_SERVE_TOKEN_FILE"
UI_AUTH_FILE_ENV = "DOCPIPE_UI_AUTH_FILE"
METRICS_TOKEN_ENV = "DOCPIPE_METRICS_TOKEN"
METRICS_TOKEN_FILE_ENV = "DOCPIPE_METRICS_TOKEN_FILE"


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How `docpipe serve` runs: address, authentication, limits, the workbench.

    Connection limits (enforced by docpipe itself, with or without a reverse proxy in front): at most
    `limit_concurrency` connections and requests at once (more get 503); a request's line and headers must
    arrive within `header_timeout_s` and fit in `max_header_kb`; a body must keep up at least
    `body_min_bytes_per_s` after the first `body_timeout_s` (else 408); an idle keep-alive connection is closed
    after `keep_alive_s`.

    >>> ServeOptions(host="127.0.0.1", token=None).allowed_host_names()[:3]
    ('localhost', '127.0.0.1', '[::1]')
    """

    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    max_upload_mb: float = 50.0
    # PDFs one request may upload into a collection (each up to max_upload_mb; the body up to both multiplied).
    max_upload_files: int = 16
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
    # Per-user API keys (set by the server's key store); None: the single token, or none on loopback.
    access: object | None = None
    # Serve a non-loopback address without authentication (or the workbench without a login).
    insecure: bool = False
    # Host header values answered (DNS rebinding); None: localhost, 127.0.0.1, [::1] and the bound host.
    allowed_hosts: tuple[str, ...] | None = None
    limit_concurrency: int = 256
    keep_alive_s: float = 5.0
    header_timeout_s: float = 10.0
    max_header_kb: int = 16
    body_timeout_s: float = 30.0
    body_min_bytes_per_s: int = 16 * 1024
    # Bearer token for /metrics; None: /metrics answers loopback clients of a loopback server only.
    metrics_token: str | None = None
    # Serve /metrics on 127.0.0.1:<port> instead, in a listener of its own.
    metrics_port: int | None = None
    # Delete answers, reports and uploaded documents older than this many days (swept at start and hourly).
    retention_days: float | None = None

    def __post_init__(self) -> None:
        for what, value in (("the token", self.token), ("the metrics token", self.metrics_token)):
            if value is not None and len(value) < 16:
                raise ConfigError(f"{what} is too short: use at least 16 random characters (openssl rand -hex 24)")
        if self.max_upload_mb <= 0 or self.max_json_kb <= 0 or self.max_questions < 1 or self.threads < 1:
            raise ConfigError("--max-upload-mb, --max-json-kb and --max-questions must be positive")
        if self.max_upload_files < 1:
            raise ConfigError(f"max_upload_files must be at least 1, got {self.max_upload_files}")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port must be between 0 and 65535, got {self.port}")
        if not self.ui_path.startswith("/") or self.ui_path.rstrip("/") in ("", "/v1", "/metrics", "/docs"):
            raise ConfigError(f"the workbench path {self.ui_path!r} must start with / and not hide an API route")
        if self.limit_concurrency < 1 or self.max_header_kb < 1 or self.body_min_bytes_per_s < 1:
            raise ConfigError("limit_concurrency, max_header_kb and body_min_bytes_per_s must be positive")
        if min(self.keep_alive_s, self.header_timeout_s, self.body_timeout_s) <= 0:
            raise ConfigError("keep_alive_s, header_timeout_s and body_timeout_s must be positive (seconds)")
        if self.retention_days is not None and not self.retention_days > 0:
            raise ConfigError(f"--retention-days must be a positive number of days, got {self.retention_days}")
        if self.metrics_port is not None and not 1 <= self.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port must be between 1 and 65535, got {self.metrics_port}")

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    @property
    def max_batch_upload_bytes(self) -> int:
        """The largest body of a request that uploads several PDFs at once (into a collection)."""
        return self.max_upload_bytes * self.max_upload_files

    @property
    def max_json_bytes(self) -> int:
        return int(self.max_json_kb * 1024)

    def allowed_host_names(self) -> tuple[str, ...]:
        """Returns the Host header names (lower case, IPv6 in brackets, no port) this server answers to."""
        if self.allowed_hosts is not None:
            return tuple(_host_name(name) for name in self.allowed_hosts)
        return default_allowed_hosts(self.host)


def _host_name(name: str) -> str:
    name = name.strip().lower().rstrip(".")
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def default_allowed_hosts(host: str) -> tuple[str, ...]:
    """Returns the Host names a server bound to `host` answers by default: the loopback names, the bound
    address and, for a wildcard bind (0.0.0.0, ::), this machine's own names.

    >>> default_allowed_hosts("10.0.0.5")
    ('localhost', '127.0.0.1', '[::1]', '10.0.0.5')
    """
    names = ["localhost", "127.0.0.1", "[::1]"]
    extra = [host]
    if host in ("0.0.0.0", "::", ""):
        extra = [socket.gethostname(), socket.getfqdn()]
    for name in extra:
        if name and _host_name(name) not in names and _host_name(name) not in ("0.0.0.0", "[::]"):
            names.append(_host_name(name))
    return tuple(names)


def check_exposure(options: ServeOptions) -> None:
    """Raises ConfigError when `options` would serve a non-loopback address without authentication (no token
    and no API keys) or the workbench there without a login; `options.insecure` allows both."""
    if options.insecure or is_loopback(options.host):
        return
    problems = []
    if options.token is None and options.access is None:
        problems.append(
            f"the API has no authentication (create keys with `docpipe keys create`, or set a token: "
            f"{TOKEN_ENV}, {TOKEN_FILE_ENV} or --token-file)"
        )
    if options.ui and options.ui_auth is None and options.access is None:  # with keys, /ui logs in with them
        problems.append(
            f"the workbench at {options.ui_path} has no login ({UI_AUTH_ENV}, {UI_AUTH_FILE_ENV} or "
            "--ui-auth-file with user:password; or serve the API alone with --no-ui)"
        )
    if problems:
        raise ConfigError(
            f"refusing to serve {options.host}, which other machines can reach: "
            + "; ".join(problems)
            + ". Or bind 127.0.0.1, or pass --insecure if the network itself is trusted"
        )


def _resolve_secret(
    value: str | None, file: str | os.PathLike[str] | None, env: str, file_env: str, what: str
) -> str | None:
    if value is not None and file is not None:
        raise ConfigError(f"give the {what} once: as a file or in the environment, not both")
    if file is not None:
        return read_secret_file(file, what=what)
    if value:
        return value
    if os.environ.get(env):
        return os.environ[env]
    if os.environ.get(file_env):
        return read_secret_file(os.environ[file_env], what=what)
    return None


def resolve_token(token: str | None = None, *, token_file: str | os.PathLike[str] | None = None) -> str | None:
    """Returns the bearer token from the argument, `token_file`, ``DOCPIPE_SERVE_TOKEN`` or the file named by
    ``DOCPIPE_SERVE_TOKEN_FILE``, in that order; None when none is set."""
    return _resolve_secret(token, token_file, TOKEN_ENV, TOKEN_FILE_ENV, "token")


def resolve_ui_auth(
    value: str | None = None, *, auth_file: str | os.PathLike[str] | None = None
) -> tuple[str, str] | None:
    """Returns the workbench login (user, password) from `value`, `auth_file`, ``DOCPIPE_UI_AUTH`` or the file
    named by ``DOCPIPE_UI_AUTH_FILE``; each holds ``user:password``."""
    return parse_ui_auth(_resolve_secret(value, auth_file, UI_AUTH_ENV, UI_AUTH_FILE_ENV, "workbench login"))


def resolve_metrics_token(token_file: str | os.PathLike[str] | None = None) -> str | None:
    """Returns the /metrics bearer token from `token_file`, ``DOCPIPE_METRICS_TOKEN`` or the file named by
    ``DOCPIPE_METRICS_TOKEN_FILE``; None when none is set."""
    return _resolve_secret(None, token_file, METRICS_TOKEN_ENV, METRICS_TOKEN_FILE_ENV, "metrics token")


def check_token(expected: str | None, header: str | None) -> bool:
    """Returns True when no token is configured or `header` is ``Bearer <the token>`` (constant time)."""
    if expected is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), expected.encode())


def parse_ui_auth(value: str | None) -> tuple[str, str] | None:
    """Returns (user, password) from ``user:password``; None for empty; ConfigError for anything else."""
    return parse_login(value, option="--ui-auth")
