"""What the commands share about where their input comes from: ``docpipe config show`` (every setting, its
value and its source), the PDF password (``--password-file``, ``$DOCPIPE_PASSWORD``, a prompt on a terminal)
and ``-`` as a question (the questions on stdin, one per line)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from docpipe.cli.output import emit

__all__ = [
    "PASSWORD_ENV",
    "questions_file",
    "read_stdin_questions",
    "resolve_password",
    "setting_sources",
    "should_prompt",
    "show",
]

PASSWORD_ENV = "DOCPIPE_PASSWORD"
_REDACTED = "***"

logger = logging.getLogger("docpipe.cli")


def resolve_password(password: str | None, *, password_file: Path | None) -> str | None:
    """Returns the PDF password from `password_file` (one line, mode 600), `password` (``--password``, with a
    warning on a terminal: ps shows it) or ``$DOCPIPE_PASSWORD``, in that order; None when none is given."""
    from docpipe.errors import ConfigError

    if password is not None and password_file is not None:
        raise ConfigError("give the password once: --password-file or --password, not both")
    if password_file is not None:
        from docpipe.access.secret_files import read_secret_file

        return read_secret_file(password_file, what="password")
    if password is not None:
        if not sys.stderr.isatty():
            # Said to whoever types it; a script's stderr keeps its one-line error contract.
            return password
        logger.warning(
            "a password on the command line is visible to every user of this machine (ps): use --password-file or $%s",
            PASSWORD_ENV,
        )
        return password
    return os.environ.get(PASSWORD_ENV) or None


def should_prompt(args: argparse.Namespace, stdin: TextIO | None = None) -> bool:
    """Returns True when an encrypted PDF should make the command ask for its password: the command takes
    one, none was given, and a terminal is attached (never when piped, where nobody could answer)."""
    stdin = sys.stdin if stdin is None else stdin
    return hasattr(args, "password") and args.password is None and stdin is not None and stdin.isatty()


def with_password_prompt(command: Callable[[Any, argparse.Namespace], int], dp: Any, args: argparse.Namespace) -> int:
    """Runs `command`; when it stops on an encrypted PDF and `should_prompt`, asks for the password (getpass:
    not echoed) and runs it once more with it."""
    from docpipe.errors import PasswordRequiredError

    try:
        return command(dp, args)
    except PasswordRequiredError as exc:
        if not should_prompt(args):
            raise
        import getpass

        args.password = getpass.getpass(f"password for {getattr(exc, 'path', None) or 'the encrypted PDF'}: ")
        return command(dp, args)


def _stdin_questions() -> list[str]:
    from docpipe.errors import ConfigError

    # The same rules as --questions-file: one per line, blank lines and # comments skipped.
    questions = questions_file(Path("/dev/stdin"))
    if not questions:
        raise ConfigError("no questions on stdin ('-'): give one per line (blank lines and # comments are skipped)")
    return questions


def _expand(values: list[str], questions: Callable[[], list[str]]) -> list[str]:
    expanded: list[str] = []
    for value in values:
        # `questions` gives stdin's questions the first time, nothing after.
        expanded += questions() if value == "-" else [value]
    return expanded


def questions_file(path: Path) -> list[str]:
    """Returns the questions of a file, one per line (blank lines and lines starting with # skipped)."""
    from docpipe.errors import FileMissingError

    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileMissingError(f"no such questions file: {path}") from None
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def read_stdin_questions(args: argparse.Namespace) -> None:
    """Replaces ``-`` among the questions of ``ask`` (the question, ``-q``), ``review -q`` and ``audit
    --question`` by the questions on stdin (read once, whichever ``-`` comes first)."""
    read: list[str] | None = None

    def questions() -> list[str]:
        nonlocal read
        if read is None:
            read = _stdin_questions()
            return read
        return []

    if args.command in ("review", "audit"):
        args.question = _expand(list(args.question), questions)
    elif args.command == "ask":
        # With --collection the one positional argument is the question.
        positional = "file" if args.collection is not None else "question"
        first: list[str] = []
        if getattr(args, positional) == "-":
            setattr(args, positional, None)
            first = questions()
        args.more = first + _expand(list(args.more), questions)


def _leaves(model: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    from pydantic import BaseModel

    leaves = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            leaves += _leaves(value, (*prefix, name))
        else:
            leaves.append(((*prefix, name), value))
    return leaves


def _lookup(data: dict[str, Any], path: tuple[str, ...]) -> bool:
    for part in path[:-1]:
        inner = data.get(part)
        data = inner if isinstance(inner, dict) else {}
    return path[-1] in data


def setting_sources(
    overrides: dict[str, Any], *, preset: str, config_file: Path | None, environ: dict[str, str] | None = None
) -> dict[str, str]:
    """Returns, for each setting (``engine.model``), where its value comes from: ``argument``, ``preset
    NAME``, ``environment DOCPIPE_...``, ``config file PATH`` or ``default``, in that order of precedence."""
    from docpipe.settings import PRESETS, Settings, read_config_file

    environ = {k.upper(): v for k, v in (os.environ if environ is None else environ).items()}
    in_file = read_config_file(config_file) if config_file is not None else {}
    sources = {}
    for path, _ in _leaves(Settings.model_construct()):
        variables = ["DOCPIPE_" + "__".join(path[: n + 1]).upper() for n in range(len(path))]
        if _lookup(overrides, path):
            source = "argument"
        elif _lookup(PRESETS.get(preset, {}), path):
            source = f"preset {preset}"
        elif any(v in environ for v in variables):
            source = "environment " + next(v for v in reversed(variables) if v in environ)
        elif _lookup(in_file, path):
            source = f"config file {config_file}"
        else:
            source = "default"
        sources[".".join(path)] = source
    return sources


def _redact(path: str, value: Any) -> Any:
    if value is None:
        return None
    if path == "engine.api_key":
        return _REDACTED
    if path == "cache_url" and "@" in str(value):
        from urllib.parse import urlsplit

        parts = urlsplit(str(value))
        if parts.password:
            return str(value).replace(f":{parts.password}@", f":{_REDACTED}@", 1)
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value)  # strings, numbers and booleans are written alike in JSON and TOML


def show(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """``docpipe config show``: the effective settings (TOML, or JSON with ``--json``) and each one's source;
    the API key (and a cache URL's password) redacted."""
    from docpipe.settings import Settings, config_file_path

    preset = args.preset or "default"
    settings = Settings.preset(preset, config_file=args.config, **overrides)
    config_file = args.config.expanduser() if args.config is not None else config_file_path()
    sources = setting_sources(overrides, preset=preset, config_file=config_file)
    # Top-level keys first: in TOML a key after a [table] belongs to it.
    leaves = sorted(_leaves(settings), key=lambda leaf: len(leaf[0]) > 1)
    values = {".".join(path): _redact(".".join(path), value) for path, value in leaves}
    values = json.loads(json.dumps(values, default=str))
    if args.json:
        emit(
            {
                "config_file": str(config_file) if config_file else None,
                "preset": preset,
                "settings": {name: {"value": values[name], "source": sources[name]} for name in values},
            }
        )
        return 0
    print(f"# config file: {config_file or 'none'}; preset: {preset}")
    table = ""
    for name, value in values.items():
        section, _, key = name.rpartition(".")
        if section != table:
            print(f"\n[{section}]")
            table = section
        line = f"{key} = {_toml_value(value)}" if value is not None else f"# {key} = (unset)"
        print(f"{line:<60} # {sources[name]}")
    return 0
