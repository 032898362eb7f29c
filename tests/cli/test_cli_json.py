"""Every command's ``--json`` against docs/cli-json.md (issue 16): each command runs through the real command line
(a subprocess, the `test` preset, a store in a temporary DOCPIPE_HOME) and what it prints must have the shape
the page's example shows: every key shown, with a value of the same JSON type, and no key the example does
not show. ``ask`` prints the same shape for one question and for several; every command with ``--json`` has a
section. The examples are parsed from the page, so the page and the code cannot drift apart."""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from docpipe.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cli-json.md"
TIMEOUT_S = 300

# Objects whose keys are data (page numbers, setting names, matters): their values are checked, not their keys.
MAPS = {
    "docpipe ingest FILE... --json": {"$[].page_statuses"},
    "docpipe config show --json": {"$.settings"},
    "docpipe keys create --json": {"$.grants"},
    "docpipe keys list --json": {"$[].grants"},
}


# -- the page ----------------------------------------------------------------------------------------------------


def documented() -> dict[str, list[Any]]:
    """Returns each section's heading (the command, e.g. ``docpipe ask --json``) -> its examples, in order: a
    ```json block parsed, a ```jsonl block as the list of its lines parsed."""
    sections: dict[str, list[Any]] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE)[1:]:
        heading = part.splitlines()[0].strip().strip("`")
        examples = []
        for kind, body in re.findall(r"^```(jsonl?)\n(.*?)^```", part, flags=re.MULTILINE | re.DOTALL):
            examples.append(json.loads(body) if kind == "json" else [json.loads(line) for line in body.splitlines()])
        sections[heading] = examples
    return sections


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}[type(value)]


def mismatches(example: Any, actual: Any, maps: set[str], where: str = "$") -> list[str]:
    """Returns how `actual` differs from the documented `example` (empty when it has the documented shape):
    `null` in the example allows anything, ``{}``/``[]`` any object/array; an object shown must have exactly
    its keys (a map in `maps`: any keys, each value like the example's first); each item of an array must
    match one of the example's items, and each example item must be matched by some item."""
    if example is None:
        return []
    if _kind(example) != _kind(actual):
        return [f"{where}: documented as {_kind(example)}, printed {_kind(actual)} ({actual!r:.60})"]
    if isinstance(example, dict) and example:
        if where in maps:
            model = next(iter(example.values()))
            return [p for key, value in actual.items() for p in mismatches(model, value, maps, f"{where}.*")]
        problems = [f"{where}: documented key {key!r} not printed" for key in example if key not in actual]
        problems += [f"{where}: printed key {key!r} not documented" for key in actual if key not in example]
        for key in example.keys() & actual.keys():
            problems += mismatches(example[key], actual[key], maps, f"{where}.{key}")
        return problems
    if isinstance(example, list) and example:
        problems, matched = [], set()
        for item in actual:
            tries = [mismatches(kind, item, maps, f"{where}[]") for kind in example]
            fits = [n for n, found in enumerate(tries) if not found]
            matched.update(fits)
            if not fits:
                problems += min(tries, key=len)
        if actual:
            problems += [
                f"{where}: documented item {n} is like no printed item" for n in range(len(example)) if n not in matched
            ]
        return problems
    return []


def test_the_matcher_catches_what_it_should() -> None:
    doc = [{"id": "x", "n": 1, "tags": [], "meta": None}, {"name": "x", "error": "e"}]
    assert mismatches(doc, [{"id": "a", "n": 2.5, "tags": ["t"], "meta": {}}, {"name": "b", "error": "f"}], set()) == []
    assert mismatches(doc, {"id": "a"}, set())  # an object for an array
    assert mismatches(doc, [{"id": "a", "n": 2, "tags": []}], set())  # a key missing
    assert mismatches(doc, [{"id": "a", "n": 2, "tags": [], "meta": 1, "new": 0}], set())  # a key undocumented
    assert mismatches(doc, [{"id": "a", "n": "2", "tags": [], "meta": 1}], set())  # a number as a string
    assert mismatches(doc, [{"id": "a", "n": True, "tags": [], "meta": 1}], set())  # a boolean is no number
    assert mismatches(doc, [{"name": "b", "error": "f"}], set())  # the first kind of item never printed
    assert mismatches({"m": {"1": "ok"}}, {"m": {"7": "ok", "8": "no_text"}}, {"$.m"}) == []
    assert mismatches({"m": {"1": "ok"}}, {"m": {"7": 1}}, {"$.m"})


def test_every_command_with_json_has_a_section() -> None:
    def commands(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += commands(sub, f"{prefix} {name}")
        if "--json" in parser._option_string_actions:
            found.append(prefix)
        return found

    with_json = commands(build_parser(), "docpipe")
    assert len(with_json) >= 15
    headings = list(documented())
    for command in with_json:
        assert any(h == f"{command} --json" or h.startswith(f"{command} ") for h in headings), command
    assert all(examples for examples in documented().values()), "a section without an example"


# -- the commands -----------------------------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCPIPE_")}
    return {**env, "DOCPIPE_HOME": str(home), "XDG_CONFIG_HOME": str(home.parent / "xdg")}


def _json(home: Path, *args: Any, status: int = 0, lines: bool = False) -> Any:
    result = subprocess.run(
        [sys.executable, "-m", "docpipe", *map(str, args), "--json"],
        env=_env(home),
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert result.returncode == status, result.stderr
    if lines:
        return [json.loads(line) for line in result.stdout.splitlines()]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> dict[str, list[Any]]:
    """Returns each section's heading -> what the commands it documents printed, one output per example (ask:
    two outputs, one question and several, for its one example)."""
    from docpipe.access.log import AccessLog
    from docpipe.access.matters import MatterStore

    home = tmp_path_factory.mktemp("cli-json") / "home"
    folder = home.parent / "deal"
    folder.mkdir()
    shutil.copy(sample_pdf, folder / "msa.pdf")
    missing = home.parent / "missing.pdf"
    test = ("--preset", "test")
    out: dict[str, list[Any]] = {}
    out["docpipe ingest FILE... --json"] = [_json(home, "ingest", sample_pdf, missing, *test, status=1)]
    out["docpipe ingest --collection NAME FOLDER_OR_FILES... --json"] = [
        _json(home, "ingest", "--collection", "deal", folder, missing, *test, status=1)
    ]
    out["docpipe search --json"] = [_json(home, "search", sample_pdf, "notice period", "-k", "2", *test)]
    ask = ("ask", sample_pdf, "How much notice ends the agreement for convenience?", *test, "--engine", "echo")
    out["docpipe ask --json"] = [_json(home, *ask), _json(home, *ask, "-q", "Which law governs the agreement?")]
    out["docpipe config show --json"] = [_json(home, "config", "show", *test)]
    out["docpipe keys create --json"] = [_json(home, "keys", "create", "--user", "alice", "--matter", "deal-x:write")]
    out["docpipe keys list --json"] = [_json(home, "keys", "list")]
    doc_id = out["docpipe ingest FILE... --json"][0][0]["id"]
    MatterStore(home).add("deal-x", doc_id, name="msa.pdf", user="alice", key_id="k1", encrypted=False)
    log = AccessLog(home)
    log.record(user="alice", key_id="k1", matter="deal-x", action="ask", document=doc_id, question="Q?")
    log.record(user="bob", key_id="k2", matter="deal-x", action="read_document", outcome="denied", detail="no grant")
    out["docpipe matters --json"] = [_json(home, "matters")]
    out["docpipe audit --json"] = [_json(home, "audit", lines=True)]
    out["docpipe audit --verify --json"] = [_json(home, "audit", "--verify")]
    out["docpipe collections --json"] = [_json(home, "collections")]
    out["docpipe ls --json"] = [_json(home, "ls"), _json(home, "ls", "--collection", "deal")]
    out["docpipe rm --json"] = [_json(home, "rm", sample_pdf), None]
    # Taken out of the collection after the store's copy is gone: ingested again first.
    _json(home, "ingest", "--collection", "deal", folder, *test)
    out["docpipe rm --json"][1] = _json(home, "rm", "--collection", "deal", "msa.pdf")
    return out


STORE_COMMANDS = [
    "docpipe ingest FILE... --json",
    "docpipe ingest --collection NAME FOLDER_OR_FILES... --json",
    "docpipe search --json",
    "docpipe ask --json",
    "docpipe config show --json",
    "docpipe keys create --json",
    "docpipe keys list --json",
    "docpipe matters --json",
    "docpipe audit --json",
    "docpipe audit --verify --json",
    "docpipe collections --json",
    "docpipe ls --json",
    "docpipe rm --json",
]


@pytest.mark.parametrize("heading", STORE_COMMANDS)
def test_the_output_has_the_documented_shape(printed: dict[str, list[Any]], heading: str) -> None:
    examples = documented()[heading]
    outputs = printed[heading]
    if heading == "docpipe ask --json" or heading == "docpipe ls --json":
        examples = examples * len(outputs)  # one example for both forms
    assert len(examples) == len(outputs), heading
    for example, output in zip(examples, outputs, strict=True):
        assert output, f"{heading}: nothing printed to compare"
        assert mismatches(example, output, MAPS.get(heading, set())) == [], output


def test_ask_prints_one_shape_for_one_question_and_several(printed: dict[str, list[Any]]) -> None:
    one, several = printed["docpipe ask --json"]
    assert isinstance(one, list) and isinstance(several, list)
    assert len(one) == 1 and len(several) == 2
    assert set(one[0]) == set(several[0]) == set(several[1])
    assert [a["question"] for a in several] == [one[0]["question"], "Which law governs the agreement?"]


def test_rm_prints_the_same_keys_for_each_form(printed: dict[str, list[Any]]) -> None:
    store, collection = printed["docpipe rm --json"]
    assert set(store) == set(collection)
    assert store["purged"] == 1 and store["collection"] is None and store["removed"] == []
    assert collection["collection"] == "deal" and collection["deleted"] == [] and not collection["collection_deleted"]


# -- the evaluations, on a few contracts of ../shared/eval ----------------------------------------------------


@pytest.fixture(scope="module")
def small_collection(eval_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns a CUAD-format data room of two contracts of cuad-collection-dev and three of their questions."""
    source = eval_dir / "cuad-collection-dev"
    folder = tmp_path_factory.mktemp("small-room")
    with (source / "manifest.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[:2]
    with (folder / "manifest.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    files = {row["file"] for row in rows}
    for file in files:
        (folder / file).parent.mkdir(parents=True, exist_ok=True)
        (folder / file).symlink_to(source / file)
    records = (source / "annotations.jsonl").read_text(encoding="utf-8").splitlines()
    chosen = [line for line in records if json.loads(line)["file"] in files][:3]
    (folder / "annotations.jsonl").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return folder


def test_the_evaluations_have_the_documented_shape(eval_dir: Path, small_collection: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    dev = eval_dir / "cuad-dev"
    test = ("--preset", "test")
    runs = {
        "docpipe eval-retrieval --json": ("eval-retrieval", dev, "--limit", "1", "--budgets", "2048", *test),
        "docpipe eval-answers --json": (
            "eval-answers", dev, "--questions", eval_dir / "natural_questions_dev.json", "--limit", "1",
            "--per-category", "1", *test,
        ),
        "docpipe eval-analysis --json": ("eval-analysis", dev, "--limit", "1", "--engine", "extractive", *test),
        "docpipe eval-collection --json": ("eval-collection", small_collection, "--budgets", "2048", *test),
    }  # fmt: skip
    sections = documented()
    for heading, args in runs.items():
        [example] = sections[heading]
        assert mismatches(example, _json(home, *args), set()) == [], heading
    # The keys a flag fills are there without it, as null (as the page says).
    without = _json(home, "eval-collection", small_collection, "--budgets", "2048", "--no-baseline", *test)
    assert without["naive"] is None
    example = sections["docpipe eval-collection --json"][0]
    assert mismatches({**example, "naive": None}, without, set()) == []
    without = _json(home, *runs["docpipe eval-retrieval --json"], "--no-baseline")
    assert without["baseline"]["recall_at_budget"] is None
    example = sections["docpipe eval-retrieval --json"][0]
    assert mismatches({**example, "baseline": {**example["baseline"], "recall_at_budget": None}}, without, set()) == []
