"""Retrieval over a collection of documents: route the question to the contracts it names, then retrieve
inside them; a question that names none is ranked across every contract through one pooled index.

The published failure of retrieval over many contracts is quoting a similar clause of the wrong contract:
pooling every contract's passages into one index lets another contract's clause win. So a question goes
through two stages:

1. **Routing**, over one *card* per document: the name it goes by in the collection, the opening of its
   text (title, parties, date) and its closing (the signature blocks). BM25 (bm25s) and the embedder score
   the cards; a question *names* a contract when its words match the best card with the weight of at least
   `ROUTE_MIN_WEIGHT` words found on that card alone, the way a party's name or a title is, or when it gives
   a member's name as it goes in the collection (its file name).
   The best card by the fused score is named, with any within `FAMILY_MARGIN` of it (a contract and its
   amendments share their names; the cosine to the card tells them apart). Named documents are searched on
   their own, with the naming words taken out of the query (`strip_naming`): what is left is what the
   question asks of the contract.
2. **Pooled ranking** when nothing is named: one FAISS index over every member's passage vectors (read back
   from the documents' own indexes, never embedded again) and one bm25s index over their texts, fused by
   reciprocal rank; passages are lifted to their sections and the best sections of any contract come first.

The index lives beside the collection record (``<collection>/index-<fingerprint>/``). With a store key its
files are sealed like the documents' (`docpipe.storage.sealing`), and the passage BM25 index, which bm25s writes
as files of its own, is not saved: a load builds it again from the members' stored texts. Adding a document
adds its card and its vectors; removing one removes them (FAISS ``remove_ids``); neither re-embeds or
re-extracts anything. The pooled index is exact (flat) below `POOLED_FLAT_BELOW` vectors and IVF from there,
trained once when it crosses that size and again only when it has grown `RETRAIN_GROWTH` times since. The
bm25s index over passages is saved, so a later load reads it instead of building it; removing members
leaves their rows in it, passed over, and it is built again from the stored texts when a member has been
added (bm25s cannot add to an index) or `BM25_MAX_REMOVED` of its rows are of former members.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from docpipe.errors import StoreError
from docpipe.retrieve.cards import card_text, load_bm25s
from docpipe.retrieve.dense import bm25_terms, ivf_lists, tokenize
from docpipe.storage.sealing import Sealer, open_blob, seal_blob
from docpipe.storage.store import DIR_MODE, FILE_MODE, make_private_dir, sha256_hex

if TYPE_CHECKING:
    import numpy as np

    from docpipe.embed.base import Embedder
    from docpipe.storage.collections import Member

__all__ = ["ROUTE_MIN_WEIGHT", "CollectionIndex", "Route"]

logger = logging.getLogger(__name__)

#: A question names a contract when its words match the best card with the BM25 weight of at least this many
#: words found on that card alone (the card's score over the IDF of a word on one card: a party's name, a
#: title word, the file name). Measured on cuad-collection-dev (README, "Collections"): 0.993 of the
#: questions that name their contract reach 1.3, and 1 of the 41 plain questions of
#: natural_questions_dev.json, which name none (0.12 reach 1.0, 0.05 1.2).
ROUTE_MIN_WEIGHT = 1.3
#: Weight of the question-card cosine beside the card's BM25 score scaled to the best card's: the embedder
#: reads the card's first 256 word-pieces (its title and parties), which tells a contract from its
#: amendments where their words alike do not. Measured on cuad-collection-dev (README, "Collections").
DENSE_WEIGHT = 1.0
#: Of a group named together, those this far below the best fused score are left out.
FAMILY_MARGIN = 0.1
#: At most this many documents are named together.
MAX_NAMED = 4
#: Passages taken from each of the pooled dense and BM25 rankings before fusion.
POOL_DEPTH = 200
RETRAIN_GROWTH = 4
#: Removing members leaves their rows in the pooled BM25 index (passed over when ranking) until this share
#: of its rows is of former members; then the next question that needs it builds it again. Adding a member
#: builds it again at that question (bm25s has no incremental add): measured 2.2 s at 1,000 contracts and
#: 29 s at 10,000 (collection_scale.py).
BM25_MAX_REMOVED = 0.2
#: The pooled index is searched 200 deep (`POOL_DEPTH`) and fused with BM25, so it must find real neighbours,
#: not most of them. Measured by benchmarks/collection_scale.py on the data room's own vectors (README,
#: "Collections"): IVF probing 16 lists (the per-document index's setting) found 0.87-0.90 of the exact top 10
#: at 1,000-20,000 contracts and 0.87 on the 231 contracts themselves, where exact search takes under 1 ms;
#: probing 64 found 0.95-0.97 in 0.6-4.8 ms. So the pooled index stays exact up to `POOLED_FLAT_BELOW`
#: vectors (about 650 contracts) and probes `POOLED_NPROBE` lists past it.
POOLED_FLAT_BELOW = 50_000
POOLED_NPROBE = 64
_RRF_K = 60
# id of a passage in the pooled index: the member's slot in the high bits, the passage's index in the low.
_SLOT_SHIFT = 24
_FORMAT = (
    4  # 2: cards with the closing text, whitespace folded; 3: and the name as given; 4: stem marks in the passage BM25
)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a question goes: the documents it names (best first; empty when it names none) and every
    member's routing score, best first (BM25 over the cards)."""

    named: tuple[str, ...]
    scores: tuple[tuple[str, float], ...]

    @property
    def best(self) -> str | None:
        return self.scores[0][0] if self.scores else None


class CollectionIndex:
    """Returns routes and pooled rankings over one collection's members (see the module docstring)."""

    def __init__(self, folder: Path, embedder: Embedder, *, sealer: Sealer | None = None) -> None:
        self.folder = Path(folder)
        self.embedder = embedder
        self.sealer = sealer  # seals what `save` writes and opens what `load` reads (None: no store key)
        self.ids: list[str] = []  # member ids, in card order
        self.names: list[str] = []
        self.cards: list[str] = []
        self.slots: list[int] = []
        self.counts: list[int] = []  # passages per member in the pooled index
        self.card_vectors: np.ndarray | None = None
        self._card_bm25: Any = None
        self._pooled: Any = None  # faiss index with ids
        self._trained_at = 0
        self._bm25: Any = None  # bm25s over every member's passages, for `_bm25_ids`
        self._bm25_ids: np.ndarray | None = None
        self._bm25_state = ""

    # -- persistence ---------------------------------------------------------------------
    @classmethod
    def load(cls, folder: Path, embedder: Embedder, *, sealer: Sealer | None = None) -> CollectionIndex:
        """Returns the index stored in `folder`, or an empty one when there is none or it is unreadable
        (then `sync` builds it again from the members' own indexes). StoreKeyError when it is sealed and the
        key is missing or another: that is never taken for damage."""
        import io

        import numpy as np

        self = cls(folder, embedder, sealer=sealer)
        try:
            meta = json.loads(self._read(folder / "state.json"))
            if meta.get("format") != _FORMAT:
                raise ValueError(f"format {meta.get('format')}")
            blobs = {}
            for name, digest in meta["files"].items():
                blob = (folder / name).read_bytes()
                if sha256_hex(blob) != digest:  # of the bytes on disk, sealed or plain
                    raise ValueError(f"checksum mismatch in {name}")
                blobs[name] = open_blob(blob, self._where(name), sealer)
            cards = json.loads(blobs["cards.json"])
            self.ids = [c["id"] for c in cards]
            self.names = [c["name"] for c in cards]
            self.cards = [c["text"] for c in cards]
            self.slots = [int(c["slot"]) for c in cards]
            self.counts = [int(c["passages"]) for c in cards]
            self.card_vectors = np.load(io.BytesIO(blobs["cards.npy"]), allow_pickle=False)
            import faiss

            raw = np.frombuffer(blobs["passages.faiss"], dtype=np.uint8)
            self._pooled = faiss.deserialize_index(raw)
            self._trained_at = int(meta.get("trained_at", 0))
            self._bm25_state = str(meta.get("bm25_state", ""))
            if self._bm25_state and (folder / "bm25").is_dir():
                bm25s = load_bm25s()
                self._bm25 = bm25s.BM25.load(str(folder / "bm25"), allow_pickle=False, show_progress=False)
                with open(folder / "bm25_ids.npy", "rb") as handle:
                    self._bm25_ids = np.load(handle, allow_pickle=False)
        except FileNotFoundError:
            return cls(folder, embedder, sealer=sealer)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as exc:
            logger.warning("collection index %s is unreadable (%s); building it again", folder, exc)
            return cls(folder, embedder, sealer=sealer)
        self._index_cards()
        return self

    def save(self) -> None:
        """Writes the index to its folder: every file to a temp folder first, then renamed into place."""
        import io

        import faiss
        import numpy as np

        make_private_dir(self.folder.parent)
        tmp = Path(tempfile.mkdtemp(dir=self.folder.parent, prefix=f".{self.folder.name}.", suffix=".tmp"))
        try:
            cards = [
                {"id": i, "name": n, "text": t, "slot": s, "passages": c}
                for i, n, t, s, c in zip(self.ids, self.names, self.cards, self.slots, self.counts)
            ]
            matrix = io.BytesIO()
            np.save(matrix, self._card_matrix(), allow_pickle=False)
            written = {
                "cards.json": json.dumps(cards).encode(),
                "cards.npy": matrix.getvalue(),
                "passages.faiss": faiss.serialize_index(self._pooled_index()).tobytes(),
            }
            for name, data in written.items():
                (tmp / name).write_bytes(seal_blob(data, self._where(name), self.sealer))
            files = list(written)
            # bm25s writes its own files, in plain text: under a store key they are not kept (rebuilt on load).
            if self._bm25 is not None and self._bm25_ids is not None and self.sealer is None:
                self._bm25.save(str(tmp / "bm25"), allow_pickle=False, show_progress=False)
                with open(tmp / "bm25_ids.npy", "wb") as handle:
                    np.save(handle, self._bm25_ids, allow_pickle=False)
                files.append("bm25_ids.npy")
            state = {
                "format": _FORMAT,
                "trained_at": self._trained_at,
                "bm25_state": self._bm25_state if self._bm25 is not None and "bm25_ids.npy" in files else "",
                "files": {name: sha256_hex((tmp / name).read_bytes()) for name in files},
                "saved": time.time(),
            }
            body = json.dumps(state, indent=1).encode()
            (tmp / "state.json").write_bytes(seal_blob(body, self._where("state.json"), self.sealer))
            _make_private(tmp)
            old = self.folder.with_name(f".{self.folder.name}.old-{tmp.name[-12:]}")
            try:
                self.folder.rename(old)
            except FileNotFoundError:
                pass
            try:
                tmp.rename(self.folder)
            except OSError:
                if not (self.folder / "state.json").is_file():
                    raise
                # Another writer (a thread or process syncing the same members) published first: its index
                # is as good as this one, and a reader may hold it already.
                shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(
                f"cannot write the collection index to {self.folder}: {exc}", path=str(self.folder)
            ) from exc

    def _where(self, name: str) -> str:
        """Returns the place a sealed file of this index is bound to: its collection, index and file name."""
        return f"collections/{self.folder.parent.name}/{self.folder.name}/{name}"

    def _read(self, path: Path) -> bytes:
        return open_blob(path.read_bytes(), self._where(path.name), self.sealer)

    # -- keeping up with the members -------------------------------------------------------
    def sync(self, members: Sequence[Member], load: Callable[[str], tuple[str, np.ndarray] | None]) -> bool:
        """Brings the index up to `members`: cards and vectors of new members are added (`load` gives a
        member's text and passage vectors, read from its own index), those of former members removed.
        Returns True when anything changed (the caller saves). A member that is not stored is left out
        and logged."""
        import numpy as np

        wanted = {m.id: m for m in members}
        gone = [n for n, doc_id in enumerate(self.ids) if doc_id not in wanted]
        changed = False
        if gone:
            self._remove_rows(gone)
            changed = True
        present = set(self.ids)
        new_cards: list[str] = []
        for member in members:
            if member.id in present:
                continue
            loaded = load(member.id)
            if loaded is None:
                logger.warning("collection index: document %s is not in the store; left out", member.id[:12])
                continue
            text, vectors = loaded
            self._add_passages(member.slot, vectors)
            self.ids.append(member.id)
            self.names.append(member.name)
            self.cards.append(card_text(member.name, text))
            self.slots.append(member.slot)
            self.counts.append(int(vectors.shape[0]))
            new_cards.append(self.cards[-1])
            changed = True
        if new_cards:
            fresh = self.embedder.embed(new_cards).astype(np.float32)
            old = self._card_matrix()
            self.card_vectors = np.vstack([old[: len(self.ids) - len(new_cards)], fresh])
        if changed:
            self._index_cards()
        return changed

    def _card_matrix(self) -> np.ndarray:
        import numpy as np

        if self.card_vectors is None:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return self.card_vectors

    def _remove_rows(self, rows: list[int]) -> None:
        import numpy as np

        drop = set(rows)
        slots = [self.slots[n] for n in rows]
        if self._pooled is not None:
            ids = np.concatenate(
                [(np.int64(s) << _SLOT_SHIFT) + np.arange(self.counts[n], dtype=np.int64) for s, n in zip(slots, rows)]
            )
            self._pooled.remove_ids(ids)
        keep = [n for n in range(len(self.ids)) if n not in drop]
        self.ids = [self.ids[n] for n in keep]
        self.names = [self.names[n] for n in keep]
        self.cards = [self.cards[n] for n in keep]
        self.slots = [self.slots[n] for n in keep]
        self.counts = [self.counts[n] for n in keep]
        if self.card_vectors is not None:
            self.card_vectors = self.card_vectors[keep]

    def _pooled_index(self) -> Any:
        import faiss

        if self._pooled is None:
            self._pooled = faiss.IndexIDMap2(faiss.IndexFlatIP(self.embedder.dim))
        return self._pooled

    def _add_passages(self, slot: int, vectors: np.ndarray) -> None:
        import faiss
        import numpy as np

        pooled = self._pooled_index()
        ids = (np.int64(slot) << _SLOT_SHIFT) + np.arange(len(vectors), dtype=np.int64)
        pooled.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
        total = int(pooled.ntotal)
        flat = not isinstance(pooled, faiss.IndexIVF)
        if (flat and total >= POOLED_FLAT_BELOW) or (not flat and total >= RETRAIN_GROWTH * max(self._trained_at, 1)):
            self._pooled = _retrain(pooled, self.embedder.dim)
            self._trained_at = total

    @property
    def pooled_type(self) -> str:
        import faiss

        return "ivf" if isinstance(self._pooled, faiss.IndexIVF) else "flat"

    @property
    def size(self) -> int:
        """Returns how many passage vectors the pooled index holds."""
        return 0 if self._pooled is None else int(self._pooled.ntotal)

    def _index_cards(self) -> None:
        bm25s = load_bm25s()
        self._card_bm25 = None
        if self.cards:
            bm25 = bm25s.BM25()
            bm25.index([tokenize(c) or ["\x00"] for c in self.cards], show_progress=False)
            self._card_bm25 = bm25
        self._card_df: dict[str, int] = {}
        for card in self.cards:
            for term in set(tokenize(card)):
                self._card_df[term] = self._card_df.get(term, 0) + 1

    def rare(self, term: str) -> bool:
        """Returns whether `term` is on at most 2% of the cards (at least one): a name, not a common word."""
        return 0 < self._card_df.get(term, 0) <= max(1, len(self.cards) // 50)

    # -- routing ---------------------------------------------------------------------------
    def route(self, question: str, query: np.ndarray | None = None) -> Route:
        """Returns the documents `question` names (see the module docstring) and every card's score: BM25 over
        the cards (scaled to the best) plus `DENSE_WEIGHT` times the cosine of the question and the card.
        `query` is the question's embedding when the caller has it."""
        import numpy as np

        if not self.ids or self._card_bm25 is None:
            return Route((), ())
        terms = tokenize(question)
        lexical = np.asarray(self._card_bm25.get_scores(terms), dtype=np.float64) if terms else np.zeros(len(self.ids))
        if query is None:
            query = self.embedder.embed([question])[0]
        dense = self._card_matrix() @ np.asarray(query, dtype=np.float32)
        fused = lexical / max(float(lexical.max()), 1e-9) + DENSE_WEIGHT * dense
        order = np.argsort(-fused, kind="stable")
        ranked = tuple((self.ids[n], float(fused[n])) for n in order)
        named: tuple[str, ...] = ()
        asked = question.casefold()
        by_name = [n for n in order if len(self.names[n]) >= 5 and self.names[n].casefold() in asked]
        if by_name:
            # The question gives a member's name as it goes in the collection ("heron_license.pdf").
            named = tuple(self.ids[n] for n in by_name[:MAX_NAMED])
        elif float(lexical.max()) >= ROUTE_MIN_WEIGHT * self._unique_idf():
            # The best card and those within the margin of it (a contract and its amendments share their
            # names: the cosine to the card tells them apart, and the close ones are searched together).
            best = float(fused[order[0]])
            named = tuple(self.ids[n] for n in order[:MAX_NAMED] if float(fused[n]) >= best - FAMILY_MARGIN)
        return Route(named, ranked)

    def _unique_idf(self) -> float:
        """Returns the BM25 weight of a word on one card only (bm25s's Lucene IDF at document frequency 1)."""
        import math

        return math.log(1 + (len(self.ids) - 0.5) / 1.5)

    def card_of(self, doc_id: str) -> str:
        return self.cards[self.ids.index(doc_id)]

    # -- pooled ranking ------------------------------------------------------------------------
    def pooled(self, question: str, query: np.ndarray, depth: int = POOL_DEPTH) -> list[tuple[str, int, float]]:
        """Returns (document id, passage index, fused score) of the passages that best match `question`
        across every member, best first: the pooled dense and BM25 rankings fused by reciprocal rank."""
        import numpy as np

        fused: dict[int, float] = {}
        if self.size:
            pooled = self._pooled_index()
            k = min(depth, self.size)
            _, found = pooled.search(np.asarray(query, dtype=np.float32).reshape(1, -1), k)
            for rank, pid in enumerate(found[0].tolist()):
                if pid >= 0:
                    fused[pid] = 1.0 / (_RRF_K + rank + 1)
        lexical = self._passage_bm25()
        terms = bm25_terms(question)
        if lexical is not None and terms and self._bm25_ids is not None:
            scores = lexical.get_scores(terms)
            take = min(depth, len(scores))
            top: Any = np.argpartition(-scores, take - 1)[:take] if take else []
            for rank, row in enumerate(sorted(top, key=lambda r: -scores[r])):
                if scores[row] <= 0:
                    break
                pid = int(self._bm25_ids[row])
                fused[pid] = fused.get(pid, 0.0) + 1.0 / (_RRF_K + rank + 1)
        by_slot = dict(zip(self.slots, self.ids))
        mask = (1 << _SLOT_SHIFT) - 1
        out = [
            (by_slot[pid >> _SLOT_SHIFT], pid & mask, score)
            for pid, score in fused.items()
            if pid >> _SLOT_SHIFT in by_slot
        ]
        out.sort(key=lambda item: -item[2])
        return out

    def _passage_bm25(self) -> Any:
        """Returns the pooled BM25 index while it serves the members: it holds every member (a slot is never
        reused, so a member's slot names it) and at most `BM25_MAX_REMOVED` of its rows are of former members
        (their passages are passed over when ranking). None when it must be built again."""
        import numpy as np

        if self._bm25 is None or self._bm25_ids is None:
            return None
        slots = self._bm25_ids >> _SLOT_SHIFT
        current = np.asarray(self.slots, dtype=np.int64)
        if not np.isin(current, slots).all():
            return None  # a member added since: bm25s cannot add to an index
        removed = float(np.mean(~np.isin(slots, current))) if len(slots) else 0.0
        return self._bm25 if removed <= BM25_MAX_REMOVED else None

    def build_bm25(self, texts: Callable[[str], list[str] | None]) -> bool:
        """Builds the pooled BM25 index from every member's passage texts (`texts`) when it no longer serves the
        members (one was added since, or too many removed: `_passage_bm25`); returns True when it was built
        (the caller saves)."""
        import numpy as np

        bm25s = load_bm25s()
        if self._passage_bm25() is not None or not self.ids:
            return False
        corpus: list[list[str]] = []
        ids: list[int] = []
        for doc_id, slot in zip(self.ids, self.slots):
            passages = texts(doc_id)
            if passages is None:
                continue
            for n, text in enumerate(passages):
                corpus.append(bm25_terms(text) or ["\x00"])
                ids.append((slot << _SLOT_SHIFT) + n)
        if not corpus:
            return False  # no member's text is stored: nothing to index (the dense side says which is gone)
        bm25 = bm25s.BM25()
        bm25.index(corpus, show_progress=False)
        self._bm25 = bm25
        self._bm25_ids = np.asarray(ids, dtype=np.int64)
        self._bm25_state = "slots"
        return True


def _make_private(folder: Path) -> None:
    """Sets every folder under `folder` (itself included) to 0700 and every file to 0600, whatever the umask
    and whatever bm25s and numpy chose: the index holds contract text."""
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, DIR_MODE if path.is_dir() else FILE_MODE)


def _retrain(pooled: Any, dim: int) -> Any:
    """Returns an IVF index (trained on a sample) holding every vector and id of `pooled`."""
    import faiss
    import numpy as np

    total = int(pooled.ntotal)
    if isinstance(pooled, faiss.IndexIDMap2):
        inner: Any = faiss.downcast_index(pooled.index)
        vectors = np.asarray(inner.reconstruct_n(0, total), dtype=np.float32)
        ids = faiss.vector_to_array(pooled.id_map).astype(np.int64)
    else:
        invlists = pooled.invlists
        chunks, id_chunks = [], []
        for lst in range(pooled.nlist):
            size = invlists.list_size(lst)
            if not size:
                continue
            codes = faiss.rev_swig_ptr(invlists.get_codes(lst), size * dim * 4)
            chunks.append(np.frombuffer(bytes(codes), dtype=np.float32).reshape(size, dim))
            id_chunks.append(faiss.rev_swig_ptr(invlists.get_ids(lst), size).copy())
        vectors = np.vstack(chunks)
        ids = np.concatenate(id_chunks).astype(np.int64)
    lists = ivf_lists(total)
    index: Any = faiss.index_factory(dim, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 10
    index.cp.min_points_per_centroid = 1
    sample = min(total, 50 * lists)
    rows = np.sort(np.random.default_rng(0).choice(total, size=sample, replace=False))
    index.train(vectors[rows])
    index.nprobe = min(POOLED_NPROBE, lists)
    index.add_with_ids(vectors, ids)
    return index
