"""How the commands report: `emit` prints a command's ``--json`` result, `EXIT_ERROR` is the exit code of a
command that failed."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["EXIT_ERROR", "emit"]

EXIT_ERROR = 1


def emit(data: Any) -> None:
    """Prints `data` as the command's JSON (``--json``): one value on stdout, its shape the one docs/cli-json.md
    documents for the command (never depending on how many inputs or results there are)."""
    print(json.dumps(data, indent=2, ensure_ascii=False))
