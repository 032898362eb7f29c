"""The same MiniLM weights on OpenVINO: the BERT graph is built in memory from the model folder's safetensors
(no export step, no file to cache, nothing downloaded), compiled for the CPU, and fed length-sorted batches.

On CPUs with bfloat16 matrix units (AMX, AVX512-BF16) OpenVINO computes in bfloat16 by default: about 3x the
passages/s of torch on 2 cores here, vectors at cosine >= 0.9999 to torch's (benchmarks/embed_speed.py, tests/
test_embed_backends.py). Because those vectors are not torch's to float32 rounding, an index built with this
backend has its own fingerprint (`docpipe.settings.EmbeddingSettings.vector_backend`). Imports openvino only when
the model is first compiled.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.embed import _bert_numpy as bert_numpy
from docpipe.embed.sentence_transformers import PACKAGED_MINILM, SentenceTransformerEmbedder, resolve_model
from docpipe.errors import ConfigError, DependencyError

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

__all__ = ["INSTALL_HINT", "OpenVinoEmbedder", "available", "build_model", "supports"]

INSTALL_HINT = "pip install openvino"


def available() -> bool:
    """Returns True when the openvino package is importable (without importing it)."""
    return importlib.util.find_spec("openvino") is not None


def supports(model: str) -> bool:
    """Returns True when this backend builds `model` (a name or folder, as in the settings): a plain BERT
    sentence encoder, as the NumPy forward pass reads it."""
    return bert_numpy.supports(resolve_model(model))


def _import_openvino() -> Any:
    try:
        import openvino
    except ImportError as exc:
        raise DependencyError(
            f"the openvino embedding backend needs OpenVINO, which is not installed: {INSTALL_HINT}"
        ) from exc
    return openvino


def build_model(folder: Path) -> Any:
    """Returns an `openvino.Model` of the sentence-transformers BERT in `folder`: inputs ``input_ids`` and
    ``attention_mask`` (int64, batch x length), output ``embedding`` (mean-pooled, L2-normalised, float32).

    The same forward pass as `docpipe.embed._bert_numpy` (token type 0 throughout, as for single texts), in
    OpenVINO operations: fused attention (`scaled_dot_product_attention`), erf GELU, MVN layer norms.
    """
    import numpy as np
    from safetensors.numpy import load_file

    ov = _import_openvino()
    import openvino.opset13 as ops

    config = json.loads((folder / "config.json").read_text())
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    eps = float(config.get("layer_norm_eps", 1e-12))
    weights = load_file(str(folder / "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in weights else ""

    def const(value: Any, dtype: Any = np.float32) -> Any:
        return ops.constant(np.asarray(value, dtype=dtype))

    def weight(key: str) -> Any:
        return const(weights[prefix + key])

    def layer_norm(x: Any, key: str) -> Any:
        normed = ops.mvn(x, const([-1], np.int64), True, eps, "inside_sqrt")
        return ops.add(ops.multiply(normed, weight(key + ".weight")), weight(key + ".bias"))

    def dense(x: Any, key: str) -> Any:
        return ops.add(ops.matmul(x, weight(key + ".weight"), False, True), weight(key + ".bias"))

    ids = ops.parameter([-1, -1], ov.Type.i64, name="input_ids")
    mask = ops.parameter([-1, -1], ov.Type.i64, name="attention_mask")
    length = ops.gather(ops.shape_of(ids), const([1], np.int64), const(0, np.int64))
    positions = ops.slice(
        weight("embeddings.position_embeddings.weight"), const([0], np.int64), length, const([1], np.int64)
    )
    token_type = ops.gather(weight("embeddings.token_type_embeddings.weight"), const([0], np.int64), const(0, np.int64))
    x = ops.add(ops.gather(weight("embeddings.word_embeddings.weight"), ids, const(0, np.int64)), positions)
    x = layer_norm(ops.add(x, token_type), "embeddings.LayerNorm")
    keep = ops.unsqueeze(ops.convert(mask, "boolean"), const([1, 2], np.int64))  # batch x 1 x 1 x length
    split = const([0, 0, heads, hidden // heads], np.int64)
    merge = const([0, 0, hidden], np.int64)
    for n in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{n}."
        q, k, v = (
            ops.transpose(
                ops.reshape(dense(x, p + "attention.self." + name), split, True), const([0, 2, 1, 3], np.int64)
            )
            for name in ("query", "key", "value")
        )
        context = ops.scaled_dot_product_attention(q, k, v, keep, causal=False)
        context = ops.reshape(ops.transpose(context, const([0, 2, 1, 3], np.int64)), merge, True)
        x = layer_norm(ops.add(x, dense(context, p + "attention.output.dense")), p + "attention.output.LayerNorm")
        inner = ops.gelu(dense(x, p + "intermediate.dense"), "erf")
        x = layer_norm(ops.add(x, dense(inner, p + "output.dense")), p + "output.LayerNorm")
    maskf = ops.unsqueeze(ops.convert(mask, "f32"), const([2], np.int64))
    summed = ops.reduce_sum(ops.multiply(x, maskf), const([1], np.int64), False)
    count = ops.maximum(ops.reduce_sum(maskf, const([1], np.int64), False), const(1e-9))
    pooled = ops.divide(summed, count)
    norm = ops.sqrt(ops.reduce_sum(ops.multiply(pooled, pooled), const([-1], np.int64), True))
    out = ops.divide(pooled, ops.maximum(norm, const(1e-12)))
    out.output(0).get_tensor().set_names({"embedding"})
    return ov.Model([out], [ids, mask], "docpipe-bert")


class OpenVinoEmbedder(SentenceTransformerEmbedder):
    """Returns the embeddings of `SentenceTransformerEmbedder` (same weights, tokenizer, `token_spans` and
    `max_tokens`), with OpenVINO instead of torch doing the bulk work.

    The model must be a plain BERT sentence encoder (mean pooling, normalised), as the packaged MiniLM is.
    A few texts while nothing is compiled (a question in a fresh process) still go through the NumPy forward
    pass, which reads in a tenth of a second; compiling takes under half a second, with no torch imported.

    >>> e = OpenVinoEmbedder()                            # doctest: +SKIP
    >>> e.embed(["notice period"] * 100).shape, e.backend  # doctest: +SKIP
    ((100, 384), 'openvino')
    """

    backend = "openvino"
    #: Compiling takes about 0.7 s, then a short text about 12 ms; the NumPy pass takes about 45 ms a text
    #: (the 41 checklist queries: 1.9 s in NumPy, 1.2 s compiling included): a few texts stay in NumPy.
    NUMPY_BATCH_LIMIT = 16

    def __init__(
        self,
        model: str = PACKAGED_MINILM,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        precision: str | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        if not available():
            raise DependencyError(
                f"the openvino embedding backend needs OpenVINO, which is not installed: {INSTALL_HINT}"
            )
        super().__init__(model, batch_size=batch_size)
        if not self._numpy_ok:
            raise ConfigError(
                f"embedding model {model!r} is not a plain BERT sentence encoder (mean pooling, normalised), the only "
                "kind the openvino backend builds: use embedding.backend 'torch' for it"
            )
        self._threads = threads
        self._precision = precision  # None: OpenVINO's choice for the CPU; "f32" gives torch's vectors to rounding
        self._compiled: Any = None
        self._lock = threading.Lock()
        self._bulk_tokenizer = Tokenizer.from_str(self._tokenizer.to_str())
        self._bulk_tokenizer.enable_truncation(max_length=self._max_seq_length)
        #: What OpenVINO computes in ('bf16' on CPUs with bfloat16 units, else 'f32'); known once compiled.
        self.precision: str | None = None

    def _bulk_loaded(self) -> bool:
        return self._compiled is not None

    def compile(self) -> Any:
        """Returns the compiled model, building and compiling it on first use (thread-safe)."""
        with self._lock:
            if self._compiled is None:
                ov = _import_openvino()
                config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY"}
                if self._threads is not None:
                    config["INFERENCE_NUM_THREADS"] = self._threads
                if self._precision is not None:
                    config["INFERENCE_PRECISION_HINT"] = self._precision
                compiled = ov.Core().compile_model(build_model(self._path), "CPU", config)
                hint = compiled.get_property("INFERENCE_PRECISION_HINT")
                self.precision = hint.to_string() if hasattr(hint, "to_string") else str(hint)
                log.info("embedder %s compiled with OpenVINO (%s)", self.name, self.precision)
                self._compiled = compiled
            return self._compiled

    def _encode_bulk(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        request = self.compile().create_infer_request()  # one per call: a request is not shared between threads
        encodings = self._bulk_tokenizer.encode_batch(texts)
        # Longest first, so each batch pads to lengths close to its own: unsorted batches were 1.1-2.5x slower.
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            ids = np.zeros((len(rows), len(encodings[rows[0]].ids)), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            out[rows] = request.infer({"input_ids": ids, "attention_mask": mask})[0]
        return out
