"""Shared fixtures: the repository, the sample contract and its expected answers, the third-party eval data,
a fast `DocPipe` (hashing embedder) whose store lives in the test's own temporary folder, a headless browser,
a throwaway redis-server and one `vllm serve` for the session. Helpers that are not fixtures live in
tests/support/ (`from support.server import serving`).

Every test runs apart from the machine running it (`machine_apart`): HOME and the XDG folders in a folder of
the session's own, no DOCPIPE_ variable of the caller's shell.

Browser and Redis tests need Debian's chromium and a redis-server binary. Outside `make test` a test that lacks
them skips, naming the package to install. Under `make test` (DOCPIPE_REQUIRE_SYSTEM_TOOLS=1) such a skip is a
failure, so the workbench's security tests cannot silently not run: `require_tool` and the `chromium_path` /
`redis_server` fixtures fail directly, and the hooks at the end turn any other skip that names one of these
tools or their Python packages (module-level skips included) into a failed run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from support.redis_server import redis_serving
from support.vllm_server import VllmServer, vllm_serving

from docpipe import DocPipe, Settings

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT.parent / "shared" / "eval"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; playwright drives it through executable_path

REQUIRE_ENV = "DOCPIPE_REQUIRE_SYSTEM_TOOLS"
# Skip reasons that mean "a browser or Redis test could not run": the system tools and the extras they need.
REQUIRED_SKIP = re.compile(
    r"chromium|playwright|redis-server|docpipe(-contracts)?\[(ui|redis|serve|ray)\]", re.IGNORECASE
)


# -- the machine running the tests stays out of them -------------------------------------------------------------
# DOCPIPE_ variables that switch the test run itself, not docpipe: kept.
HARNESS_ENV = frozenset({REQUIRE_ENV, "DOCPIPE_GPU_TEST_MODEL"})
USER_FOLDERS = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_CACHE_HOME": ".cache",
    "XDG_DATA_HOME": ".local/share",
    "XDG_STATE_HOME": ".local/state",
}


@pytest.fixture(scope="session", autouse=True)
def machine_apart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Returns the session's own user folder: HOME and the XDG folders point into it, and every DOCPIPE_
    variable but the test-run switches is cleared, for the tests and every process they start. So the
    developer's ``~/.config/docpipe/config.toml``, default store and DOCPIPE_ settings change no result; a test
    that needs a variable sets it (``monkeypatch.setenv``). Session-wide so that module and session fixtures
    (servers started once) run apart too; tests/project/test_machine_apart.py proves it on a hostile machine."""
    home = tmp_path_factory.mktemp("user-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for name, folder in USER_FOLDERS.items():
            patch.setenv(name, str(home / folder))
        for name in [name for name in os.environ if name.startswith("DOCPIPE_")]:
            if name not in HARNESS_ENV:
                patch.delenv(name)
        yield home


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


# -- Browser and Redis: required under `make test` ------------------------------------------------------------
def tools_required() -> bool:
    """True under `make test` (DOCPIPE_REQUIRE_SYSTEM_TOOLS=1): a missing browser or Redis fails the run."""
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def require_tool(missing: str, *, install: str) -> NoReturn:
    """Skips the calling test because `missing` is absent, or fails it when `make test` requires it."""
    message = f"{missing} is not available: {install}"
    if tools_required():
        pytest.fail(f"{message} ({REQUIRE_ENV}=1: make test runs the browser and Redis tests or fails)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def chromium_path() -> Path:
    """Returns Debian's chromium for playwright's `executable_path` (no browser download)."""
    if not CHROMIUM.exists():
        require_tool(str(CHROMIUM), install="sudo apt-get install -y chromium")
    return CHROMIUM


# Headless, and quiet on a machine without internet (no update, sync or background fetches).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser(chromium_path: Path) -> Iterator[Any]:
    """Returns a headless Debian chromium driven by playwright, closed after the module's tests."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed: pip install playwright")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def redis_server() -> str:
    """Returns the path of the redis-server binary the cache tests start on 127.0.0.1."""
    binary = shutil.which("redis-server")
    if binary is None:
        require_tool("redis-server", install="sudo apt-get install -y redis-server")
    return binary


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    """Returns the URL of a throwaway redis-server on 127.0.0.1, stopped after the module's tests."""
    with redis_serving() as url:
        yield url


@pytest.fixture
def raw_redis(redis_url: str) -> Iterator[Any]:
    """Returns a plain client on the module's redis-server, emptied before each test."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """Returns a real `vllm serve` of the tiny Qwen3 on 127.0.0.1, started once for the session (two minutes on
    two loaded cores) and stopped at its end; no test may stop it."""
    with vllm_serving(tmp_path_factory.mktemp("vllm-server")) as running:
        yield running


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


_required_module_skips: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.skipped and tools_required() and not hasattr(report, "wasxfail"):
        reason = _skip_reason(report)
        if REQUIRED_SKIP.search(reason):
            report.outcome = "failed"
            report.longrepr = f"skipped under make test ({REQUIRE_ENV}=1), which requires it: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    # A whole module skipped at import (pytest.skip(allow_module_level=True)): the other modules still run,
    # and the session fails at the end with the reason.
    if report.skipped and tools_required():
        reason = _skip_reason(report)
        if REQUIRED_SKIP.search(reason):
            _required_module_skips.append(f"{report.nodeid}: {reason}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _required_module_skips:
        terminalreporter.section("required tests that could not run", sep="=", red=True, bold=True)
        for line in _required_module_skips:
            terminalreporter.line(line, red=True)
        terminalreporter.line(f"{REQUIRE_ENV}=1 (make test): install what is named above; make test-fast skips them.")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _required_module_skips and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
