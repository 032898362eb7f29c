"""The `docpipe` command as users run it: real subprocesses (`python -m docpipe` and the console script),
the store in a temporary DOCPIPE_HOME, the fast `test` preset unless the real embedder is the point."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from support.cli import TIMEOUT_S, cli_env, run_cli

HEAVY = ("torch", "faiss", "sentence_transformers", "vllm", "gradio")
QUESTION = "What is the notice period for termination for convenience?"
ENCRYPTED = "pypdf-r2-user-password.pdf"
ENCRYPTED_PASSWORD = "asdfzxcv"
F_SETPIPE_SZ = 1031  # Linux fcntl: shrink a pipe's buffer


def _assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("docpipe: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns one DOCPIPE_HOME for the module, so the sample is extracted once per preset."""
    return tmp_path_factory.mktemp("cli") / "home"


@pytest.fixture
def encrypted_pdf(eval_dir: Path) -> Path:
    path = eval_dir / "bad-pdfs" / ENCRYPTED
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


# -- start-up ----------------------------------------------------------------------------------

_MODULES_AFTER = """
import json, sys
{setup}
print(json.dumps({{"code": code, "modules": sorted(sys.modules)}}), file=sys.stderr)
"""


def _modules_after(home: Path, setup: str) -> tuple[Any, set[str]]:
    result = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER.format(setup=setup)],
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return report["code"], {name.split(".")[0] for name in report["modules"]}


@pytest.mark.parametrize("argv", [["--help"], ["ask", "--help"], ["ingest", "--help"], ["ui", "--help"]])
def test_help_does_not_import_heavy_packages(home: Path, argv: list[str]) -> None:
    setup = f"""
import docpipe.cli
try:
    code = docpipe.cli.main({argv!r})
except SystemExit as exc:
    code = exc.code
"""
    code, modules = _modules_after(home, setup)
    assert code == 0
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_import_docpipe_does_not_import_heavy_packages(home: Path) -> None:
    code, modules = _modules_after(home, "import docpipe\ncode = 0")
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_python_m_docpipe_help_imports_nothing_heavy(home: Path) -> None:
    result = run_cli(home, "--help", command=[sys.executable, "-X", "importtime", "-m", "docpipe"])
    assert result.returncode == 0
    assert result.stdout.startswith("usage: docpipe")
    for command in ("ingest", "search", "ask", "eval-retrieval"):
        assert command in result.stdout
    imported = {
        line.split("|")[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "docpipe" in imported, "the -X importtime report must list what was imported"
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


def test_console_script_works(home: Path, sample_pdf: Path) -> None:
    script = Path(sysconfig.get_path("scripts")) / "docpipe"
    assert script.is_file(), f"the console script is not installed at {script}"
    result = run_cli(home, "ingest", sample_pdf, "--preset", "test", "--json", command=[str(script)])
    assert result.returncode == 0, result.stderr
    [summary] = json.loads(result.stdout)
    assert summary["id"] == hashlib.sha256(sample_pdf.read_bytes()).hexdigest()
    help_result = run_cli(home, "--help", command=[str(script)])
    assert help_result.returncode == 0 and help_result.stdout.startswith("usage: docpipe")


# -- ingest ------------------------------------------------------------------------------------


def test_ingest_json(home: Path, sample_pdf: Path) -> None:
    result = run_cli(home, "ingest", sample_pdf, "--preset", "test", "--json")
    assert result.returncode == 0, result.stderr
    [summary] = json.loads(result.stdout)
    assert summary["id"] == hashlib.sha256(sample_pdf.read_bytes()).hexdigest()
    assert summary["name"] == sample_pdf.name
    assert summary["pages"] == 15
    assert summary["sections"] > 20
    assert summary["extractor"] == "pypdf"
    assert summary["page_statuses"] == {str(n): "ok" for n in range(1, 16)}
    assert summary["warnings"] == []
    assert (home / "docs" / summary["id"] / "source.pdf").is_file(), "the store must be under DOCPIPE_HOME"


def test_ingest_of_several_files_reports_the_bad_ones(home: Path, sample_pdf: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.pdf"
    notes.write_text("meeting notes, not a PDF\n")
    missing = tmp_path / "missing.pdf"
    result = run_cli(home, "ingest", notes, sample_pdf, missing, "--preset", "test", "--json")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    bad_text, good, gone = json.loads(result.stdout)
    assert good["pages"] == 15 and "error" not in good
    assert (home / "docs" / good["id"] / "source.pdf").is_file()
    assert bad_text["name"] == str(notes) and bad_text["error_type"] == "NotAPDFError"
    assert "not a PDF" in bad_text["error"]
    assert gone["name"] == str(missing) and gone["error_type"] == "FileMissingError"

    human = run_cli(home, "ingest", notes, sample_pdf, missing, "--preset", "test")
    assert human.returncode != 0
    lines = human.stdout.splitlines()
    assert lines[0].startswith(f"FAILED  {notes}: ")
    assert lines[1].startswith(f"ok      {sample_pdf.name}: 15 pages")
    assert lines[2].startswith(f"FAILED  {missing}: no such file")


def test_extractor_option_works_before_and_after_the_command(home: Path, sample_pdf: Path) -> None:
    for args in (
        ["ingest", sample_pdf, "--extractor", "pypdfium2", "--preset", "test", "--json"],
        ["--extractor", "pypdfium2", "--preset", "test", "ingest", sample_pdf, "--json"],
    ):
        result = run_cli(home, *args)
        assert result.returncode == 0, result.stderr
        [summary] = json.loads(result.stdout)
        assert summary["extractor"] == "pypdfium2"
        assert summary["pages"] == 15


@pytest.mark.parametrize("position", ["before", "after"])
def test_unknown_preset_is_a_one_line_error(home: Path, sample_pdf: Path, position: str) -> None:
    args: list[Any] = ["search", sample_pdf, QUESTION]
    args = ["--preset", "nope", *args] if position == "before" else [*args, "--preset", "nope"]
    _assert_one_line_error(run_cli(home, *args), "unknown preset 'nope'", "test")


# -- search and ask ----------------------------------------------------------------------------


def test_search_json(home: Path, sample_pdf: Path) -> None:
    result = run_cli(home, "search", sample_pdf, QUESTION, "--preset", "test", "--json")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert 1 <= len(hits) <= 4
    for hit in hits:
        assert {"section_id", "heading", "page_start", "page_end", "score", "text"} <= set(hit)
        assert 1 <= hit["page_start"] <= hit["page_end"] <= 15
        assert hit["text"].strip()
    assert any(h["heading"].startswith("12.3 Termination for Convenience") and h["page_start"] == 9 for h in hits)

    two = json.loads(run_cli(home, "search", sample_pdf, QUESTION, "--preset", "test", "--json", "-k", "2").stdout)
    assert 1 <= len(two) <= 2


@pytest.fixture(scope="module")
def ask_default(home: Path, sample_pdf: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Returns the JSON and the human output of `docpipe ask` with the default preset (real MiniLM)."""
    return {
        "json": run_cli(home, "ask", sample_pdf, QUESTION, "--json"),
        "human": run_cli(home, "ask", sample_pdf, QUESTION),
    }


@pytest.mark.integration
def test_ask_json_cites_page_9_with_the_real_embedder(ask_default) -> None:
    result = ask_default["json"]
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    [answer] = json.loads(result.stdout)  # a list, for one question too
    assert answer["mode"] == "extractive"
    assert answer["question"] == QUESTION
    assert any(
        c["page_start"] == 9 and "ninety (90) days" in c["quote"] and c["verified"] is True for c in answer["citations"]
    ), answer["citations"]


@pytest.mark.integration
def test_ask_human_output_shows_answer_page_and_model_notice(ask_default) -> None:
    result = ask_default["human"]
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert f"Q: {QUESTION}" in text
    assert "ninety (90) days' prior written notice" in text
    assert "p. 9" in text
    assert "quote verified on the page" in text
    assert "No language model is configured" in text


def test_several_offline_answers_say_the_header_and_the_notice_once(home: Path, sample_pdf: Path) -> None:
    result = run_cli(
        home, "ask", sample_pdf, QUESTION, "-q", "Which law governs?", "-q", "Who pays?", "--preset", "test"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("Q: ") == 3
    assert result.stdout.count("Extractive answer (no language model configured)") == 1
    assert result.stdout.count("No language model is configured") == 1
    assert result.stdout.rstrip().endswith("--reasoning-parser qwen3).")  # the notice closes the output


def test_broken_pipe_stops_quietly(home: Path, sample_pdf: Path) -> None:
    args = ["search", sample_pdf, "termination", "--preset", "test", "--json", "-k", "50", "--budget", "1000000"]
    full = run_cli(home, *args)
    assert full.returncode == 0, full.stderr
    read_end, write_end = os.pipe()
    pipe_size = fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    # More output than the pipe and Python's stdout buffer hold: the writer must meet the closed pipe.
    assert len(full.stdout.encode()) > 2 * (pipe_size + 8192)
    process = subprocess.Popen(
        [sys.executable, "-m", "docpipe", *map(str, args)],
        env=cli_env(home),
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        assert reader.readline().strip() == b"["
    _, stderr = process.communicate(timeout=TIMEOUT_S)
    assert "Traceback" not in stderr
    assert "BrokenPipeError" not in stderr
    assert stderr == ""
    assert process.returncode == 0


# -- errors ------------------------------------------------------------------------------------


@pytest.fixture(params=["missing", "empty", "not-a-pdf", "not-a-pdf-eval", "encrypted"])
def bad_input(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """Returns (path, a fragment the error line must contain) for one kind of unreadable input."""
    if request.param == "missing":
        return tmp_path / "missing.pdf", "no such file"
    if request.param == "empty":
        (tmp_path / "empty.pdf").write_bytes(b"")
        return tmp_path / "empty.pdf", "is empty"
    if request.param == "not-a-pdf":
        (tmp_path / "notes.txt").write_text("just text\n")
        return tmp_path / "notes.txt", "not a PDF"
    eval_dir = request.getfixturevalue("eval_dir")
    name = {"not-a-pdf-eval": "qpdf-bad1-not-a-pdf.pdf", "encrypted": ENCRYPTED}[request.param]
    if not (eval_dir / "bad-pdfs" / name).is_file():
        pytest.skip(f"{name} not in {eval_dir / 'bad-pdfs'}")
    return eval_dir / "bad-pdfs" / name, "--password" if request.param == "encrypted" else "not a PDF"


def test_unreadable_input_is_a_one_line_error(home: Path, bad_input: tuple[Path, str]) -> None:
    path, fragment = bad_input
    result = run_cli(home, "ask", path, QUESTION, "--preset", "test")
    _assert_one_line_error(result, fragment, path.name)
    assert result.stdout == ""


def test_debug_shows_the_traceback(home: Path, bad_input: tuple[Path, str]) -> None:
    path, _ = bad_input
    for args in (
        ["--debug", "ask", path, QUESTION, "--preset", "test"],
        ["ask", path, QUESTION, "--preset", "test", "--debug"],
    ):
        result = run_cli(home, *args)
        assert result.returncode != 0
        assert "Traceback" in result.stderr


def test_zero_k_is_a_one_line_error(home: Path, sample_pdf: Path) -> None:
    result = run_cli(home, "search", sample_pdf, QUESTION, "--preset", "test", "-k", "0")
    _assert_one_line_error(result, "k must be at least 1")


def test_empty_question_and_folder_are_one_line_errors(home: Path, sample_pdf: Path) -> None:
    _assert_one_line_error(run_cli(home, "ask", sample_pdf, "  ", "--preset", "test"), "question is empty")
    _assert_one_line_error(run_cli(home, "ask", sample_pdf.parent, QUESTION, "--preset", "test"), "is a folder")


def test_invalid_setting_in_the_environment_is_a_one_line_error(home: Path, sample_pdf: Path) -> None:
    result = run_cli(home, "search", sample_pdf, QUESTION, "--preset", "test", env={"DOCPIPE_RETRIEVAL__K": "0"})
    _assert_one_line_error(result, "retrieval")


def test_encrypted_pdf_opens_with_password(home: Path, encrypted_pdf: Path) -> None:
    result = run_cli(
        home, "search", encrypted_pdf, "encryption", "--password", ENCRYPTED_PASSWORD, "--preset", "test", "--json"
    )
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert any("pdf encryption test" in h["text"] for h in hits)
    wrong = run_cli(home, "search", encrypted_pdf, "encryption", "--password", "wrong", "--preset", "test")
    _assert_one_line_error(wrong, "password does not open", ENCRYPTED)


# -- docpipe ui: the engine options of serve, ask and analyze -----------------------------------------------

ENGINE_OPTIONS = ("--engine", "--model", "--url")
COMMON_OPTIONS = ("--home", "--preset", "--config", "--extractor")


def _options(command: str) -> dict[str, Any]:
    import argparse

    from docpipe.cli.parser import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return dict(sub._option_string_actions)


def test_ui_help_lists_the_engine_and_store_options(home: Path) -> None:
    result = run_cli(home, "ui", "--help")
    assert result.returncode == 0, result.stderr
    for option in (*ENGINE_OPTIONS, *COMMON_OPTIONS, "--host", "--port", "--auth-file", "--max-pages"):
        assert option in result.stdout, option


@pytest.mark.parametrize("command", ["ask", "analyze", "review", "serve", "eval-answers", "eval-analysis"])
def test_ui_takes_the_same_engine_options_as_the_other_commands(command: str) -> None:
    ui, other = _options("ui"), _options(command)
    for option in (*ENGINE_OPTIONS, *COMMON_OPTIONS):
        assert option in ui and option in other, option
        assert (ui[option].choices, ui[option].help, ui[option].type) == (
            other[option].choices,
            other[option].help,
            other[option].type,
        ), option


def test_ui_options_reach_the_settings_the_workbench_runs_with(tmp_path: Path) -> None:
    from docpipe.cli import settings_from_args
    from docpipe.cli.parser import build_parser

    config = tmp_path / "config.toml"
    config.write_text('[retrieval]\nk = 7\n[engine]\nmodel = "from-the-file"\n', encoding="utf-8")
    argv = ["ui", "--engine", "openai", "--url", "http://127.0.0.1:8001/v1", "--home", str(tmp_path / "store")]
    args = build_parser().parse_args([*argv, "--preset", "test", "--config", str(config), "--max-pages", "40"])
    settings = settings_from_args(args)
    assert (settings.engine.backend, settings.engine.url) == ("openai", "http://127.0.0.1:8001/v1")
    assert settings.engine.model == "from-the-file" and settings.retrieval.k == 7  # the config file, as elsewhere
    assert settings.home == tmp_path / "store" and settings.embedding.model == "hashing"  # --home, the preset
    assert settings.extraction.max_pages == 40  # --max-pages caps what the settings allow
    args = build_parser().parse_args(["ui", "--model", "/models/qwen3", "--max-pages", "999999"])
    settings = settings_from_args(args)
    assert settings.engine.model == "/models/qwen3"
    assert settings.extraction.max_pages < 999999  # a cap never raises the settings' own limit


def _login_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "login"
    path.write_text("reviewer:s3cret-pw\n", encoding="utf-8")
    path.chmod(mode)
    return path


def test_ui_refuses_a_login_file_others_can_read_before_serving(home: Path, tmp_path: Path) -> None:
    loose = _login_file(tmp_path, 0o644)
    _assert_one_line_error(run_cli(home, "ui", "--auth-file", loose, "--preset", "test"), "chmod 600")
    both = run_cli(home, "ui", "--auth-file", _login_file(tmp_path, 0o600), "--auth", "a:b", "--preset", "test")
    _assert_one_line_error(both, "give the login once")
    _assert_one_line_error(run_cli(home, "ui", "--auth", "no-colon", "--preset", "test"), "user:password")


def test_docpipe_ui_says_where_it_runs_without_gradios_share_hint(home: Path) -> None:
    """`docpipe ui` prints its own line (the address, bound to this machine only) and never Gradio's hint to
    set share=True (a public tunnel no contract should go through)."""
    import selectors

    from support.net import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "docpipe", "ui", "--preset", "test", "--port", str(port)],
        env=cli_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while not any(line.startswith("docpipe workbench:") for line in lines):
                assert selector.select(timeout=TIMEOUT_S), "docpipe ui said nothing: " + "".join(lines)
                line = process.stdout.readline()
                assert line, "docpipe ui stopped: " + "".join(lines)
                lines.append(line)
    finally:
        process.terminate()
        process.wait(timeout=30)
    output = "".join(lines)
    assert f"docpipe workbench: http://127.0.0.1:{port}/ (bound to this machine only" in output
    assert "share=True" not in output and "public link" not in output
