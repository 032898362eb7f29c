"""Typed cells read by a language model (`docpipe.terms.model`): one JSON schema per kind, the reply decoded under
it, and the two checks before a value is shown as a fact (the quote is in the sections given; the readers find
the model's value in the quote). The grids run on the echo engine and on small real engines that reply a fixed
JSON; the last test runs the real vLLM engine (CPU build) on the tests' tiny random Qwen3, whose words are noise
but whose replies must still follow the schema."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from support.contracts import PARTIES, agreement_pdf

from docpipe import DocPipe, Settings
from docpipe.answer.core import answer_cache_key
from docpipe.cells import Column
from docpipe.engine.base import PRIORITY_BULK, GenerationRequest, GenerationResult
from docpipe.engine.fake import EchoEngine, schema_instance
from docpipe.terms.model import schema_for, typed_column, typed_model_cell, typed_request
from docpipe.values.kinds import TYPED_KINDS

jsonschema = pytest.importorskip("jsonschema")

NOTICE = "What is the notice period for termination for convenience?"
NINETY = "3.2 Either party may terminate this Agreement for convenience upon ninety (90) days prior written notice."
OPTIONS = {"choice": ("Either party", "Seller", "Buyer")}


def column(kind: str, question: str = NOTICE) -> Column:
    return Column(question, question, question, kind=kind, options=OPTIONS.get(kind, ()))


class RecordingEngine(EchoEngine):
    """The echo engine, keeping every request it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[GenerationRequest] = []

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.requests.extend(requests)
        return super().generate(requests)


class JsonReplyEngine(RecordingEngine):
    """Replies `reply` (as JSON) to every request, named like the echo engine."""

    def __init__(self, reply: dict | str) -> None:
        super().__init__()
        self.reply = reply if isinstance(reply, str) else json.dumps(reply)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        self.requests.extend(requests)
        return [GenerationResult(text=self.reply) for _ in requests]


def reply(value: object, *, quote: str = NINETY, as_written: str = "ninety (90) days", status: str = "present") -> dict:
    return {"quote": quote, "as_written": as_written, "value": value, "status": status, "note": "Either party."}


@pytest.fixture
def wingtip(tmp_path: Path) -> Path:
    seller, buyer, notice, law = PARTIES[2]  # ninety (90) days, California
    path = tmp_path / "wingtip_supply.pdf"
    path.write_bytes(agreement_pdf(seller, buyer, notice, law))
    return path


@pytest.fixture
def room(tmp_path: Path) -> Path:
    folder = tmp_path / "room"
    folder.mkdir()
    for seller, buyer, notice, law in PARTIES:
        (folder / f"{seller.split()[0].lower()}_supply.pdf").write_bytes(agreement_pdf(seller, buyer, notice, law))
    return folder


def pipe(tmp_path: Path, engine: object) -> DocPipe:
    return DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=engine)


def read(tmp_path: Path, contract: Path, text: str, kind: str = "duration"):
    """Returns the cell of `kind` a reply `text` makes over every section of `contract`."""
    dp = pipe(tmp_path, None)
    index = dp.index(dp.ingest(contract))
    return typed_model_cell(column(kind), GenerationResult(text=text), index.sections(), index.doc)


# -- the schemas -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", TYPED_KINDS)
def test_every_kind_has_a_json_schema_that_a_reply_can_follow(kind: str) -> None:
    schema = schema_for(column(kind))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["required"] == ["quote", "as_written", "value", "status", "note"]
    assert schema["properties"]["status"] == {"enum": ["present", "absent", "uncertain"]}
    for sentence in (NINETY, ""):
        jsonschema.validate(schema_instance(schema, sentence), schema)
    jsonschema.validate(reply(None, status="absent"), schema)  # null: the sections do not state it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(reply(None, quote="a <think> tag"), schema)  # no "<": no think tag inside the JSON
    # A pending cell carries its request, not its column: the kind and options come back from the schema.
    request = GenerationRequest.chat("s", "q", json_schema=schema)
    assert (typed_column(request).kind, typed_column(request).options) == (kind, OPTIONS.get(kind, ()))


def test_each_kind_takes_its_own_form_of_value() -> None:
    def valid(kind: str, value: object) -> bool:
        return jsonschema.Draft202012Validator(schema_for(column(kind))).is_valid(reply(value))

    assert valid("date", "2019-05-08") and valid("date", "2019") and valid("date", "perpetual")
    assert not valid("date", "May 8, 2019") and not valid("date", "2019-13-01")
    assert valid("duration", {"count": 90, "unit": "day"}) and valid("duration", "perpetual")
    assert not valid("duration", {"count": 90, "unit": "fortnight"})
    assert valid("money", {"amount": 2000000, "currency": "USD"}) and not valid("money", {"amount": 1, "currency": "$"})
    assert valid("percent", 12.5) and valid("yes_no", False) and not valid("yes_no", "yes")
    assert valid("parties", [{"name": "Acme Corp.", "role": "Supplier"}]) and not valid("parties", [])
    assert valid("choice", "Seller") and not valid("choice", "Landlord")
    with pytest.raises(ValueError, match="no typed schema"):
        schema_for(column("text"))


def test_text_and_typed_requests_never_share_a_cache_key(tmp_path: Path, wingtip: Path) -> None:
    dp = pipe(tmp_path, None)
    index = dp.index(dp.ingest(wingtip))
    hits, doc, settings = index.sections(), index.doc, dp.settings.engine
    typed = typed_request(column("duration"), hits, doc, settings=settings, mode="no_think")
    assert typed.priority == PRIORITY_BULK and typed.json_schema == schema_for(column("duration"))
    keys = {
        answer_cache_key(doc, request, NOTICE, hits, engine=EchoEngine(), settings=settings, fingerprint="f")
        for request in (
            typed,
            replace(typed, json_schema=None),
            replace(typed, json_schema=schema_for(column("date"))),
            replace(typed, json_schema=schema_for(replace(column("choice"), options=("Seller", "Buyer")))),
        )
    }
    assert len(keys) == 4  # the same question and sections, keyed apart by kind and options


# -- a grid's typed cells ----------------------------------------------------------------------------------------


def test_an_echo_engine_grid_fills_typed_values_from_verified_quotes(tmp_path: Path, room: Path) -> None:
    engine = RecordingEngine()
    questions = [
        f"{NOTICE}::duration",
        "Which law governs the agreement?::jurisdiction",
        "Who may terminate for convenience?::choice[Either party|Seller|Buyer]",
        "May a party terminate for convenience?::yes_no",
        "When does the agreement start?::date",
        "Which laws govern the agreement?",
    ]
    grid = pipe(tmp_path, engine).review(room, questions=questions)
    assert {r.priority for r in engine.requests} == {PRIORITY_BULK}
    assert [r.json_schema["title"] if r.json_schema else None for r in engine.requests[:6]] == [
        "duration_cell", "jurisdiction_cell", "choice_cell", "yes_no_cell", "date_cell", None,
    ]  # fmt: skip
    for seller, _, notice, law in PARTIES:
        row = f"{seller.split()[0].lower()}_supply.pdf"
        days = int(notice.split("(")[1].rstrip(")"))
        cells = [grid.cell(row, c) for c in range(len(questions))]
        duration, place, who, yes, start, text = cells
        for cell in (duration, place, who, yes):
            assert cell.status == "present" and cell.verified and cell.value is not None, cell
        assert duration.value.normalized == {"days": days, "count": days, "unit": "day"}
        assert duration.text == f"{days} days (p. 1)" and notice in duration.verified[0].quote
        assert place.value.normalized == law  # canonical: "California", not "the State of California"
        assert who.value.normalized == "Either party" and yes.value.normalized is True
        # The echo engine has no date to read in its sentence and gives the schema's example: not a fact.
        assert start.status == "uncertain" and start.value is None
        assert "The quote holds no date, the model said 2019-05-08" in start.note
        assert text.value is None and text.status == "present"  # a text column is read as before


def test_a_value_its_quote_does_not_support_drops_to_uncertain(tmp_path: Path, wingtip: Path) -> None:
    right = read(tmp_path / "a", wingtip, json.dumps(reply({"count": 90, "unit": "day"})))
    assert right.status == "present" and right.value.display == "90 days" and right.verified
    assert right.verified[0].highlight == "ninety (90) days"

    wrong = read(tmp_path / "b", wingtip, json.dumps(reply({"count": 60, "unit": "day"})))
    assert wrong.status == "uncertain" and wrong.value is None and wrong.answer == ""
    assert wrong.note.startswith("The quote says 90 days, the model said 60 days: not shown as a fact.")
    assert wrong.verified  # the quote is real: the reviewer sees it beside the note

    law = read(tmp_path / "c", wingtip, json.dumps(reply("Delaware", quote=NINETY)), kind="jurisdiction")
    assert law.status == "uncertain" and "The quote holds no jurisdiction, the model said Delaware" in law.note


def test_a_quote_not_in_the_sections_is_never_present(tmp_path: Path, wingtip: Path) -> None:
    invented = "Either party may terminate this Agreement at will upon ninety (90) days notice."
    cell = read(tmp_path, wingtip, json.dumps(reply({"count": 90, "unit": "day"}, quote=invented)))
    assert cell.status == "uncertain" and cell.value is None and cell.quotes and not cell.verified
    assert "its quote is not in the sections it was given" in cell.note

    unquoted = read(tmp_path / "b", wingtip, json.dumps(reply(True, quote="", as_written="")), kind="yes_no")
    assert unquoted.status == "uncertain" and unquoted.value is None and "it quoted nothing" in unquoted.note


def test_absent_and_uncertain_replies_show_no_value(tmp_path: Path, wingtip: Path) -> None:
    absent = read(tmp_path / "a", wingtip, json.dumps(reply(None, quote="", as_written="", status="absent")))
    assert (absent.status, absent.answer, absent.value) == ("absent", "not stated", None)
    assert absent.text == "No - not stated"
    unsure = read(tmp_path / "b", wingtip, json.dumps(reply({"count": 90, "unit": "day"}, status="uncertain")))
    assert unsure.status == "uncertain" and unsure.value is None and "The model's reading: 90 days." in unsure.note


def test_a_reply_that_is_not_the_json_asked_for_fails_its_cell_and_is_asked_again(
    tmp_path: Path, wingtip: Path
) -> None:
    engine = JsonReplyEngine('{"quote": "3.2 Either party may terminate this Agreement for conv')  # cut mid-object
    dp = pipe(tmp_path, engine)
    grid = dp.review([wingtip], questions=[f"{NOTICE}::duration"])
    cell = grid.cell(0, 0)
    assert cell.status == "failed" and cell.value is None and "not the JSON the cell asks for" in cell.note
    dp.review([wingtip], questions=[f"{NOTICE}::duration"])
    assert len(engine.requests) == 2  # a failed cell is not cached: the rerun asks again


def test_a_typed_cell_comes_back_from_the_cache_with_its_value(tmp_path: Path, wingtip: Path) -> None:
    engine = JsonReplyEngine(reply({"count": 90, "unit": "day"}))
    dp = pipe(tmp_path, engine)
    first = dp.review([wingtip], questions=[f"{NOTICE}::duration"]).cell(0, 0)
    again = dp.review([wingtip], questions=[f"{NOTICE}::duration"]).cell(0, 0)
    assert len(engine.requests) == 1 and again.cached and not first.cached
    assert again.value == first.value and again.value.normalized["days"] == 90
    text = dp.review([wingtip], questions=[NOTICE]).cell(0, 0)
    assert len(engine.requests) == 2 and not text.cached  # the text column never reuses the typed cell


# -- the real engine ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_engine(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe-contracts[cpu]'")
    from docpipe.engine.vllm import VLLMEngine
    from docpipe.testing.models import build_tiny_qwen3

    model = build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))
    # The tiny tokenizer spends several tokens per Qwen3 token: a 4k window holds a typed cell's prompt and reply.
    engine = VLLMEngine(str(model), max_model_len=4096, cache_root=tmp_path_factory.mktemp("vllm-cache"))
    yield engine
    engine.close()


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["no_think", "think"])
def test_the_vllm_engine_replies_schema_valid_json_for_a_typed_column(
    tiny_engine, tmp_path: Path, sample_pdf: Path, mode: str
) -> None:
    settings = Settings.preset("test", home=tmp_path, engine={"max_answer_tokens": 1024, "max_thinking_tokens": 8})
    dp = DocPipe(settings, engine=tiny_engine)
    index = dp.index(dp.ingest(sample_pdf))
    hits = [h for h in index.sections() if h.n_tokens < 200][:2]  # a short prompt for the 4k window
    requests = [
        typed_request(column(kind), hits, index.doc, settings=settings.engine, mode=mode)
        for kind in ("duration", "date", "choice")
    ]
    results = tiny_engine.generate(requests)
    for request, result in zip(requests, results, strict=True):
        assert result.error is None and result.finish_reason == "stop", result
        assert (result.thinking is not None) == (mode == "think")  # the thought is free text; JSON comes after it
        jsonschema.validate(_one_char_per_broken_sequence(json.loads(result.text, strict=False)), request.json_schema)
        cell = typed_model_cell(typed_column(request), result, hits, index.doc)
        # Random weights quote nothing of the contract: never a value shown as a fact.
        assert cell.status in ("absent", "uncertain") and cell.value is None, cell


def _one_char_per_broken_sequence(data: object) -> object:
    """Returns `data` with each run of U+FFFD as one: random weights leave UTF-8 sequences unfinished, which the
    grammar counts as one character of a string and the detokenizer writes as one U+FFFD per byte (measured: a
    600-character quote decoded as 602 characters, one of them a run of three)."""
    if isinstance(data, str):
        return re.sub("\ufffd+", "\ufffd", data)
    if isinstance(data, list):
        return [_one_char_per_broken_sequence(v) for v in data]
    if isinstance(data, dict):
        return {k: _one_char_per_broken_sequence(v) for k, v in data.items()}
    return data
