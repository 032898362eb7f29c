"""Shared fixtures: the repository, the sample contract and its expected answers, the third-party eval data,
and a fast `DocPipe` (hashing embedder) whose store lives in the test's own temporary folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from docpipe import DocPipe, Settings

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def sample_pdf(repo_root: Path) -> Path:
    return repo_root / "samples" / "master_services_agreement.pdf"


@pytest.fixture(scope="session")
def expected_facts(repo_root: Path) -> list[dict[str, Any]]:
    """Returns samples/expected.json: question, expected verbatim substring, page and section of each fact."""
    return json.loads((repo_root / "samples" / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """Returns ../shared/eval (third-party PDFs, read in place); skips the test when it is not there."""
    if not EVAL.is_dir():
        pytest.skip(f"evaluation data not found at {EVAL} (../shared/eval beside the project root)")
    return EVAL


@pytest.fixture
def test_pipe(tmp_path: Path) -> DocPipe:
    """Returns a `DocPipe` with the `test` preset (hashing embedder, no torch) and a store under tmp_path."""
    return DocPipe(Settings.preset("test", home=tmp_path / "home"))
