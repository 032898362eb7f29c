"""The parties that sign a contract, read from its signature blocks ("ACME CORP.\\nBy: ____\\nName: ...\\nTitle:
..."): the fallback of `docpipe.values.parties.read_parties` when a preamble names fewer than two parties."""

from __future__ import annotations

import itertools
import re

from docpipe.values.names import ROLE_WORDS, VERBS, is_suffix, plausible, same_entity, word_key

__all__ = ["signature_parties"]

_SIGNATURE_REACH = 2_500  # characters read after each "IN WITNESS WHEREOF"
_SIGNATURE_BLOCKS = 20  # "IN WITNESS WHEREOF" blocks read: a contract and its exhibits have a few

_WITNESS = re.compile(r"IN\s+WITNESS\s+WHERE(?:OF|FORE)|In\s+Witness\s+Where(?:of|fore)")
_BY = re.compile(r"^\s*(?:By|BY)\b\s*(?:[:._/]|$)")
_SIGNING = re.compile(
    r"^\s*(?:By|BY|Name|NAME|Title|TITLE|Date|DATE|Its|ITS|Attest|ATTEST|Witness|WITNESS|/s/|Signature|SIGNATURE"
    r"|Print|PRINT|Address|ADDRESS|Source|SOURCE)\b"
)
_STRUCTURE = re.compile(r"^\s*(?:EXHIBIT|Exhibit|SCHEDULE|Schedule|ANNEX|Annex|APPENDIX|Appendix|\[SIGNATURE)")
_ROLE_LABEL = re.compile(r"^\s*[A-Za-z][A-Za-z\-]+(?:\s+[A-Za-z][A-Za-z\-]+){0,2}\s*:\s*")


# A heading that names a document, not a party: "ADDENDUM TO GOOSEHEAD INSURANCE AGENCY, LLC ...".
_DOCUMENT_WORD = re.compile(r"(?i:addendum|amendment|exhibit|schedule|annex|appendix|rider)\b")
# Who signs beside the parties: "FRANCHISEE MEMBER", "GUARANTOR".
_SIGNING_ROLES = {
    "member",
    "members",
    "guarantor",
    "guarantors",
    "owner",
    "owners",
    "principal",
    "principals",
    "witness",
}


def _entities(line: str) -> list[str]:
    """The entity names on a line of a signature block, each ending in a corporate suffix ("ACME CORP."), or
    the whole line when it holds one name in capitals; two names when two columns share the line."""
    line = _ROLE_LABEL.sub("", line.strip(), count=1) if ":" in line[:30] else line.strip()
    line = re.split(r",?\s+(?:a|an)\s+[A-Z][a-z]+\s", line)[0].strip(" ,")
    words = line.split()
    if not 1 <= len(words) <= 14 or VERBS.search(line) or not re.search(r"[A-Za-z]{2}", line):
        return []
    names: list[str] = []
    current: list[str] = []
    for k, w in enumerate(words):
        current.append(w)
        following = words[k + 1] if k + 1 < len(words) else ""
        if is_suffix(w) and not is_suffix(following) and following != "&":
            names.append(" ".join(current).strip(" ,"))
            current = []
    rest = " ".join(current).strip(" ,")
    if rest and not names and rest.isupper() and len(current) >= 2:
        names.append(rest)
    # "a Delaware corporation, CURRENT ELECTRONICS, INC.": the descriptor of the line before is no part of it
    names = [re.sub(r"^.*\b[a-z][\w-]*,\s+(?=[A-Z])", "", n) for n in names]
    return [
        n
        for n in names
        if plausible(n)
        and not n.startswith("(")
        and not _DOCUMENT_WORD.match(n)
        and not all(word_key(w) in ROLE_WORDS | _SIGNING_ROLES for w in n.split())
    ]


def signature_parties(text: str) -> list[str]:
    """The entities that sign, read from the blocks after "IN WITNESS WHEREOF": the name above each "By:" line,
    or a line of names ending in corporate suffixes, in order, each once. People signing for themselves are
    not read."""
    found: list[str] = []
    witnesses = list(itertools.islice(_WITNESS.finditer(text), _SIGNATURE_BLOCKS + 1))
    for k, witness in enumerate(witnesses[:_SIGNATURE_BLOCKS]):
        # Each block is read once: up to the next "IN WITNESS WHEREOF" or _SIGNATURE_REACH characters.
        stop = min(witness.end() + _SIGNATURE_REACH, witnesses[k + 1].start() if k + 1 < len(witnesses) else len(text))
        lines = [ln for ln in text[witness.end() : stop].splitlines()[1:] if ln.strip()]
        for k, line in enumerate(lines):
            if _STRUCTURE.match(line):
                break
            if _SIGNING.match(line):
                continue
            signs = any(_BY.match(following) for following in lines[k + 1 : k + 4])
            names = _entities(line)
            if not signs:
                names = [n for n in names if is_suffix(n.split()[-1])]
            for name in names:
                if all(not same_entity(name, f) for f in found):
                    found.append(name)
    return found
