"""`Counting`: a real embedder wrapped to count what it is asked to embed (texts and calls)."""

from __future__ import annotations

from typing import Any


class Counting:
    """Embeds with `inner` and counts the texts (`texts`) and the calls (`calls`); everything else is inner's."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts, self.calls = inner, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> Any:
        self.texts += len(texts)
        self.calls += 1
        return self.inner.embed(texts)
