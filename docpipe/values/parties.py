"""The parties of a contract: each party's legal name and the name the contract defines for it.

`read_parties` reads the preamble ("This Agreement is made ... by and between Acme Corp., a Delaware corporation
("Acme"), and Beta LLC ("Beta")"), and falls back on the signature blocks when the preamble names fewer than two
parties (`signature_parties`, from `docpipe.values.signatures`). The words a name is made of are in
`docpipe.values.names`.

A name keeps its corporate suffix ("Inc.", "Co., Ltd.", "GmbH") and loses its descriptors ("a Delaware
corporation", "having its principal place of business at ..."). What is not a name is left out rather than
guessed: a defined term alone ("the Company"), a blank ("__________"), a phrase in lower case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docpipe.values.jurisdictions import find_jurisdictions
from docpipe.values.kinds import Value
from docpipe.values.names import (
    CONNECTORS,
    ENTITY_WORDS,
    STOP_WORDS,
    is_suffix,
    plausible,
    same_entity,
    word_key,
)
from docpipe.values.signatures import signature_parties

__all__ = ["read_parties", "signature_parties"]

_PREAMBLE_REACH = 20_000  # characters of the text searched for the preamble
_SEGMENT_REACH = 2_500  # characters of a preamble read after its "between"

# The last word of a defined term that names no party: "the "Agreement"", "the "Effective Date"".
_NOT_ROLES = {"agreement", "date", "contract", "amendment", "term", "act", "period", "order", "addendum"}
# pypdf writes some punctuation as look-alike characters (";" as the Greek question mark): read them as such.
_LOOKALIKES = str.maketrans({"\u037e": ";", "\u2010": "-", "\u2011": "-", "\u02ba": '"', "\uff1a": ":"})
_QUOTES = '"“”‘’'
_QUOTED = re.compile(
    r"(?:‘‘|’’|'')\s*([^\"“”‘’']{1,80}?)\s*(?:[\"“”]|’’|'')|[\"“”]\s*([^\"“”]{1,80}?)\s*[\"“”]"
    r"|[‘’]\s*([^‘’]{1,80}?)\s*[‘’]"
)
# A defined name whose closing quote was lost: '("Celebrity)'.
_HALF_QUOTED = re.compile(r"\(\s*(?:the\s+)?[\"“]([A-Z][^\"“”()]{0,40}?)\s*\)")
_ANCHOR = re.compile(
    r"\bby\s+and\s+(?:between|among(?:st)?)\b|\b(?:between|among(?:st)?)\b\s*:?"
    r"|\b(?:entered\s+into|made|executed|dated)\b[^.;()]{0,80}?\bby\s+(?=[A-Z0-9])|\bPREAMBLE\b"
    r"|\bparties\s+to\s+this\s+(?:agreement|contract)\s+are\s*:?|(?-i:\bParty\s+A\s*:\s*|\bPARTIES\b\s*:?)",
    re.IGNORECASE,
)
_END = re.compile(
    r"\b(?:WHEREAS|Whereas|W\s*I\s*T\s*N\s*E\s*S\s*S\s*E\s*T\s*H|Witnesseth|RECITALS?|Recitals|BACKGROUND"
    r"|NOW,?\s+THEREFORE|Now,?\s+therefore|IN\s+CONSIDERATION|In\s+consideration|DEFINITIONS)\b"
    r"|\bagrees?\s+as\s+follows|\bhereby\s+agree"
)
# Where the next party begins: "; ", " and ", "(2)", "- and -", "between:".
_SEPARATOR = re.compile(
    r";\s*(?:(?:and|AND|And)\b\s*:?\s*)?|,?\s+(?:and|AND|And)\s*:?\s+"
    r"(?=(?:\(\s*\w{1,3}\s*\)\s*|\d\.\s+|the\s+(?=[A-Z])|(?:its|their)\s+(?=[A-Z]))?(?:[A-Z]|\d+[A-Za-z]|[a-z]+[A-Z.\-]))"
    r"|\(\s*(?:\d{1,2}|[a-hA-H]|i{1,3}|iv|vi?)\s*\)\s*|(?<![\w.])\d\.\s+(?=[A-Z])"
    r"|,?\s*\bon\s+the\s+(?:one|other)\s+(?:hand|side),?\s*(?:and\b\s*)?"
    r"|-\s*and\s*-|\b(?:between|among(?:st)?)\b\s*:?\s*|\bBETWEEN\b|\bPREAMBLE\b\s*"
    r"|\b(?:Party\s+[A-Z]|[A-Z][a-z]+\s+Name)\s*:\s*"  # "Party A: Acme Co., Ltd.", "Client Name: ACME, INC."
    # "..., a company organized in Taiwan, HALCYON SYSTEMS GMBH, a German company": a list without "and".
    r"|,\s+(?=[A-Z][\w&'’\-]*(?:\s+[A-Z&][\w&'’.\-]*){1,6}?,?\s+"
    r"(?i:inc|corp|corporation|company|co|llc|ltd|limited|plc|gmbh|ag|s\.a|n\.v|b\.v|l\.p|l\.l\.c)\b)"
)
# A piece of a preamble that is only a separator: ", and ", "; and (2) ", "AND: ".
_BARE = re.compile(r"[\s,;:()\-—–]*(?:(?:and|AND|And)\b[\s:]*)?(?:\(\s*\w{1,3}\s*\)|\d\.)?[\s,;:\-—–]*")
_ABBREVIATIONS = {"inc", "corp", "co", "ltd", "no", "st", "mr", "mrs", "ms", "dr", "jr", "sr", "bros", "ave", "pty",
                  "pte", "bhd", "plc", "llc", "lp", "nv", "bv", "sa", "na", "ag", "u.s", "s.a", "n.v", "b.v", "l.p"}  # fmt: skip
_COMPLETE = re.compile(
    r"(?:\d\w*|\)|,|\b(?:corporation|company|partnership|association|trust|individual|entity|organi[sz]ation"
    r"|institution|bank|society|limited|llc|inc|ltd|l\.?l\.?c|l\.?p|gmbh|ag|n\.?v|b\.?v|s\.?a|plc|corp|co|side|hand))\W*$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Party:
    name: str
    role: str
    start: int  # offsets in the flattened text
    end: int


class _Flat:
    """`text` with each run of blanks made one space, and the way back to `text`'s offsets."""

    def __init__(self, text: str) -> None:
        parts: list[str] = []
        self.offsets: list[int] = []
        for m in re.finditer(r"\S+", text):
            if parts:
                parts.append(" ")
                self.offsets.append(m.start() - 1)
            parts.append(m.group(0))
            self.offsets.extend(range(m.start(), m.end()))
        self.text = "".join(parts).translate(_LOOKALIKES)
        self.offsets.append(len(text))

    def original(self, start: int, end: int) -> tuple[int, int]:
        return self.offsets[start], self.offsets[end - 1] + 1 if end > start else self.offsets[start]


def _short_insert(chunk: str, at: int) -> int | None:
    """The end of a parenthesis inside a name ("Fonterra (USA) Inc.", "Datec (PNG) Limited"), or None."""
    close = chunk.find(")", at)
    if close < 0 or close - at > 30:
        return None
    inside = chunk[at + 1 : close].split()
    if not inside or len(inside) > 3 or any(not w[:1].isupper() for w in inside):
        return None
    rest = chunk[close + 1 :].lstrip()
    return close + 1 if (rest[:1].isupper() or rest[:1] == "(") and not rest.startswith(("A ", "AN ")) else None


def _brand(token: str) -> bool:
    """A name written in lower case on purpose: "i-on", "drkoop.com", "eBay"."""
    core = token.strip(",;:")
    inner = core[1:].rstrip(".")
    return bool(re.fullmatch(r"[a-z][\w.\-&]*", core)) and bool(re.search(r"[A-Z.0-9]", inner) or core[1:2] == "-")


def _capital_name_goes_on(tokens: list[re.Match[str]], i: int) -> bool:
    """Whether the capitalised short word at `i` is inside a name written in capitals that goes on to its
    corporate ending ("YOU ON DEMAND HOLDINGS, INC."), not the descriptor after it."""
    token, before = tokens[i].group(0), tokens[i - 1].group(0)
    if not (token.isupper() and before.isupper()) or before.endswith(",") or is_suffix(before):
        return False
    return any(is_suffix(t.group(0)) or word_key(t.group(0)) in ENTITY_WORDS for t in tokens[i + 1 : i + 4])


def _lower_inside(tokens: list[re.Match[str]], i: int) -> bool:
    """Whether the lower-case word at `i` is inside a name that goes on in capitals to its corporate suffix
    ("Petro data Management Services Limited")."""
    if i == 0 or not tokens[i].group(0).isalpha():
        return False
    for t in tokens[i + 1 : i + 5]:
        token = t.group(0)
        if not token[:1].isupper():
            return False
        if is_suffix(token):
            return True
    return False


def _name_at(chunk: str) -> tuple[int, int] | None:
    """Where the name that opens `chunk` ends: (start, end) in `chunk`, descriptors left out."""
    quoted = chunk[:1] in '"“'
    if quoted:  # between “Elephant Talk Communication Holding AG”, a company ...
        inside = re.match(r".([^\"“”]{2,80})[\"”]", chunk)
        if inside is None:
            return None
        return 1, 1 + len(inside.group(1).rstrip(" ,"))
    tokens = list(re.finditer(r"\S+", chunk))
    end = -1
    taken = 0  # words of the name so far
    skip_to = -1  # past a parenthesis kept inside the name
    for i, m in enumerate(tokens):
        if m.start() < skip_to:
            continue
        token = m.group(0)
        word = word_key(token)
        first = taken == 0
        if token[0] in _QUOTES or (taken >= 14):
            break
        if token.startswith("("):
            close = _short_insert(chunk, m.start())
            if close is None or first:
                break
            end, skip_to = close, close
            continue
        after_comma = i > 0 and tokens[i - 1].group(0).endswith(",")
        if after_comma and not is_suffix(token):
            break
        if after_comma and token in ("Co", "CO") and not (i + 1 < len(tokens) and is_suffix(tokens[i + 1].group(0))):
            break  # "Stanley, Co Durham", "Boulder, CO": an address
        if word in STOP_WORDS and not first and not is_suffix(token) and not _capital_name_goes_on(tokens, i):
            break
        numbered = i + 1 < len(tokens) and is_suffix(tokens[i + 1].group(0))  # "EWSD 1, LLC"
        if token[0].isdigit() and not first and not re.match(r"\d+[A-Za-z]", token) and not numbered:
            break
        if taken >= 2 and is_suffix(tokens[i - 1].group(0)) and not is_suffix(token) and token != "&":
            # A name ends with its suffix ("NLS-1 Pharma AG Alter Postplatz" is a name and an address), but
            # "Insurance Company of North America" goes on.
            if not (word == "of" and word_key(tokens[i - 1].group(0)) in {"company", "corporation", "bank", "trust"}):
                break
        if token[0].islower() and not (
            is_suffix(token) or _brand(token) or (word in CONNECTORS and not first) or _lower_inside(tokens, i)
        ):
            break
        if first and not (token[0].isupper() or re.match(r"\d+\w*[A-Za-z]", token) or _brand(token)):
            return None
        if token.endswith(":") and not first:
            break
        taken += 1
        if word not in CONNECTORS:
            end = m.start() + len(token.rstrip(",;:"))
        if token.endswith((",", ";", ":")) and not any(is_suffix(t.group(0)) for t in tokens[i + 1 : i + 2]):
            break
    if end < 0:
        return None
    start = tokens[0].start() if tokens else 0
    while chunk[start:end].endswith(".."):
        end -= 1
    name = chunk[start:end]
    if name.endswith(".") and not is_suffix(name.split()[-1]) and not re.search(r"\b\w\.\w\.?$", name):
        end -= 1
    return start, end


def _term_role(term: str) -> str | None:
    """`term` as a party's defined name; "" for the parties as a whole ("Party", "Parties"); None for a term that
    names no party ("Agreement", "Effective Date", "order")."""
    term = term.strip(" ,.;:")
    words = term.casefold().split()
    if not words:
        return None
    if words[-1] in ("party", "parties"):
        return ""
    if words[-1] in _NOT_ROLES or (re.fullmatch(r"[a-z ]+", term) and term not in ("you", "we", "us")):
        return None
    return term


def _role(parenthesis: str) -> str | None:
    """The defined name in a parenthesis ("(the "Licensee")" -> "Licensee"); "" when it defines the parties as a
    whole ("(each a "Party")"); None when it defines nothing."""
    for m in _QUOTED.finditer(parenthesis):
        term = m.group(1) or m.group(2) or m.group(3) or ""
        if term.strip(" ,.;:"):
            return _term_role(term)
    half = _HALF_QUOTED.fullmatch(parenthesis)
    return _term_role(half.group(1)) if half else None


# A defined name outside parentheses: 'hereinafter referred to as "Company"', "— hereinafter referred to as
# Cremer —", or glued to the name ('drkoop.com, inc."drkoop.com"').
_BARE_ROLE = re.compile(
    r",?\s*(?:hereinafter\s+(?:(?:referred\s+to|called|known)\s+as:?\s+)?|referred\s+to\s+as:?\s+)(?:the\s+)?"
    r"(?:[\"“‘]([^\"“”’]{1,60})[\"”’]|(?-i:([A-Z][\w\-]*(?:\s+[A-Z][\w\-]*){0,2}))(?=\s*[—–,;)]))"
    r"|(?<=[a-z.])[\"“]([A-Za-z][\w.\- ]{0,30})[\"”]",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Marker:
    start: int
    end: int
    role: str  # "" for "(each a "Party")", the end of the list of parties


def _markers(segment: str) -> list[_Marker]:
    """The defined names in `segment`: parentheses with a quoted term, "hereinafter referred to as "X"", and a
    quoted term glued to a name ("drkoop.com, inc."drkoop.com"")."""
    found: list[_Marker] = []
    depth, open_at = 0, -1
    for i, c in enumerate(segment):
        if c == "(":
            if depth == 0:
                open_at = i
            depth += 1
        elif c == ")" and depth:
            depth -= 1
            if depth == 0:
                role = _role(segment[open_at : i + 1])
                if role is not None:
                    found.append(_Marker(open_at, i + 1, role))
    spans = [(m.start, m.end) for m in found]
    for m in _BARE_ROLE.finditer(segment):
        if any(a <= m.start() < b for a, b in spans):
            continue
        role = _term_role(m.group(1) or m.group(2) or m.group(3))
        if role is not None:
            found.append(_Marker(m.start(), m.end(), role))
    return sorted(found, key=lambda m: m.start)


_ROLE_SOON = re.compile(r"[^.()]{0,60}\(\s*(?:the\s+)?[\"“‘]")


def _segment_end(flat: str, start: int) -> int:
    """Where the preamble that starts at `start` ends: at "WHEREAS", "RECITALS", "agree as follows" or the end
    of its sentence."""
    limit = min(len(flat), start + _SEGMENT_REACH)
    end = _END.search(flat, start, limit)
    stop = end.start() if end else limit
    for m in re.finditer(r"([\w)\"”’]+)\.\s+(?=[A-Z]|\d{1,2}\.\s+[A-Z])(?!(?:AND|And)\b)", flat[start:stop]):
        word = m.group(1).casefold().rstrip(')"”’')
        if word in _ABBREVIATIONS or re.fullmatch(r"(?:\w\.)*\w", m.group(1)) or len(word) <= 1:
            continue
        if _ROLE_SOON.match(flat, start + m.end()):
            continue  # "... Port Vila. Vanuatu ("the Manufacturer")": an address, not the end of the sentence
        return start + m.end() - 1
    return stop


def _complete(piece: str) -> bool:
    """Whether `piece` ends a whole party (a name with its suffix, descriptor or address), so an "and" after it
    starts the next party rather than continuing a name ("Savings and Loan Association")."""
    if _COMPLETE.search(piece[-60:]) or re.search(r",\s+(?:a|an)\s", piece):
        return True
    tail = piece[-40:].rstrip(" ,.")  # "... located in Philadelphia, Pennsylvania and Jane Doe"
    places = find_jurisdictions(tail)
    return bool(places) and places[-1].end == len(tail)


def _joint(chunk: str, separator: re.Match[str]) -> bool:
    """Whether an "and" may join the words of one name ("Savings and Loan Association", "GAS AND ELECTRIC
    COMPANY") rather than two parties: a lower-case "and" or an "AND" between capitals, with no comma."""
    word = separator.group(0).strip(" :")
    if word not in ("and", "AND"):
        return False
    before = chunk[: separator.start()].split()[-1:]
    after = chunk[separator.end() :].split()[:1]
    capitals = bool(before) and bool(after) and before[0].isupper()
    if word == "and":  # "... Sandton and TELKOM SOUTH AFRICA LIMITED": a name in capitals starts a party
        return not (bool(after) and len(after[0]) > 1 and after[0].isupper() and not capitals)
    return capitals and after[0].isupper()


def _entity_like(name: str, after: str) -> bool:
    """A name that stands as a party without a defined name: a corporate suffix or a word such as "Bank" or
    "University", or a descriptor after it ("X, a ...")."""
    words = name.split()
    return any(is_suffix(w) or word_key(w) in ENTITY_WORDS for w in words) or bool(
        re.match(r"\s*,?\s+(?:a|an)\s", after)
    )


def _names_in(chunk: str) -> tuple[list[tuple[int, int]], int | None]:
    """The names in `chunk` (the words between two defined names) and which of them takes the defined name
    that follows: the name that opens the chunk ("and B, a Delaware corporation ("B")"), else the last name
    ("..., a Delaware corporation, and B ("B")"). Other names count when they read as parties by themselves."""
    found = _names_split(chunk)
    if not found:
        return [], None
    holder = 0 if found[0][3] else len(found) - 1
    if holder == 0 and not found[0][2]:  # "; and Convention Plaza, 1 Harbour Rd (2) W2E HOLDINGS PLC": an address
        holder = next((k for k, f in enumerate(found) if f[2]), 0)
    names = [(a, b) for k, (a, b, strong, _) in enumerate(found) if k == holder or strong]
    return names, names.index(found[holder][:2])


_ARTICLE = re.compile(r"the\s+(?=[A-Z])|(?:its|their)\s+[A-Z]\w+(?:\s+[A-Z]\w+)?,\s+(?=[A-Z])")


def _labelled_block(piece: str) -> bool:
    """Whether `piece` is a block of labelled lines ("Address : ... Legal representative : Viktoras R.
    Sekmakas") that no name runs through: an "and" after it starts the next party, it joins no name."""
    if " : " not in piece and not re.search(r"\w:\s", piece):
        return False
    lead = len(piece) - len(piece.lstrip(" ,:;-"))
    span = _name_at(piece[lead:])
    return span is None or lead + span[1] < len(piece.rstrip(" ,"))


def _names_split(chunk: str) -> list[tuple[int, int, bool, bool]]:
    """The names opening each piece of `chunk` cut at its separators: (start, end, reads as an entity, comes
    first in the chunk). An "and" stays inside a name unless what precedes it is a whole party."""
    cuts = [0]
    for m in _SEPARATOR.finditer(chunk):
        before = chunk[cuts[-1] : m.start()]
        if (
            _joint(chunk, m)
            and before.strip(" ,—–-")
            and not _complete(before)
            and not (m.group(0).strip(" ,:") == "and" and _labelled_block(before))
        ):
            continue
        if re.match(r"\s*(?:between|among|BETWEEN|AMONG)", m.group(0)):
            cuts = [m.end()]  # "AGREEMENT BETWEEN A AND B ... made by and between A ...": the last one counts
            continue
        cuts.append(m.end())
    found: list[tuple[int, int, bool]] = []
    first_piece = True  # the first piece with words: a name there takes the defined name that follows
    leads = False
    for k, cut in enumerate(cuts):
        piece = chunk[cut : cuts[k + 1] if k + 1 < len(cuts) else len(chunk)]
        if _BARE.fullmatch(piece):
            continue
        lead = len(piece) - len(piece.lstrip(" ,:;-"))
        # "... and the American Diabetes Association, Inc.", "... and its Reseller, Schoolpop, Inc."
        article = _ARTICLE.match(piece, lead)
        lead = article.end() if article else lead
        span = _name_at(piece[lead:])
        a, b = (cut + lead + span[0], cut + lead + span[1]) if span else (0, 0)
        if span and plausible(chunk[a:b]):
            leads = leads or first_piece
            # After "the" a name is a party only as the holder of the defined name that follows ("and the
            # American Diabetes Association, Inc. ("Association")"), not "listed on ... and the Growth Market".
            found.append((a, b, article is None and _entity_like(chunk[a:b], chunk[b:])))
        first_piece = False
    return [(a, b, strong, leads) for a, b, strong in found]


def _parties_after(flat: str, start: int) -> list[_Party]:
    end = _segment_end(flat, start)
    segment = flat[start:end]
    parties: list[_Party] = []
    at = 0
    for marker in [*_markers(segment), _Marker(len(segment), len(segment), "")]:
        chunk = segment[at : marker.start]
        names, holder = _names_in(chunk)
        for k, (a, b) in enumerate(names):
            if not marker.role and not _entity_like(chunk[a:b], chunk[b:]):
                continue  # after the last defined name, only what reads as a party by itself
            role = marker.role if k == holder else ""
            parties.append(_Party(chunk[a:b], role, start + at + a, start + at + b))
        if marker.start == len(segment):
            break
        at = marker.end  # past "(each a "Party")" too: "(collectively the "AS Parties") and MusclePharm Corporation"
    return _distinct(parties)


def _distinct(parties: list[_Party]) -> list[_Party]:
    """Each party once (the first mention with a defined name wins), without restatements such as
    "Customer and Philips" made of the defined names of parties already read."""
    kept: list[_Party] = []
    for party in parties:
        twin = next((k for k, p in enumerate(kept) if same_entity(p.name, party.name)), None)
        if twin is not None:
            if party.role and not kept[twin].role:
                kept[twin] = party
            continue
        words = {word_key(w) for w in party.name.split()} - CONNECTORS
        known = {word_key(w) for p in parties if p is not party for w in (p.role.split() + p.name.split())}
        if not party.role and words and words <= known and len(party.name.split()) > 1 and " and " in party.name:
            continue
        if not party.role and any(party.name.casefold() == p.role.casefold() for p in parties):
            continue
        kept.append(party)
    return kept


_PARTY_LABEL = re.compile(r"\bParty\s+[A-H]\s*:\s*")


def _labelled_parties(flat: str, start: int) -> list[_Party]:
    """The parties of a preamble written as labels, each with its own description after it ("Party A: Xi'an
    Zhonghong New Energy Technology Co., Ltd. Legal Representative: ... Party B: ..."): the first name after
    each label."""
    found = []
    for label in _PARTY_LABEL.finditer(flat, start, min(len(flat), start + 2 * _SEGMENT_REACH)):
        first = _parties_after(flat, label.end())[:1]
        found.extend(first)
    return _distinct(found)


def _preamble(flat: str) -> list[_Party]:
    best: list[_Party] = []
    for n, anchor in enumerate(_ANCHOR.finditer(flat, 0, min(len(flat), _PREAMBLE_REACH))):
        if n >= 8:
            break
        parties = _parties_after(flat, anchor.end())
        if len(parties) < 2 and _PARTY_LABEL.match(anchor.group(0)):
            parties = _labelled_parties(flat, anchor.start())
        if sum(bool(p.role) for p in parties) >= 2:
            return parties
        if len(parties) > len(best) or (len(parties) == len(best) and sum(bool(p.role) for p in parties) >
                                        sum(bool(p.role) for p in best)):  # fmt: skip
            best = parties
    if len(best) < 2:
        # A letter or a one-sided deed: "Acme Corp., a Georgia corporation (the "Company"), proposes ..."
        begin = _named_before_role(flat[:3000])
        if begin is not None:
            fallback = _parties_after(flat, begin)
            if len(fallback) > len(best):
                best = fallback
    return best


def _named_before_role(head: str) -> int | None:
    """Where the name before the first defined name of `head` begins, when it reads as an entity: followed by
    "a ... corporation" (the first such name), else ending in a corporate suffix (the first such name): the start
    of a preamble with no "between". A name described as "a ... corporation" wins over a letterhead's name."""
    first = next((m for m in _markers(head) if m.role), None)
    if first is None:
        return None
    window_start = max(0, first.start - 300)
    while 0 < window_start < first.start and not head[window_start - 1].isspace():
        window_start += 1  # start on a whole word
    suffixed: int | None = None
    for token in re.finditer(r"(?<!\S)\S+", head[window_start : first.start]):
        rest = head[window_start + token.start() : first.start]
        span = _name_at(rest)
        if span is None or not plausible(rest[span[0] : span[1]]):
            continue
        if re.match(r"\s*,?\s+(?:a|an)\s", rest[span[1] :]):
            return window_start + token.start()
        if suffixed is None and is_suffix(rest[span[0] : span[1]].split()[-1]):
            suffixed = window_start + token.start()
    return suffixed


def _display(parties: list[_Party] | list[dict[str, str]]) -> str:
    items = [(p.name, p.role) if isinstance(p, _Party) else (p["name"], p["role"]) for p in parties]
    return "; ".join(f'{name} ("{role}")' if role else name for name, role in items)


def read_parties(text: str, signed: str | None = None) -> Value | None:
    """The parties named in a contract's opening text (and in its signature blocks, read from `signed`, by
    default `text`, when the opening names fewer than two), or None when it names none: kind ``parties``,
    normalized ``[{"name": "I-ESCROW, INC.", "role": "i-Escrow"}, ...]`` in the order written, display
    ``I-ESCROW, INC. ("i-Escrow"); 2THEMART.COM, INC. ("2TheMart")``, `as_written` the words from the first name
    to the last named in `text`."""
    flat = _Flat(text[: _PREAMBLE_REACH * 2])
    parties = _preamble(flat.text)
    normalized = [{"name": p.name, "role": p.role} for p in parties]
    if len(parties) < 2:
        known = {p.name.casefold() for p in parties}
        for name in signature_parties(text if signed is None else signed):
            if name.casefold() not in known and all(not same_entity(name, p.name) for p in parties):
                normalized.append({"name": name, "role": ""})
                known.add(name.casefold())
    if not normalized:
        return None
    if parties:
        start, _ = flat.original(parties[0].start, parties[0].end)
        _, end = flat.original(parties[-1].start, parties[-1].end)
    else:
        start = end = -1
    written = text[start:end] if start >= 0 else ""
    return Value("parties", normalized, _display(normalized), written, start, end)
