"""The command line's conventions (issue 16): --version, the password without the command line (a private file,
the environment, a prompt on a terminal), `-` for questions on stdin, -v/-q, and the TOML config file with
`docpipe config show`. Real subprocesses, the `test` preset, a store in a temporary DOCPIPE_HOME."""

from __future__ import annotations

import argparse
import io
import json
import os
import pty
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.cli import TIMEOUT_S, cli_env, run_cli

from docpipe.cli.config import read_stdin_questions, should_prompt
from docpipe.cli.parser import build_parser
from docpipe.version import __version__

PASSWORD = "conventions-pw-1"


def _env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    # A user config folder of the test's own, which some tests fill.
    return cli_env(home, {"XDG_CONFIG_HOME": str(home.parent / "xdg"), **(extra or {})})


def _run(
    home: Path, *args: Any, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, env={"XDG_CONFIG_HOME": str(home.parent / "xdg"), **(env or {})}, stdin=stdin)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("conventions") / "home"


@pytest.fixture(scope="module")
def encrypted(sample_pdf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the sample's first pages as a PDF that opens only with PASSWORD."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(sample_pdf).pages[:3]:
        writer.add_page(page)
    writer.encrypt(user_password=PASSWORD, owner_password=PASSWORD + "-owner")
    path = tmp_path_factory.mktemp("encrypted") / "locked.pdf"
    with path.open("wb") as out:
        writer.write(out)
    return path


def _secret(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n", encoding="utf-8")
    path.chmod(mode)
    return path


def _search(home: Path, pdf: Path, *args: Any, env: dict[str, str] | None = None) -> Any:
    return _run(home, "search", pdf, "services", "--preset", "test", "--json", *args, env=env)


# -- --version -------------------------------------------------------------------------------------------------


def test_version_prints_the_package_version(home: Path) -> None:
    result = _run(home, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"docpipe {__version__}"


# -- the password ----------------------------------------------------------------------------------------------


def test_an_encrypted_pdf_without_a_password_is_a_one_line_error_when_piped(home: Path, encrypted: Path) -> None:
    result = _search(home, encrypted)
    assert result.returncode == 1
    assert result.stderr.startswith("docpipe: error: ") and "encrypted" in result.stderr
    assert "password for" not in result.stderr  # no terminal: nobody to ask


def test_password_file_private_opens_the_pdf(home: Path, encrypted: Path, tmp_path: Path) -> None:
    result = _search(home, encrypted, "--password-file", _secret(tmp_path, 0o600))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)
    assert "visible" not in result.stderr


def test_password_file_others_can_read_is_refused(home: Path, encrypted: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path, 0o644)
    result = _search(home, encrypted, "--password-file", secret)
    assert result.returncode == 1
    assert "can be read by other users" in result.stderr and f"chmod 600 {secret}" in result.stderr


def test_password_and_password_file_together_are_refused(home: Path, encrypted: Path, tmp_path: Path) -> None:
    result = _search(home, encrypted, "--password-file", _secret(tmp_path, 0o600), "--password", PASSWORD)
    assert result.returncode == 1 and "give the password once" in result.stderr


def test_password_from_the_environment(home: Path, encrypted: Path) -> None:
    result = _search(home, encrypted, env={"DOCPIPE_PASSWORD": PASSWORD})
    assert result.returncode == 0, result.stderr


def test_password_on_the_command_line_still_works(home: Path, encrypted: Path) -> None:
    result = _search(home, encrypted, "--password", PASSWORD)
    assert result.returncode == 0, result.stderr


def _on_terminal(
    home: Path, *args: Any, answer: str | None = None, answers: list[str] | None = None
) -> tuple[int, str]:
    """Runs docpipe with a pseudo-terminal as its controlling terminal (getpass reads from it); types `answer`
    (or each of `answers` in turn) at the password prompts. Returns the exit code and everything the terminal
    showed."""
    typed = list(answers or ([] if answer is None else [answer]))
    argv = [sys.executable, "-m", "docpipe", *map(str, args)]
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.chdir(home.parent)
        os.execve(sys.executable, argv, _env(home))
    output = b""
    prompts = 0
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
        if typed and output.count(b"password for") > prompts:
            prompts += 1
            os.write(fd, typed.pop(0).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), output.decode(errors="replace")


def test_the_prompt_on_a_terminal(home: Path, encrypted: Path) -> None:
    code, shown = _on_terminal(home, "search", encrypted, "services", "--preset", "test", "--json", answer=PASSWORD)
    assert code == 0, shown
    assert "password for locked.pdf" in shown
    assert PASSWORD not in shown  # not echoed
    assert '"section_id"' in shown


def test_password_on_the_command_line_warns_on_a_terminal(home: Path, encrypted: Path) -> None:
    args = ("search", encrypted, "services", "--preset", "test", "--json", "--password", PASSWORD)
    code, shown = _on_terminal(home, *args)
    assert code == 0, shown
    assert "visible to every user of this machine (ps)" in shown and "--password-file" in shown
    code, shown = _on_terminal(home, "-q", *args)  # errors only
    assert code == 0 and "visible" not in shown, shown


def test_should_prompt_only_on_a_terminal_without_a_password() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    args = build_parser().parse_args(["ask", "x.pdf", "q"])
    assert should_prompt(args, Terminal())
    assert not should_prompt(args, io.StringIO())  # piped
    args.password = PASSWORD
    assert not should_prompt(args, Terminal())
    assert not should_prompt(build_parser().parse_args(["ls"]), Terminal())  # takes no password


# -- the password of ingest -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locked_pair(sample_pdf: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Returns two other encrypted PDFs (other pages of the sample, so other documents) opened by PASSWORD."""
    from pypdf import PdfReader, PdfWriter

    folder = tmp_path_factory.mktemp("locked-pair")
    paths = []
    for name, pages in (("first.pdf", slice(3, 5)), ("second.pdf", slice(5, 7))):
        writer = PdfWriter()
        for page in PdfReader(sample_pdf).pages[pages]:
            writer.add_page(page)
        writer.encrypt(user_password=PASSWORD, owner_password=PASSWORD + "-owner")
        with (folder / name).open("wb") as out:
            writer.write(out)
        paths.append(folder / name)
    return paths[0], paths[1]


def _ingest(home: Path, *args: Any, env: dict[str, str] | None = None) -> tuple[int, Any]:
    result = _run(home, "ingest", *args, "--preset", "test", "--json", env=env)
    return result.returncode, json.loads(result.stdout)


def test_ingest_password_file_private_opens_the_pdf(home: Path, encrypted: Path, tmp_path: Path) -> None:
    code, [item] = _ingest(home, encrypted, "--password-file", _secret(tmp_path, 0o600))
    assert code == 0 and item["encrypted"] is True and item["pages"] == 3, item


def test_ingest_password_file_others_can_read_is_refused(home: Path, encrypted: Path, tmp_path: Path) -> None:
    secret = _secret(tmp_path, 0o644)
    result = _run(home, "ingest", encrypted, "--password-file", secret, "--preset", "test")
    assert result.returncode == 1 and f"chmod 600 {secret}" in result.stderr
    assert result.stdout == ""  # refused before any file is read


def test_ingest_password_from_the_environment(home: Path, locked_pair: tuple[Path, Path]) -> None:
    code, items = _ingest(home, *locked_pair, env={"DOCPIPE_PASSWORD": PASSWORD})
    assert code == 0 and [i["encrypted"] for i in items] == [True, True], items


def test_ingest_piped_without_a_password_fails_the_file_without_asking(home: Path, encrypted: Path) -> None:
    result = _run(home, "ingest", encrypted, "--preset", "test", "--json")
    assert result.returncode == 1 and "password for" not in result.stderr
    [item] = json.loads(result.stdout)
    assert item["error_type"] == "PasswordRequiredError", item


def test_ingest_asks_on_a_terminal_once_for_files_sharing_a_password(
    tmp_path: Path, sample_pdf: Path, locked_pair: tuple[Path, Path]
) -> None:
    home = tmp_path / "home"
    code, shown = _on_terminal(home, "ingest", locked_pair[0], sample_pdf, locked_pair[1], "--preset", "test",
                               answer=PASSWORD)  # fmt: skip
    assert code == 0, shown
    assert shown.count("password for") == 1 and "password for first.pdf" in shown, shown
    assert PASSWORD not in shown  # not echoed
    assert shown.count("ok      ") == 3, shown


def test_ingest_asks_again_after_a_wrong_password_and_an_empty_answer_skips(
    tmp_path: Path, encrypted: Path, locked_pair: tuple[Path, Path]
) -> None:
    home = tmp_path / "home"
    code, shown = _on_terminal(home, "ingest", encrypted, "--preset", "test", answers=["not-it", PASSWORD])
    assert code == 0 and shown.count("password for locked.pdf") == 2, shown
    code, shown = _on_terminal(home, "ingest", locked_pair[0], "--preset", "test", answers=[""])
    assert code == 1 and "FAILED" in shown and "first.pdf is encrypted" in shown, shown


def test_ingest_into_a_collection_asks_on_a_terminal(tmp_path: Path, locked_pair: tuple[Path, Path]) -> None:
    home = tmp_path / "home"
    folder = tmp_path / "room"
    folder.mkdir()
    for path in locked_pair:
        (folder / path.name).write_bytes(path.read_bytes())
    # Two extraction workers meet both encrypted files at once: one prompt all the same.
    code, shown = _on_terminal(home, "ingest", "--collection", "room", folder, "--preset", "test", "--workers", "2",
                               answer=PASSWORD)  # fmt: skip
    assert code == 0, shown
    assert shown.count("password for") == 1 and "2 added" in shown, shown
    listed = _run(home, "ls", "--collection", "room", "--json")
    assert sorted(m["name"] for m in json.loads(listed.stdout)) == ["first.pdf", "second.pdf"]


# -- questions on stdin ----------------------------------------------------------------------------------------

STDIN = "What is the governing law?\n\n# a comment\n  Who are the parties?  \n"


def test_dash_reads_questions_from_stdin(home: Path, sample_pdf: Path) -> None:
    result = _run(home, "ask", sample_pdf, "-", "--preset", "test", "--engine", "echo", "--json", stdin=STDIN)
    assert result.returncode == 0, result.stderr
    answers = json.loads(result.stdout)
    assert [a["question"] for a in answers] == ["What is the governing law?", "Who are the parties?"]


def test_dash_as_another_question_keeps_the_order(home: Path, sample_pdf: Path) -> None:
    result = _run(
        home, "ask", sample_pdf, "First?", "-q", "-", "-q", "Last?", "--preset", "test", "--engine", "echo",
        "--json", stdin=STDIN,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    questions = [a["question"] for a in json.loads(result.stdout)]
    assert questions == ["First?", "What is the governing law?", "Who are the parties?", "Last?"]


def test_empty_stdin_is_an_error(home: Path, sample_pdf: Path) -> None:
    result = _run(home, "ask", sample_pdf, "-", "--preset", "test", "--engine", "echo", stdin="\n# none\n")
    assert result.returncode == 1 and "no questions on stdin" in result.stderr


@contextmanager
def _stdin_from(path: Path) -> Iterator[None]:
    # `-` reads the process's stdin (/dev/stdin, fd 0): point fd 0 at the file for the in-process call.
    saved = os.dup(0)
    with path.open() as stdin:
        os.dup2(stdin.fileno(), 0)
        try:
            yield
        finally:
            os.dup2(saved, 0)
            os.close(saved)


def test_review_dash_and_collection_dash(tmp_path: Path) -> None:
    questions = tmp_path / "questions.txt"
    questions.write_text(STDIN, encoding="utf-8")
    review = build_parser().parse_args(["review", "--collection", "c", "-q", "A?", "-q", "-"])
    with _stdin_from(questions):
        read_stdin_questions(review)
    assert review.question == ["A?", "What is the governing law?", "Who are the parties?"]
    ask = build_parser().parse_args(["ask", "--collection", "c", "-"])
    with _stdin_from(questions):
        read_stdin_questions(ask)
    assert ask.file is None and ask.more == ["What is the governing law?", "Who are the parties?"]


# -- -v / -q ---------------------------------------------------------------------------------------------------


def test_q_after_ask_is_still_another_question() -> None:
    args = build_parser().parse_args(["ask", "contract.pdf", "Q1", "-q", "Q2"])
    assert args.question == "Q1" and args.more == ["Q2"] and not args.quiet
    review = build_parser().parse_args(["review", "d/", "-q", "Q1"])
    assert review.question == ["Q1"] and not review.quiet


def test_verbose_and_quiet_before_the_command_and_long_after_it() -> None:
    parse = build_parser().parse_args
    assert parse(["-v", "ls"]).verbose and parse(["-q", "ls"]).quiet
    assert parse(["ask", "f.pdf", "Q", "--verbose"]).verbose
    assert parse(["ask", "f.pdf", "Q", "--quiet"]).quiet
    with pytest.raises(SystemExit):
        parse(["-v", "-q", "ls"])  # one or the other


def test_verbose_shows_info_logs(home: Path, sample_pdf: Path) -> None:
    args = ("search", sample_pdf, "services", "--preset", "test", "--json")
    assert "INFO" not in _run(home, *args).stderr
    verbose = _run(home, "-v", *args)
    assert verbose.returncode == 0 and "docpipe: INFO: " in verbose.stderr, verbose.stderr
    assert "docpipe: INFO: " in _run(home, *args, "--verbose").stderr


# -- the config file -------------------------------------------------------------------------------------------


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _shown(home: Path, *args: Any, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = _run(home, *args, "config", "show", "--json", env=env)
    assert result.returncode == 0, result.stderr
    settings: dict[str, Any] = json.loads(result.stdout)["settings"]
    return settings


def test_config_file_precedence_file_env_argument(home: Path, tmp_path: Path) -> None:
    config = _config(
        tmp_path, '[extraction]\nextractor = "pypdfium2"\n[retrieval]\nk = 7\n[engine]\nmodel = "m-file"\n'
    )
    shown = _shown(home, "--config", config)
    assert shown["retrieval.k"] == {"value": 7, "source": f"config file {config}"}
    assert shown["engine.model"]["value"] == "m-file"
    assert shown["retrieval.budget_tokens"]["source"] == "default"
    # DOCPIPE_CONFIG names it too; the environment beats the file
    env = {"DOCPIPE_CONFIG": str(config), "DOCPIPE_ENGINE__MODEL": "m-env", "DOCPIPE_EXTRACTION__EXTRACTOR": "pypdf"}
    shown = _shown(home, env=env)
    assert shown["engine.model"] == {"value": "m-env", "source": "environment DOCPIPE_ENGINE__MODEL"}
    assert shown["retrieval.k"]["value"] == 7
    # and an argument beats both
    shown = _shown(home, "--extractor", "pypdfium2", env=env)
    assert shown["extraction.extractor"] == {"value": "pypdfium2", "source": "argument"}
    assert _shown(home, "--preset", "test", env=env)["embedding.model"] == {"value": "hashing", "source": "preset test"}


def test_config_file_in_the_user_config_dir_is_read(home: Path) -> None:
    default = home.parent / "xdg" / "docpipe" / "config.toml"
    default.parent.mkdir(parents=True, exist_ok=True)
    default.write_text("[retrieval]\nbudget_tokens = 1234\n", encoding="utf-8")
    try:
        assert _shown(home)["retrieval.budget_tokens"] == {"value": 1234, "source": f"config file {default}"}
    finally:
        default.unlink()


def test_config_file_settings_reach_the_commands(home: Path, sample_pdf: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, "[retrieval]\nk = 1\n")
    result = _run(home, "--config", config, "search", sample_pdf, "services", "--preset", "test", "--json")
    assert result.returncode == 0, result.stderr
    assert len(json.loads(result.stdout)) == 1


def test_config_file_unknown_key_names_the_file(home: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, "[retrieval]\nkk = 2\n")
    result = _run(home, "--config", config, "config", "show")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and str(config) in result.stderr and "retrieval.kk" in result.stderr
    missing = _run(home, "--config", tmp_path / "nope.toml", "config", "show")
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    broken = _run(home, "--config", _config(tmp_path, "[retrieval\n"), "config", "show")
    assert broken.returncode == 1 and "not valid TOML" in broken.stderr


def test_config_show_toml_redacts_the_api_key(home: Path, tmp_path: Path) -> None:
    import tomllib

    config = _config(tmp_path, '[engine]\napi_key = "sk-very-secret"\n')
    result = _run(home, "--config", config, "config", "show", env={"DOCPIPE_CACHE_URL": "redis://u:hunter2@h:6379/0"})
    assert result.returncode == 0, result.stderr
    assert "sk-very-secret" not in result.stdout and "hunter2" not in result.stdout
    shown = tomllib.loads(result.stdout)  # the output is TOML
    assert shown["engine"]["api_key"] == "***" and shown["retrieval"]["k"] == 4
    assert shown["cache_url"] == "redis://u:***@h:6379/0"
    assert f"# config file {config}" in result.stdout and "# environment DOCPIPE_CACHE_URL" in result.stdout


def test_namespace_of_a_command_without_questions_is_left_alone() -> None:
    args = argparse.Namespace(command="search", question="-")
    read_stdin_questions(args)
    assert args.question == "-"
