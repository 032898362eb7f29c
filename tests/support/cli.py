"""The `docpipe` command as users run it: one runner for every test that calls it in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

TIMEOUT_S = 300


def cli_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Returns this process's environment without its DOCPIPE_ variables, with DOCPIPE_HOME=home and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    return {**env, "DOCPIPE_HOME": str(home), **(extra or {})}


def run_cli(
    home: Path,
    *args: object,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    command: Sequence[str] | None = None,
    timeout: float = TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Runs `python -m docpipe ARGS` (or `command ARGS`) with the store in `home`, in home's parent folder, and
    returns the finished process (text output captured; a non-zero exit is the caller's to check).

    The environment is `cli_env(home, env)`: DOCPIPE_ variables of the test process do not leak in.
    """
    return subprocess.run(
        [*(command or [sys.executable, "-m", "docpipe"]), *map(str, args)],
        env=cli_env(home, env),
        cwd=home.parent,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
