"""The OpenAI-compatible endpoints on a real `docpipe serve` (127.0.0.1, echo engine), called with the official
`openai` client as Open WebUI or any OpenAI client calls them: models per document and collection, answers
with citations (whole and streamed), and the matter wall, auth and question limits of the other /v1 routes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.server import QUESTION, Served, new_key, serving

openai = pytest.importorskip("openai", reason="the tests call the server with the openai client: pip install openai")

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> Iterator[dict]:
    home = tmp_path_factory.mktemp("openai") / "home"
    home.mkdir()
    keys = {"alice": new_key(home, "alice", "deal-x:write"), "bob": new_key(home, "bob", "deal-y:write")}
    with serving(home, "--engine", "echo", "--no-ui", token=None) as served:
        headers = {"Authorization": f"Bearer {keys['alice']}"}
        up = httpx.post(
            f"{served.url}/v1/documents",
            params={"name": "Falcon MSA.pdf"},
            content=sample_pdf.read_bytes(),
            headers={**headers, "Content-Type": "application/pdf"},
            timeout=120,
        )
        assert up.status_code == 200, up.text
        doc_id = up.json()["id"]
        made = httpx.post(f"{served.url}/v1/collections", json={"name": "deals"}, headers=headers, timeout=30)
        assert made.status_code == 201, made.text
        added = httpx.post(
            f"{served.url}/v1/collections/deals/documents", json={"ids": [doc_id]}, headers=headers, timeout=120
        )
        assert added.status_code == 200, added.text
        yield {"served": served, "keys": keys, "doc_id": doc_id}


def client(world: dict, user: str = "alice") -> openai.OpenAI:
    served: Served = world["served"]
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=world["keys"][user], max_retries=0, timeout=60)


def test_models_list_the_matters_documents_and_collections(world: dict) -> None:
    models = {m.id: m for m in client(world).models.list()}
    doc = models[f"docpipe:{world['doc_id']}"]
    assert doc.object == "model" and doc.model_extra is not None and doc.model_extra["name"] == "Falcon MSA.pdf"
    assert "docpipe:deals" in models
    assert list(client(world, "bob").models.list()) == []  # another matter sees none of them


def test_a_completion_answers_with_sources_and_citations(world: dict) -> None:
    done = client(world).chat.completions.create(
        model=f"docpipe:{world['doc_id'][:12]}",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Who are the parties?"},
            {"role": "assistant", "content": "Falcon and its customer."},
            {"role": "user", "content": QUESTION},
        ],
        temperature=0.9,
        max_tokens=5,  # ignored: the answer is the server's
    )
    message = done.choices[0].message
    assert done.object == "chat.completion" and done.choices[0].finish_reason == "stop"
    assert message.content is not None and "ninety (90) days" in message.content
    answer_text, _, sources = message.content.partition("\n\nSources:\n")
    assert "ninety (90) days" in answer_text and sources.startswith("1. p")
    citations = (message.model_extra or {})["citations"]
    assert citations and all({"quote", "page_start", "verified"} <= set(c) for c in citations)
    # usage is the engine's own count: the prompt holds the contract's sections, the completion the reply.
    assert done.usage is not None and done.usage.prompt_tokens > 100 and done.usage.completion_tokens > 0
    assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
    assert any(c["verified"] and c["quote"][:40] in sources for c in citations)
    # The answer is stored as /ask's are, in the caller's matter.
    answer_id = (done.model_extra or {})["answer_id"]
    stored = httpx.get(
        f"{world['served'].url}/v1/answers/{answer_id}",
        headers={"Authorization": f"Bearer {world['keys']['alice']}"},
        timeout=30,
    )
    assert stored.status_code == 200 and stored.json()["question"] == QUESTION


def test_a_streamed_completion_adds_up_to_the_answer_and_ends_with_citations(world: dict) -> None:
    model = f"docpipe:{world['doc_id']}"
    question = "What is the notice period for termination for convenience, in days?"  # not cached yet
    chunks = list(
        client(world).chat.completions.create(
            model=model, messages=[{"role": "user", "content": question}], stream=True
        )
    )
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert len([c for c in chunks if c.choices[0].delta.content]) > 2  # pieces, not one block
    assert "ninety (90) days" in content and "\n\nSources:\n1. " in content
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop"
    citations = (last.delta.model_extra or {})["citations"]
    assert citations and any(c["quote"][:40] in content for c in citations)
    # The same question again: a cached answer arrives whole, with the same content.
    again = client(world).chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], stream=False
    )
    assert again.choices[0].message.content == content


def test_a_collection_is_a_model(world: dict) -> None:
    done = client(world).chat.completions.create(
        model="docpipe:deals", messages=[{"role": "user", "content": QUESTION}]
    )
    assert done.choices[0].message.content
    assert "citations" in (done.choices[0].message.model_extra or {})


def test_unknown_models_and_other_matters_get_404_without_a_leak(world: dict) -> None:
    ask = [{"role": "user", "content": QUESTION}]
    with pytest.raises(openai.NotFoundError) as missing:
        client(world).chat.completions.create(model="docpipe:no-such-collection", messages=ask)
    assert "GET /v1/models" in missing.value.message
    with pytest.raises(openai.NotFoundError) as walled:
        client(world, "bob").chat.completions.create(model=f"docpipe:{world['doc_id']}", messages=ask)
    assert "deal-y" in walled.value.message and "Falcon" not in str(walled.value.body)
    with pytest.raises(openai.NotFoundError):
        client(world, "bob").chat.completions.create(model="docpipe:deals", messages=ask, stream=True)


def test_no_key_is_401(world: dict) -> None:
    served: Served = world["served"]
    anonymous = openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused", max_retries=0)
    no_key = {"Authorization": openai.Omit()}  # no Authorization header at all
    with pytest.raises(openai.AuthenticationError) as refused:
        anonymous.models.list(extra_headers=no_key)
    assert refused.value.response.request.headers.get("Authorization") is None
    with pytest.raises(openai.AuthenticationError):
        anonymous.chat.completions.create(
            model=f"docpipe:{world['doc_id']}",
            messages=[{"role": "user", "content": QUESTION}],
            extra_headers=no_key,
        )
    wrong = openai.OpenAI(base_url=f"{served.url}/v1", api_key="dpk_000000000000_" + "x" * 43, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()


@pytest.mark.parametrize("stream", [False, True])
def test_an_over_long_question_is_refused_with_a_clear_message(world: dict, stream: bool) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client(world).chat.completions.create(
            model=f"docpipe:{world['doc_id']}",
            messages=[{"role": "user", "content": "What is the notice period? " * 200}],
            stream=stream,
        )
    assert "keep it under 2000" in refused.value.message


def test_no_user_message_is_refused(world: dict) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client(world).chat.completions.create(
            model=f"docpipe:{world['doc_id']}", messages=[{"role": "system", "content": "Be brief."}]
        )
    assert "no user message" in refused.value.message
