"""What adding files to a collection reports: each step as it happens (`AddProgress`) and the whole add at the
end (`AddReport`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from docpipe.storage.collections import Member

__all__ = ["AddProgress", "AddReport"]


@dataclass(frozen=True, slots=True)
class AddProgress:
    """One step of `Collection.add`: a file finished (``file``: `done` of `total` files, `error` when it
    failed) or a batch of texts embedded (``embed``: `done` of `total` texts known so far: passages, and the sentences
    offline answers score when `embedding.sentence_vectors` is ``ingest``). The first event of an add is ``file``
    0 of all the files found, before any is read."""

    kind: str
    done: int
    total: int
    name: str = ""
    error: str = ""


@dataclass(slots=True)
class AddReport:
    """What `Collection.add` did: documents added to the collection, those it held already, and the files
    that failed with the reason (none of them stops the others), with the pages newly extracted and the time."""

    collection: str
    added: list[Member] = field(default_factory=list)
    present: list[Member] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    extracted_pages: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        """Returns the report as lines for a person: counts, then each failure with its reason."""
        if self.extracted_pages:
            work = f"{self.extracted_pages} pages extracted in {self.seconds:.1f} s"
        elif self.added:
            work = f"already stored: nothing to extract, {self.seconds:.1f} s"
        else:
            work = f"nothing new, {self.seconds:.1f} s"
        lines = [
            f"collection {self.collection}: {len(self.added)} added, {len(self.present)} already in it, "
            f"{len(self.failed)} failed ({work})"
        ]
        lines += [f"  failed: {name}: {reason}" for name, reason in self.failed]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "collection": self.collection,
            "added": [m.to_dict() for m in self.added],
            "present": [m.to_dict() for m in self.present],
            "failed": [{"file": name, "reason": reason} for name, reason in self.failed],
            "extracted_pages": self.extracted_pages,
            "seconds": round(self.seconds, 3),
        }
