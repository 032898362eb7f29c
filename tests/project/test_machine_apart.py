"""The tests run apart from the machine running them (tests/conftest.py's `machine_apart`): a handful of CLI tests,
run under pytest in a subprocess on a hostile machine, still pass. The machine has a user config file that no
command can read (a key that is no setting, an engine that does not exist), DOCPIPE_CONFIG naming it, and
DOCPIPE_ENGINE, DOCPIPE_HOME and DOCPIPE_RETRIEVAL__K set to values that break every command reading them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_CONFIG = 'no_such_setting = "from the developer\'s machine"\n\n[engine]\nbackend = "bogus"\n'
HOSTILE_ENV = {
    "DOCPIPE_ENGINE": "bogus",
    "DOCPIPE_HOME": "/nonexistent/docpipe-home",
    "DOCPIPE_RETRIEVAL__K": "0",
}
# Tests that read settings the way users' commands do: with and without a preset, one contract and a collection.
CLI_TESTS = [
    "tests/cli/test_cli.py::test_ingest_json",
    "tests/cli/test_cli.py::test_search_json",
    "tests/cli/test_cli.py::test_zero_k_is_a_one_line_error",
    "tests/cli/test_cli_collections.py::test_ingest_without_collection_is_unchanged",
    "tests/cli/test_cli_collections.py::test_ask_naming_one_contract_answers_from_it",
    "tests/cli/test_cli.py::test_empty_question_and_folder_are_one_line_errors",
]


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_cli_tests_pass_on_a_machine_with_a_hostile_config_and_environment(tmp_path: Path) -> None:
    home = tmp_path / "developer"
    config = home / ".config" / "docpipe" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(HOSTILE_CONFIG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DOCPIPE_"))}
    env["HOME"] = str(home)
    # The user config file alone breaks a command that runs on this machine without a test's own settings.
    broken = subprocess.run(
        [sys.executable, "-m", "docpipe", "config", "show"], env=env, capture_output=True, text=True, timeout=120
    )
    assert broken.returncode != 0 and "no_such_setting" in broken.stderr, broken.stderr
    env.update(HOSTILE_ENV, DOCPIPE_CONFIG=str(config))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'run'}", *CLI_TESTS],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(CLI_TESTS)} passed" in done.stdout, done.stdout[-2000:]
