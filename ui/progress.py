"""Upload progress in the workbench: what the library reports while it ingests (`DocPipe.ingest`'s stage
callback, plain strings; `Collection.add`'s `AddProgress` steps) shown as Gradio's progress bar over the upload
result, with the file and its stage as the bar's text; and the Data room's adds in flight (`AddsInFlight`),
which a Run pressed meanwhile waits for.

Explicit ``gr.Progress`` calls, not ``track_tqdm``: Gradio keeps one `gr.Progress` per handler (the parameter's
default value) and tqdm tracking appends to its shared list, so concurrent uploads (several ingest events run
at once) would mix their bars; an explicit call reports for its own event only (Gradio finds the event from the
calling thread's context). Stages this module does not know, and any number of extra calls (per embedding
batch, say), are shown as they come; the bar never moves backwards, and reporting never fails an upload.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["NEW_ADD_JS", "STAGE_START", "AddsInFlight", "UploadProgress", "stage_fraction"]

logger = logging.getLogger(__name__)

# Where a stage starts within one file (0..1), by the first word of the library's stage text. Embedding, the
# slowest stage, spans the rest; a count in its text ("64/300", "64 of 300") moves the bar along it.
STAGE_START = {"reading": 0.0, "extracting": 0.05, "splitting": 0.45, "embedding": 0.55}
_EMBED_END = 0.98
_COUNT = re.compile(r"(\d+)\s*(?:/|of)\s*(\d+)")
_MAX_TEXT = 160


def stage_fraction(text: str, *, at_least: float = 0.0) -> float:
    """Returns how far (0..1) one file's ingestion is at the stage `text` reports, never below `at_least`
    (an unknown stage, or a repeated one, keeps the bar where it was).

    >>> stage_fraction("extracting with pypdfium2"), stage_fraction("embedding 120 passages")
    (0.05, 0.55)
    >>> stage_fraction("embedding passages 60/120"), stage_fraction("ocr page 3", at_least=0.2)
    (0.765, 0.2)
    """
    words = text.split()
    start = STAGE_START.get(words[0].lower() if words else "")
    if start is None:
        return at_least
    fraction = start
    count = _COUNT.search(text)
    if start == STAGE_START["embedding"] and count is not None and int(count.group(2)) > 0:
        done = min(int(count.group(1)), int(count.group(2))) / int(count.group(2))
        fraction = start + (_EMBED_END - start) * done
    return max(at_least, round(fraction, 4))


def batches(stage: Callable[[str], None]) -> Callable[[int, int], None]:
    """Returns `DocPipe.ingest`'s ``embed_progress`` callback that moves `stage`'s bar batch by batch through
    embedding, the slowest stage (it otherwise reports only its start)."""
    return lambda done, total: stage(f"embedding passages {done}/{total} batches")


def _short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


class UploadProgress:
    """Reports one upload event's progress to Gradio: `file` for each file of a plain upload (it returns the
    stage callback to pass to `DocPipe.ingest`); `begin`, then `collection_step` for `Collection.add`'s steps.

    `progress` is the handler's ``gr.Progress()``; called outside a Gradio event it does nothing, so the
    handlers run the same when a test calls them directly. `names` are display names (`clean_upload_name`).

    >>> steps = UploadProgress(lambda fraction, desc: print(f"{fraction:.4f} {desc}"), total=4)
    >>> stage = steps.file(1, "b.pdf"); stage("embedding 10 passages")
    0.2500 b.pdf (file 2 of 4): reading the upload
    0.3875 b.pdf (file 2 of 4): embedding 10 passages
    """

    def __init__(self, progress: Callable[..., Any], *, total: int) -> None:
        self.progress = progress
        self.total = max(1, total)
        self.files_done = 0

    def _report(self, fraction: float, desc: str) -> None:
        # A progress bar that cannot be drawn must not cost the user the upload.
        try:
            self.progress(min(1.0, max(0.0, fraction)), desc=_short(desc))
        except Exception:  # noqa: BLE001
            logger.debug("reporting upload progress failed", exc_info=True)

    def begin(self, desc: str) -> None:
        """Reports the start of work that says nothing until its first step (a collection's first file)."""
        self._report(0.0, desc)

    def file(self, number: int, name: str) -> Callable[[str], None]:
        """Reports that file `number` (from 0) starts, and returns the stage callback for its ingestion."""
        where = f"{name} (file {number + 1} of {self.total})" if self.total > 1 else name
        reached = 0.0

        def stage(text: str) -> None:
            nonlocal reached
            reached = stage_fraction(str(text), at_least=reached)
            self._report((number + reached) / self.total, f"{where}: {text}")

        stage("reading the upload")
        return stage

    def collection_step(self, step: Any) -> None:
        """Reports one `AddProgress` of `Collection.add`: a file finished, or a batch of passages embedded."""
        kind, done, total = getattr(step, "kind", ""), int(getattr(step, "done", 0)), int(getattr(step, "total", 0))
        if kind == "file" and done == 0:  # the add's total, before any file ends: the opening text stays
            self.total = max(1, total)
            return
        if kind == "file":
            self.files_done, self.total = done, max(1, total)
            outcome = "failed" if getattr(step, "error", "") else "done"
            desc = f"{done} of {total} files: {getattr(step, 'name', '')} {outcome}"
        elif kind == "embed":
            desc = f"{self.files_done} of {self.total} files; embedding passages and sentences: {done} of {total}"
        else:
            desc = f"{self.files_done} of {self.total} files; {kind}"
        self._report(self.files_done / self.total, desc)


# The page's token for an add, set in the browser the moment Add is pressed (before the add reaches the
# server's queue), so a Run pressed next can name the add it must wait for.
NEW_ADD_JS = "() => Date.now().toString(36) + '-' + Math.random().toString(36).slice(2)"


class _Add:
    __slots__ = ("collection", "done")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.collection: str | None = None


class AddsInFlight:
    """The Data room's adds to a collection, by the key of the page's token for each (`NEW_ADD_JS`): `wait`
    returns once the add `finished`, with the collection it added to. Either side may come first: a Run
    pressed while the add still waits in Gradio's queue waits for it to start and finish. Finished adds are
    remembered (the newest `keep`), so a token the page still holds never waits.

    >>> adds = AddsInFlight(); adds.finished("s:t1", "deal-x"); adds.wait("s:t1", timeout=0)
    (True, 'deal-x')
    >>> adds.wait("s:t2", timeout=0)
    (False, None)
    """

    def __init__(self, *, keep: int = 4096) -> None:
        self.keep = keep
        self._adds: OrderedDict[str, _Add] = OrderedDict()
        self._lock = threading.Lock()

    def _entry(self, key: str) -> _Add:
        with self._lock:
            entry = self._adds.get(key)
            if entry is None:
                entry = self._adds[key] = _Add()
                while len(self._adds) > self.keep:
                    oldest = next(iter(self._adds))
                    if not self._adds[oldest].done.is_set() and oldest != key:
                        self._adds.move_to_end(oldest)  # someone waits on it: keep it
                        break
                    del self._adds[oldest]
            return entry

    def finished(self, key: str, collection: str | None) -> None:
        """Records that the add `key` is over (whether or not it added anything), and where it added to."""
        entry = self._entry(key)
        entry.collection = collection
        entry.done.set()

    def done(self, key: str) -> bool:
        """Returns True when the add `key` has finished."""
        return self._entry(key).done.is_set()

    def wait(self, key: str, *, timeout: float) -> tuple[bool, str | None]:
        """Returns (finished, its collection) once the add `key` finished, or (False, None) after `timeout`
        seconds."""
        entry = self._entry(key)
        if not entry.done.wait(timeout):
            return False, None
        return True, entry.collection
