"""One answer path: a question gets the same answer, citations and document name whichever way it is asked
(`ask`, `ask_many`, `ask_stream`, a collection question naming the contract), from the engine or from the
answer cache, and the cache never names the document as another caller named it.

The engine is the packaged EchoEngine (it streams); the document's bytes are stored once, under the first
caller's name, and asked about under a second name, as two matters holding one contract do.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from docpipe import Answer, DocPipe, Document, Settings
from docpipe.engine.fake import EchoEngine

KEY = "What is the notice period for termination for convenience?"
FIRST, SECOND = "first-upload.pdf", "second-upload.pdf"


def _comparable(answer: Answer) -> dict:
    data = answer.to_dict()
    data.pop("created")
    return data


@pytest.fixture
def asked(tmp_path: Path, sample_pdf: Path) -> tuple[DocPipe, Document, Answer]:
    """A pipe whose answer cache holds the key question's answer asked under the first caller's name, and the
    same stored document seen under the second caller's."""
    dp = DocPipe(Settings.preset("test", home=tmp_path / "home"), engine=EchoEngine())
    first = dp.ingest(sample_pdf, name=FIRST)
    answer = dp.ask(first, KEY)
    second = dp.document(first.id, name=SECOND)
    assert second is not None and second.name == SECOND
    return dp, second, answer


def _ways(dp: DocPipe, doc: Document) -> dict[str, Callable[[bool], Answer]]:
    return {
        "ask": lambda cached: dp.ask(doc, KEY, use_cache=cached),
        "ask_many": lambda cached: dp.ask_many(doc, [KEY], use_cache=cached)[0],
        "ask_stream": lambda cached: list(dp.ask_stream(doc, KEY, use_cache=cached))[-1].answer,
    }


@pytest.mark.parametrize("cached", [True, False], ids=["from-the-cache", "from-the-engine"])
def test_every_way_in_gives_one_answer_named_as_the_caller_names_the_document(
    asked: tuple[DocPipe, Document, Answer], cached: bool
) -> None:
    dp, second, first_answer = asked
    answers = {way: ask(cached) for way, ask in _ways(dp, second).items()}
    for way, answer in answers.items():
        assert answer.document_name == SECOND, way  # never the name the cache was filled under
        assert answer.citations and {c.document_name for c in answer.citations} == {SECOND}, way
    reference = _comparable(answers["ask"])
    assert all(_comparable(answer) == reference for answer in answers.values()), {
        way: answer.document_name for way, answer in answers.items()
    }
    # The same text and the same pages as the first caller's answer: only the document's name differs.
    assert answers["ask"].text == first_answer.text
    assert [c.pages for c in answers["ask"].citations] == [c.pages for c in first_answer.citations]
    assert first_answer.document_name == FIRST


def test_a_streamed_answer_is_counted_as_a_cache_hit_as_ask_counts_it(
    asked: tuple[DocPipe, Document, Answer],
) -> None:
    from docpipe.events import add_listener, remove_listener

    dp, second, _ = asked
    heard: list[dict] = []

    def listen(name: str, fields: dict[str, float]) -> None:
        if name == "answer_cache":
            heard.append(fields)

    add_listener(listen)
    try:
        dp.ask(second, KEY)
        list(dp.ask_stream(second, KEY))
    finally:
        remove_listener(listen)
    assert heard == [{"hits": 1, "misses": 0}, {"hits": 1, "misses": 0}]
