"""Builds a tiny random-weight Qwen3-architecture model folder, with a byte-level BPE tokenizer and a
Qwen3-style chat template, in seconds and without any download: the real vLLM engine can then be run
and tested on a CPU. Its output is noise; what it exercises is the engine path (batching, chat template,
thinking switch, streaming, abort), exactly as Qwen3-14B uses it.

Needs torch and transformers (installed with ``docpipe-contracts[cpu]``).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["QWEN3_CHAT_TEMPLATE", "build_tiny_qwen3", "wait_until_up"]

# Qwen3's chat template, reduced to what docpipe sends (system + user turns, no tools): with
# enable_thinking=False it closes an empty think block so the model answers directly.
QWEN3_CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)

_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# As in Qwen3's tokenizer: single tokens, but not "special", so they stay in decoded output.
_THINK_TOKENS = ["<think>", "</think>"]

_CORPUS = """This Agreement shall commence on the Effective Date and continue for an initial term of three years.
Either Party may terminate this Agreement for convenience upon ninety (90) days' prior written notice.
The Provider shall maintain commercial general liability insurance of USD 2,000,000 per occurrence.
Confidential Information means all non-public information disclosed by a Party. Governing law: Delaware.
Section 12.3 Termination for Convenience. ARTICLE 9 LIMITATION OF LIABILITY. Exhibit A Statement of Work.
What is the notice period? The answer cites the section and the page. Quote the contract verbatim.
"""


def build_tiny_qwen3(folder: Path, *, seed: int = 0, vocab_size: int = 1024) -> Path:
    """Returns `folder`, now holding config.json, model.safetensors and a tokenizer for a ~1M-parameter
    Qwen3ForCausalLM with random weights. Deterministic for a given seed."""
    import torch
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS.splitlines() * 4, trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in _THINK_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
    )
    fast.chat_template = QWEN3_CHAT_TEMPLATE
    fast.save_pretrained(folder)

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        torch_dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder, safe_serialization=True)
    generation = {"eos_token_id": config.eos_token_id, "pad_token_id": config.pad_token_id}
    (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


def wait_until_up(process, health_url: str, *, timeout_s: float, log: Path, what: str, poll_s: float = 0.5) -> float:
    """Returns the seconds until `health_url` answered 200, for a server started as `process` that writes `log`.

    Raises RuntimeError, with the end of the log, when the process exits first or `timeout_s` passes.
    """
    import time

    import httpx

    def tail() -> str:
        return "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""

    start = time.monotonic()
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{tail()}")
        if time.monotonic() - start > timeout_s:
            raise RuntimeError(f"{what} was not up within {timeout_s} s:\n{tail()}")
        try:
            if httpx.get(health_url, timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        time.sleep(poll_s)
