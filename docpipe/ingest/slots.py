"""Extraction slots: how many documents are extracted at once (each in a worker process), shared by every
caller of one `DocPipe` (the REST API, the workbench, scripts), with a bounded wait and a fair share per
owner, so one user's crafted or huge uploads can never hold every slot.

>>> slots = ExtractionSlots(2, wait_s=0.01)
>>> with slots.take("a.pdf", owner="alice"):
...     with slots.take("b.pdf", owner="bob"):
...         pass
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator

from docpipe.errors import BusyError

__all__ = ["ExtractionSlots"]


class ExtractionSlots:
    """Hands out `total` slots. An owner holds at most ``total - 1`` of them (at least one):
    with two slots, a user whose uploads are slow leaves the other slot to everyone else. Callers without an
    owner share the whole pool. Waiting longer than `wait_s` raises `BusyError` (``retry_after_s`` set)."""

    def __init__(self, total: int, *, wait_s: float) -> None:
        self.total = max(1, total)
        self.share = max(1, self.total - 1)
        self.wait_s = wait_s
        self._free = self.total
        self._held: Counter[str] = Counter()
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def take(self, label: str, *, owner: str | None = None) -> Iterator[None]:
        """Holds one slot for the block; BusyError when none comes free for this owner within `wait_s`."""
        deadline = time.monotonic() + self.wait_s
        with self._changed:
            while self._free == 0 or (owner is not None and self._held[owner] >= self.share):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._busy(label, own=owner is not None and self._held[owner] >= self.share)
                self._changed.wait(left)
            self._free -= 1
            if owner is not None:
                self._held[owner] += 1
        try:
            yield
        finally:
            with self._changed:
                self._free += 1
                if owner is not None:
                    self._held[owner] -= 1
                    if not self._held[owner]:
                        del self._held[owner]
                self._changed.notify_all()

    def _busy(self, label: str, *, own: bool) -> BusyError:
        why = (
            f"your other upload{'s are' if self.share > 1 else ' is'} still being extracted (at most {self.share} "
            "at a time per user)"
            if own
            else f"{self.total} documents are being extracted already"
        )
        return BusyError(
            f"{label} waits for extraction: {why} and none finished within {self.wait_s:g} s; try again in a minute",
            path=label,
            retry_after_s=max(5, int(self.wait_s)),
        )
