"""docs/deployment.md stays true to the code: every `docpipe ...` command line in its code blocks parses with the
real CLI parser; every DOCPIPE_* variable it names is a real setting, and every value it gives one loads; its
KubeRay sketch is YAML that mounts one ReadWriteMany store at DOCPIPE_HOME in every pod; and its per-contract
sizes are those docs/benchmarks/corpus_sizes.json measured."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest
from pydantic import BaseModel

from docpipe import Settings
from docpipe.cli.parser import build_parser
from docpipe.settings import load_settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"

_FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)
# Blocks that show output or a drawing, not commands to run.
_NOT_COMMANDS = {"text"}
# Where a docpipe command starts on a line: its beginning, after a shell operator, an environment assignment, a
# YAML key or list item, or the `--` of `ray job submit ... --` and `kubectl exec ... --`.
_START = re.compile(r"(?:^|&&|;|\||--\s|:\s|-\s|\w=\S*\s)\s*(docpipe\s+[a-z])")
_VARIABLE = re.compile(r"\bDOCPIPE_[A-Z0-9_]*[A-Z0-9](?:__\*)?")
_ASSIGNED = re.compile(r"\b(DOCPIPE_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|[^\s;&|`'),]*)")
_OPERATORS = {"&&", "||", "|", ";", ">", ">>", "2>", "&"}


def code_blocks(text: str) -> list[str]:
    """Returns the bodies of the fenced code blocks of a Markdown text that hold commands or configuration (not
    those tagged ``text``: drawings and output), backslash-continued lines joined."""
    return [re.sub(r"\\\n\s*", " ", body) for info, body in _FENCE.findall(text) if info.strip() not in _NOT_COMMANDS]


def docpipe_commands(text: str) -> list[list[str]]:
    """Returns the arguments (after `docpipe`) of every docpipe command line in the code blocks of `text`."""
    commands = []
    for block in code_blocks(text):
        for line in block.splitlines():
            for match in _START.finditer(line):
                lexer = shlex.shlex(line[match.start(1) :], posix=True, punctuation_chars="|&;<>")
                lexer.whitespace_split = True
                lexer.commenters = "#"
                words: list[str] = []
                try:
                    for word in lexer:
                        if word in _OPERATORS or word.startswith((">", "<")):
                            break
                        words.append(word)
                except ValueError as exc:  # an unclosed quote: a command no shell would run either
                    words = ["docpipe", f"<cannot split {line.strip()!r}: {exc}>"]
                commands.append(words[1:])
    return commands


def parse_error(args: list[str]) -> str:
    """Returns '' when `docpipe ARGS` parses with the real parser, else argparse's message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            build_parser().parse_args(args)
    except SystemExit as exc:
        return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exits ({exc.code})"
    return ""


def setting_path(variable: str) -> str:
    """Returns '' when DOCPIPE_A__B names a field of `Settings` (DOCPIPE_A__* a section), else why not."""
    name = variable.removeprefix("DOCPIPE_")
    parts = [p.lower() for p in name.split("__")]
    model: type[BaseModel] = Settings
    for i, part in enumerate(parts):
        if part == "*" and i == len(parts) - 1 and i > 0:
            return ""
        field = model.model_fields.get(part)
        if field is None:
            return f"{variable}: no setting {'.'.join(parts[: i + 1])}"
        annotation = field.annotation
        if i < len(parts) - 1:
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                return f"{variable}: {'.'.join(parts[: i + 1])} is not a section"
            model = annotation
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return f"{variable}: {'.'.join(parts)} is a section, not a setting"
    return ""


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_docpipe_command_parses(doc: str) -> None:
    commands = docpipe_commands(doc)
    verbs = {(args[0], "--executor" in args) for args in commands if args}
    # The page's own subject must be there: ingestion and a grid on Ray, serving against a router.
    assert {("ingest", True), ("review", True), ("serve", False)} <= verbs, verbs
    failures = [f"docpipe {shlex.join(args)}: {err}" for args in commands if (err := parse_error(args))]
    assert not failures, "\n".join(failures)


def test_every_docpipe_variable_is_a_setting(doc: str) -> None:
    names = sorted(set(_VARIABLE.findall(doc)))
    assert "DOCPIPE_RAY__ADDRESS" in names and "DOCPIPE_CACHE_URL" in names, names
    failures = [err for name in names if (err := setting_path(name))]
    assert not failures, "\n".join(failures)


def assigned_values(text: str) -> list[tuple[str, str]]:
    """Returns every (DOCPIPE_X, value) the page gives: `DOCPIPE_X=value` anywhere, `- name:` / `value:` in YAML."""
    pairs = [(name, value.strip("\"'")) for name, value in _ASSIGNED.findall(text)]
    for block in code_blocks(text):
        pairs += re.findall(r"-\s*name:\s*(DOCPIPE_[A-Z0-9_]+)\s*\n\s*value:\s*\"?([^\"\n]*)\"?", block)
    return pairs


def test_assigned_values_are_accepted(doc: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each value the page gives loads as that setting (alone, so that two examples need not agree)."""
    config = tmp_path / "empty.toml"
    config.write_text("", encoding="utf-8")  # not the user's config file
    pairs = assigned_values(doc)
    assert len(pairs) >= 8, pairs
    for name, value in pairs:
        with monkeypatch.context() as env:
            env.setenv(name, value)
            load_settings(config_file=config)  # a ConfigError naming the setting if the value is refused
    # A GPU replica takes its tensor-parallel GPUs: the page's examples must give both the same values.
    gpus = {float(v) for n, v in pairs if n == "DOCPIPE_RAY__NUM_GPUS_PER_REPLICA"}
    tensor = {float(v) for n, v in pairs if n == "DOCPIPE_ENGINE__TENSOR_PARALLEL_SIZE"}
    assert gpus and gpus == tensor, (gpus, tensor)


# The checks above must be able to fail: they do on a page with a misspelt flag or setting.


def test_a_misspelt_flag_or_setting_is_caught() -> None:
    page = (
        "```sh\nDOCPIPE_HOME=/mnt/store docpipe ingest --collection deal --executor ray --ray-adress auto a/\n"
        "docpipe review --collection deal --checklist \\\n    --executor ray -o grid.xlsx  # resumes\n```\n"
    )
    commands = docpipe_commands(page)
    assert commands == [
        ["ingest", "--collection", "deal", "--executor", "ray", "--ray-adress", "auto", "a/"],
        ["review", "--collection", "deal", "--checklist", "--executor", "ray", "-o", "grid.xlsx"],
    ]
    assert "--ray-adress" in parse_error(commands[0])
    assert parse_error(commands[1]) == ""
    assert setting_path("DOCPIPE_RAY__REPLICAS") == "" and setting_path("DOCPIPE_RAY__*") == ""
    assert "no setting ray.gpus" in setting_path("DOCPIPE_RAY__GPUS")
    assert "is a section" in setting_path("DOCPIPE_RAY")
    assert "not a section" in setting_path("DOCPIPE_CACHE_URL__X")


def test_the_cluster_sketch_mounts_the_store_everywhere(doc: str) -> None:
    """The KubeRay sketch is valid YAML, and every Ray pod mounts one ReadWriteMany volume at DOCPIPE_HOME."""
    yaml = pytest.importorskip("yaml")
    documents = [
        d
        for info, body in _FENCE.findall(doc)
        if info.strip() == "yaml"
        for d in yaml.safe_load_all(body)
        if d is not None
    ]
    claims = {
        d["metadata"]["name"]: d["spec"]["accessModes"] for d in documents if d.get("kind") == "PersistentVolumeClaim"
    }
    (cluster,) = [d for d in documents if d.get("kind") == "RayCluster"]
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    assert len(groups) >= 3  # head, CPU, GPU
    for group in groups:
        pod = group["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod["containers"]:
            env = {e["name"]: e["value"] for e in container["env"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert env["DOCPIPE_HOME"] in mounts, (group.get("groupName", "head"), mounts)
            claim = volumes[mounts[env["DOCPIPE_HOME"]]]["persistentVolumeClaim"]["claimName"]
            assert claims[claim] == ["ReadWriteMany"]
            assert env["DOCPIPE_CACHE_URL"].startswith("redis://")  # a cluster's grid needs it (ray_grid)
        assert pod["securityContext"]["runAsUser"] == groups[0]["template"]["spec"]["securityContext"]["runAsUser"]


def test_the_sizes_are_the_measured_ones(doc: str) -> None:
    """The per-contract table and the 10,000-contract column follow docs/benchmarks/corpus_sizes.json."""
    sizes = json.loads((DOC.parent / "benchmarks" / "corpus_sizes.json").read_text(encoding="utf-8"))
    per = sizes["per_contract"]
    assert sizes["ingested"] == sizes["contracts"] and not sizes["failed"]
    for row, key in (("pages", "pages"), ("sections", "sections"), ("passages (= vectors, ", "passages")):
        stats = per[key]
        assert f"| {row}" in doc and f"| {stats['mean']} | {stats['p50']} | {stats['p95']} |" in doc, key
    assert f"{round(per['index_bytes']['mean'] / 1000)} KB" in doc
    assert f"{round(per['store_folder_bytes']['mean'] / 1000)} KB" in doc
    assert f"{per['dense_faiss_bytes_per_passage']:,} B a passage" in doc
    assert f"| {10_000 * per['passages']['mean']:,.0f} |" in doc  # vectors at N = 10,000
    member = sizes["member_record"]["sizes"]
    assert f"costs {member['10000']['one_add_ms']:.0f} ms" in doc and f"{member['100000']['one_add_ms']:.0f} ms" in doc
