"""`Answering`: what every way of answering shares (the engine, the embedder, the settings, the index
fingerprint, the answer cache and the stored sentence embeddings), built once and frozen, with the one path
answers take through it.

`DocPipe.ask`, `ask_many` and `ask_stream`, a collection's questions about one contract, the checklist
(`docpipe.analysis.analyze`), review grids (`docpipe.review.run`) and the OpenAI route all answer through an
`Answering`: the same plan (`core.plan_answers`), the same finish (`core.finish_answer`) and the same answer
cache, so one question gets the same answer, citations and document name whichever way it is asked, cached
or not. Offline (no engine), work over a document runs with the sentence embeddings the store keeps for it
(`StoredSentences`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from docpipe.answer import core
from docpipe.answer.stored_vectors import StoredSentences

if TYPE_CHECKING:
    from docpipe.answer.core import CacheOpener
    from docpipe.answer.prompts import ThinkingMode
    from docpipe.answer.streaming import AnswerEvent
    from docpipe.embed.base import Embedder
    from docpipe.engine.base import Engine
    from docpipe.retrieve.fusion import SearchIndex
    from docpipe.settings import Settings
    from docpipe.types import Answer

__all__ = ["Answering"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Answering:
    """What answering shares (see the module docstring). `engine` None: extractive answers; `cache` opens
    the answer cache on first use."""

    engine: Engine | None
    embedder: Embedder
    settings: Settings
    fingerprint: str
    cache: CacheOpener
    sentences: StoredSentences

    def cache_for(self, use_cache: bool) -> CacheOpener | None:
        """Returns the cache opener, or None when the caller asked for no cache (neither read nor written)."""
        return self.cache if use_cache else None

    def offline(self, index: SearchIndex, work: Callable[[], T]) -> T:
        """Returns what `work` (offline answers or candidates over `index`) returns, run with the document's
        stored sentence embeddings, those it adds stored after."""
        return self.sentences.around(index, work)

    def answer(
        self,
        index: SearchIndex,
        questions: Sequence[str],
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        use_cache: bool = True,
        analysis: bool = False,
        queries: Sequence[str] | None = None,
    ) -> list[Answer]:
        """Returns one `Answer` per question about `index`'s document, in order, the questions in one engine
        batch (cached answers from the cache); `queries` (one per question) is what retrieval searches for
        instead of the question (see `core.plan_answers`)."""
        plan = core.plan_answers(
            index,
            questions,
            engine=self.engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            k=k,
            mode=mode,
            analysis=analysis,
            queries=queries,
        )
        if self.engine is None:
            return self.offline(
                index,
                lambda: core.extractive_answers(
                    index, plan, embedder=self.embedder, settings=self.settings, fingerprint=self.fingerprint
                ),
            )
        return core.generate_answers(
            plan,
            index.doc,
            engine=self.engine,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self.cache_for(use_cache),
        )

    def stream(
        self,
        index: SearchIndex,
        question: str,
        *,
        k: int | None = None,
        mode: ThinkingMode | None = None,
        use_cache: bool = True,
    ) -> Iterator[AnswerEvent]:
        """Returns the `AnswerEvent`s of one answer (see `DocPipe.ask_stream`): the engine's pieces as it writes
        them when it can stream, then ``done`` with the `Answer` that `answer` gives."""
        from docpipe.answer.streaming import AnswerEvent, stream_answer, streaming_engine

        if self.engine is None or streaming_engine(self.engine) is None:
            yield AnswerEvent("done", answer=self.answer(index, [question], k=k, mode=mode, use_cache=use_cache)[0])
            return
        yield from stream_answer(
            index,
            question,
            engine=self.engine,
            embedder=self.embedder,
            settings=self.settings,
            fingerprint=self.fingerprint,
            cache=self.cache_for(use_cache),
            k=k,
            mode=mode,
        )
