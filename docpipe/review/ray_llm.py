"""The generation stage of a Ray review grid on GPUs: Ray Data's own vLLM processor (`ray.data.llm`), configured
from docpipe's settings (model, tensor parallel size, replicas, batch size, the same engine arguments as the
in-process engine), fed the grid's own prompts, and its replies parsed and verified as every other cell's.

What differs from docpipe's in-process engine: ``ray.data.llm`` renders the chat template once per processor,
so a grid's cells all think or all answer directly (its mode), and a thinking budget
(``engine.max_thinking_tokens``) caps thinking and answer together (``max_tokens`` = budget + answer tokens)
instead of closing a long thought and continuing to the answer. A cell cut that way has no answer and is
``uncertain``, saying so. Imports ray only when called.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from docpipe.engine.base import GenerationResult, split_thinking
from docpipe.review.run import EngineIdentity, PendingCell, model_cell

if TYPE_CHECKING:
    from docpipe.settings import Settings

__all__ = ["postprocess", "preprocess", "processor_config", "vllm_generation_stage"]


def processor_config(settings: Settings, *, batch_size: int, thinking: bool) -> Any:
    """Returns the `vLLMEngineProcessorConfig` for the grid: docpipe's engine arguments for a GPU node
    (prefix caching, priority scheduling, tensor parallel size, quantization ...), `ray.replicas` engine
    replicas of `ray.num_gpus_per_replica` GPUs, cells in batches of `batch_size`, thinking on or off."""
    from ray.data.llm import ChatTemplateStageConfig, vLLMEngineProcessorConfig

    from docpipe.engine.vllm import engine_args, settings_args

    # gpu: the replicas' nodes have GPUs, whatever the driver's node has.
    args = engine_args(settings.engine.model, gpu=True, **settings_args(settings.engine))
    model = args.pop("model")
    return vLLMEngineProcessorConfig(
        model_source=model,
        engine_kwargs=args,
        batch_size=batch_size,
        concurrency=settings.ray.replicas,
        chat_template_stage=ChatTemplateStageConfig(enabled=True, chat_template_kwargs={"enable_thinking": thinking}),
        tokenize_stage=True,
        detokenize_stage=True,
        should_continue_on_error=True,  # one failed cell is recorded as failed, never the whole grid
    )


def preprocess(row: dict[str, Any]) -> dict[str, Any]:
    """Returns the processor's input for a pending cell: its own messages and sampling (see the module note)."""
    _question, request, _hits = pickle.loads(row["payload"])
    sampling = {k: v for k, v in request.sampling.as_dict().items() if v is not None}
    if request.thinking and request.max_thinking_tokens:
        sampling["max_tokens"] = request.max_thinking_tokens + int(sampling.get("max_tokens") or 0)
    return {"messages": [dict(m) for m in request.messages], "sampling_params": sampling}


def postprocess(
    row: dict[str, Any],
    *,
    factory: Callable[[Settings], Any],
    settings_json: str,
    identity: EngineIdentity,
    names: dict[str, str],
    matter: str | None,
) -> dict[str, Any]:
    """Returns the grid row of a processed cell: the reply split into thinking and answer, parsed, its quotes
    checked against the sections the cell was given (`docpipe.review.run.model_cell`)."""
    from docpipe.review.grid import Cell
    from docpipe.review.ray_rows import cell_row, worker_pipeline

    r, c = int(row["r"]), int(row["c"])
    error = row.get("__inference_error__") or ""
    if error:
        cell = Cell("failed", note=f"The engine failed on this cell: {error}")
        return cell_row(r, c, "cell", cell=cell)
    question, request, hits = pickle.loads(row["payload"])
    dp = worker_pipeline(factory, settings_json)
    doc = dp.document(row["doc_id"], name=names.get(row["doc_id"]), matter=matter, authorized=True)
    if doc is None:
        return cell_row(r, c, "cell", cell=Cell("failed", note="The document left the store while the grid ran."))
    answer, thinking, complete = split_thinking(str(row.get("generated_text") or ""))
    result = GenerationResult(
        text=answer,
        thinking=thinking,
        finish_reason="stop" if complete else "length",
        prompt_tokens=int(row.get("num_input_tokens") or 0),
        completion_tokens=int(row.get("num_generated_tokens") or 0),
        thinking_truncated=not complete,
    )
    item = PendingCell(r, c, question, request, row["key"], hits, doc)
    cell = model_cell(item, result, engine=identity, fingerprint=dp.fingerprint)
    tokens = {"prompt": result.prompt_tokens, "completion": result.completion_tokens, "cached": None}
    return cell_row(r, c, "computed", cell=cell, key=row["key"], tokens=tokens)


def vllm_generation_stage(
    dataset: Any,
    settings: Settings,
    identity: EngineIdentity,
    *,
    factory: Callable[[Settings], Any],
    batch_size: int,
    mode: str,
    names: dict[str, str],
    matter: str | None,
) -> Any:
    """Returns the grid's rows with every pending cell answered by `ray.data.llm`'s vLLM processor. The planned
    rows are materialised once, so the cells finished in planning are not planned again."""
    from ray.data.llm import build_processor

    planned = dataset.materialize()
    done = planned.filter(lambda row: row["kind"] != "pending")
    pending = planned.filter(lambda row: row["kind"] == "pending")
    processor = build_processor(
        processor_config(settings, batch_size=batch_size, thinking=mode != "no_think"),
        preprocess=preprocess,
        postprocess=functools.partial(
            postprocess,
            factory=factory,
            settings_json=settings.model_dump_json(),
            identity=identity,
            names=names,
            matter=matter,
        ),
    )
    return done.union(processor(pending))
