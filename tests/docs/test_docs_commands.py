"""Every `docpipe ...` command line in the docs' shell blocks (README.md, docs/**/*.md, benchmarks/*.md) parses
with the real command-line parser: a renamed option or command fails here, not in a reader's terminal.
(docs/deployment.md's own test also checks its settings and YAML; docs/cli-json.md's runs its commands.)"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from docpipe.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "benchmarks").glob("*.md")])
SHELL = re.compile(r"^[ \t]*```(?:sh|bash|console|shell)[ \t]*\n(.*?)^[ \t]*```", re.M | re.S)
# Where a docpipe command starts on a line: its beginning, after a shell operator or an environment assignment.
START = re.compile(r"(?:^|&&|;|\|)\s*(?:\w+=\S*\s+)*(docpipe\s+[a-z-])")
OPERATORS = {"&&", "||", "|", ";", "&"}


def commands(page: Path) -> list[tuple[str, list[str]]]:
    """Returns (the line, its arguments after `docpipe`) of every docpipe command in the page's shell blocks;
    `[--json]` (an optional part, as usage lines write it) counts as given."""
    found = []
    for block in SHELL.findall(page.read_text(encoding="utf-8")):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            for match in START.finditer(line):
                lexer = shlex.shlex(line[match.start(1) :], posix=True, punctuation_chars="|&;<>")
                lexer.whitespace_split = True
                lexer.commenters = "#"
                words = []
                for word in lexer:
                    if word in OPERATORS or word.startswith((">", "<")):
                        break
                    words.append(word.removeprefix("[").removesuffix("]"))
                found.append((line.strip(), words[1:]))
    return found


def parse_error(args: list[str]) -> str:
    """Returns '' when `docpipe ARGS` parses (or prints its version or help), else argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            build_parser().parse_args(args)
    except SystemExit as exc:  # --version and --help exit 0
        if exc.code == 0:
            return ""
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exits ({exc.code})"
    return ""


@pytest.mark.parametrize("page", [p for p in PAGES if commands(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_docpipe_command_in_the_page_parses(page: Path) -> None:
    wrong = [f"{line}\n    {error}" for line, args in commands(page) if (error := parse_error(args))]
    assert not wrong, f"{page.relative_to(ROOT)}: commands the CLI refuses:\n" + "\n".join(wrong)


def test_the_commands_are_found() -> None:
    """The extraction sees the README's and the CLI page's commands, and a wrong one would fail."""
    assert len(commands(ROOT / "README.md")) >= 5
    assert len(commands(ROOT / "docs" / "cli.md")) >= 30
    assert parse_error(["ask", "contract.pdf", "q", "--no-such-option"]) != ""
