"""Every install hint docpipe prints or documents names our distribution and an extra it defines: the name
`docpipe` on the package index is somebody else's project, and a hint to an extra that does not exist fails
the user who follows it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
HINT = re.compile(r"pip install '?\"?([A-Za-z0-9_.-]+)\[([A-Za-z0-9_,-]+)\]")


def _hints() -> list[tuple[str, str, str]]:
    files = [*(ROOT / "docpipe").rglob("*.py"), *(ROOT / "ui").rglob("*.py"), ROOT / "README.md", ROOT / "Makefile"]
    files += [*(ROOT / "docs").rglob("*.md")]  # the docs site's pages
    found = []
    for path in files:
        for match in HINT.finditer(path.read_text(encoding="utf-8")):
            found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def test_every_install_hint_names_our_distribution_and_a_defined_extra() -> None:
    hints = _hints()
    assert len(hints) >= 15, hints  # the error messages' hints and the README's are all seen
    extras = set(PROJECT["optional-dependencies"])
    wrong = [h for h in hints if h[1] != PROJECT["name"] or not set(h[2].split(",")) <= extras]
    assert wrong == [], f"hints that name another distribution or an extra pyproject.toml lacks: {wrong}"


def test_the_distribution_is_not_the_unrelated_docpipe_and_the_command_stays() -> None:
    assert PROJECT["name"] == "docpipe-contracts"
    assert PROJECT["scripts"]["docpipe"].startswith("docpipe.")
