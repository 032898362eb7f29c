"""Options several `docpipe` commands share: the engine, the matter, the password of encrypted PDFs, the PDFs
copied beside a workbook. `docpipe.cli.parser` and the commands that add their own parsers use them."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["engine_options", "matter_option", "password_options", "with_pdfs_option"]


def password_options(p: argparse.ArgumentParser, help: str) -> None:
    p.add_argument("--password", help=f"{help} (visible in ps: prefer --password-file or $DOCPIPE_PASSWORD)")
    p.add_argument(
        "--password-file", type=Path, metavar="PATH", help="file holding the password on one line (mode 600)"
    )


def engine_options(p: argparse.ArgumentParser) -> None:
    """The answering engine's options, the same on every command that answers (ask, analyze, review, the answer
    evaluations, serve, ui): they become the settings' ``engine`` section."""
    p.add_argument("--engine", choices=["auto", "extractive", "vllm", "openai", "echo"], help="answer engine")
    p.add_argument("--model", help="answering model: HF id or local folder (default Qwen/Qwen3-14B)")
    p.add_argument("--url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")


def matter_option(p: argparse.ArgumentParser) -> None:
    """The matter a command acts in as the store's owner (the access log records it): its documents and
    collections only; the store's own matter, what `docpipe serve` and `docpipe ui` without keys show, when none."""
    p.add_argument(
        "--matter",
        metavar="NAME",
        help="act in this matter (its documents and collections; logged in the access log); default: the "
        "store's own matter, the one docpipe serve and docpipe ui show without API keys",
    )


def with_pdfs_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--with-pdfs",
        action="store_true",
        help="with -o FILE.xlsx: copy the documents into FILE-pdfs/ beside it; each citation links to its page",
    )
