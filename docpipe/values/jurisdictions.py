"""Places as contracts name them, and the law a governing-law clause chooses.

Canonical names (the `normalized` and `display` of a ``jurisdiction`` value):

- US states and the District of Columbia: the state's name, ``"New York"``, ``"District of Columbia"``
  ("the State of New York", "Commonwealth of Massachusetts", "New York State", "Washington, D.C.").
- Canadian provinces and territories: ``"Ontario, Canada"`` ("Province of Ontario", "Ontario, Canada").
- Australian states and territories: ``"Victoria, Australia"``.
- The parts of the United Kingdom: ``"England and Wales"``, ``"England"``, ``"Wales"``, ``"Scotland"``,
  ``"Northern Ireland"`` ("England, United Kingdom" is ``"England"``).
- Countries: pycountry's common English name, ``"China"`` ("People's Republic of China", "PRC"),
  ``"South Korea"`` ("Republic of Korea"), ``"Netherlands"``, ``"United Kingdom"``, ``"United States"``
  ("U.S.A."), ``"Hong Kong"``, ``"Taiwan"``, ``"Russia"``, ``"Turkey"``, ``"Vietnam"``; the country Georgia is
  ``"Georgia (country)"`` (plain "Georgia" is the US state).

A place name of one word ("Georgia", "Jersey", "Turkey", "China", "Chad") counts only when capitalised, since
each is also a common word or a person's name; names of several words ("state of new york", "NEW JERSEY")
are read in any case, and abbreviations ("U.S.", "USA", "UK", "PRC", "D.C.") only in capitals.
The tables are built on first use, so importing this module loads nothing of pycountry.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache

from docpipe.values.kinds import Value

__all__ = ["canonical_jurisdiction", "find_jurisdictions", "governing_law"]

US_STATES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut", "Delaware", "Florida",
    "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas", "Kentucky", "Louisiana", "Maine",
    "Maryland", "Massachusetts", "Michigan", "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska",
    "Nevada", "New Hampshire", "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio",
    "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas",
    "Utah", "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
)  # fmt: skip
CANADIAN_PROVINCES = (
    "Alberta", "British Columbia", "Manitoba", "New Brunswick", "Newfoundland and Labrador", "Nova Scotia",
    "Ontario", "Prince Edward Island", "Quebec", "Saskatchewan", "Northwest Territories", "Nunavut", "Yukon",
)  # fmt: skip
AUSTRALIAN_STATES = (
    "New South Wales", "Victoria", "Queensland", "South Australia", "Western Australia", "Tasmania",
    "Australian Capital Territory", "Northern Territory",
)  # fmt: skip
UK_PARTS = ("England and Wales", "England", "Wales", "Scotland", "Northern Ireland")

# Countries whose pycountry name is not the name contracts use.
_COUNTRY_NAMES = {
    "RU": "Russia", "TR": "Turkey", "CD": "Democratic Republic of the Congo", "VG": "British Virgin Islands",
    "VI": "U.S. Virgin Islands", "VA": "Vatican City", "FM": "Micronesia", "PS": "Palestine", "BN": "Brunei",
    "MF": "Saint Martin", "SX": "Sint Maarten", "FK": "Falkland Islands", "CC": "Cocos Islands",
    "SH": "Saint Helena", "GE": "Georgia (country)", "CZ": "Czech Republic", "MO": "Macau",
}  # fmt: skip
# More names for a canonical name: older, shorter and commoner forms.
_MORE_NAMES = {
    "China": ("PRC", "P.R.C.", "Peoples Republic of China", "Mainland China", "P.R. China", "PR China"),
    "Taiwan": ("Republic of China", "Taiwan, R.O.C.", "R.O.C."),
    "Hong Kong": ("Hong Kong SAR", "HKSAR", "Hong Kong Special Administrative Region"),
    "Macau": ("Macao", "Macau SAR"),
    "South Korea": ("Korea", "Republic of Korea"),
    "Russia": ("Russian Federation",),
    "Turkey": ("Türkiye", "Republic of Turkey"),
    "United Kingdom": ("UK", "U.K.", "Great Britain", "Britain", "United Kingdom of Great Britain and Northern Ireland"),
    "United States": ("US", "U.S.", "USA", "U.S.A.", "United States of America"),
    "Netherlands": ("Holland", "Kingdom of the Netherlands"),
    "United Arab Emirates": ("UAE", "U.A.E."),
    "Czech Republic": ("Czechia",),
    "Vietnam": ("Viet Nam",),
    "Côte d'Ivoire": ("Ivory Coast", "Cote d'Ivoire"),
    "Myanmar": ("Burma",),
    "Eswatini": ("Swaziland",),
    "North Macedonia": ("Macedonia",),
    "Cabo Verde": ("Cape Verde",),
    "Timor-Leste": ("East Timor",),
    "Vatican City": ("Holy See", "Vatican"),
    "British Virgin Islands": ("BVI", "B.V.I."),
    "Cayman Islands": ("Cayman",),
    "Georgia (country)": ("Republic of Georgia",),
    "Bahamas": ("Commonwealth of the Bahamas",),
    "Australia": ("Commonwealth of Australia",),
    "Puerto Rico": ("Commonwealth of Puerto Rico",),
    "England and Wales": ("England & Wales",),
    "District of Columbia": ("Washington, D.C.", "Washington D.C.", "Washington, DC", "Washington DC", "D.C."),
}  # fmt: skip
# Single words that are countries only when they stand alone; pycountry's "Georgia" is the US state here.
_NOT_COUNTRY_ALIASES = {"Georgia"}
# Adjectives that name a law ("Swiss law", "English law"): read only before "law".
_DEMONYMS = {
    "American": "United States", "Argentine": "Argentina", "Australian": "Australia", "Austrian": "Austria",
    "Belgian": "Belgium", "Brazilian": "Brazil", "British": "United Kingdom", "Canadian": "Canada",
    "Chilean": "Chile", "Chinese": "China", "Colombian": "Colombia", "Cypriot": "Cyprus", "Czech": "Czech Republic",
    "Danish": "Denmark", "Dutch": "Netherlands", "English": "England and Wales", "Finnish": "Finland",
    "French": "France", "German": "Germany", "Greek": "Greece", "Hungarian": "Hungary", "Indian": "India",
    "Indonesian": "Indonesia", "Irish": "Ireland", "Israeli": "Israel", "Italian": "Italy", "Japanese": "Japan",
    "Kazakh": "Kazakhstan", "Korean": "South Korea", "Luxembourg": "Luxembourg", "Malaysian": "Malaysia",
    "Mexican": "Mexico", "Norwegian": "Norway", "Peruvian": "Peru", "Philippine": "Philippines",
    "Polish": "Poland", "Portuguese": "Portugal", "Russian": "Russia", "Scottish": "Scotland", "Scots": "Scotland",
    "Singaporean": "Singapore", "Spanish": "Spain", "Swedish": "Sweden", "Swiss": "Switzerland",
    "Taiwanese": "Taiwan", "Thai": "Thailand", "Turkish": "Turkey", "Ukrainian": "Ukraine",
    "Vietnamese": "Vietnam",
}  # fmt: skip

# A word (with its inner dots, apostrophes and hyphens: "U.S.A", "People's", "Guinea-Bissau"), a comma or "&".
_TOKEN = re.compile(r"[^\W\d_]+(?:['’.\-][^\W\d_]+)*|[,&]")
_SPACE = re.compile(r"\s*")


@dataclass(frozen=True, slots=True)
class _Alias:
    canonical: str
    abbreviation: bool  # capitals only ("US", "U.S.", "PRC")
    single_word: bool  # capitalised only ("Georgia", "Jersey")


@dataclass(frozen=True, slots=True)
class _Table:
    aliases: dict[tuple[str, ...], _Alias]
    first_words: frozenset[str]
    longest: int
    parents: dict[str, str]  # canonical -> the country it belongs to


def _key(word: str) -> str:
    word = word.casefold().replace("’", "'").replace(".", "")
    if word == "&":
        return "and"
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    return word


def _words(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _is_abbreviation(name: str) -> bool:
    letters = name.replace(".", "").replace(" ", "")
    return letters.isalpha() and letters.isupper() and len(letters) <= 6


@cache
def _table() -> _Table:
    import pycountry

    names: dict[str, str] = {}  # alias -> canonical; the first entry wins

    def add(alias: str, canonical: str) -> None:
        names.setdefault(alias, canonical)

    parents: dict[str, str] = {}
    for state in US_STATES:
        for alias in (state, f"State of {state}", f"Commonwealth of {state}", f"{state} State"):
            add(alias, state)
        parents[state] = "United States"
    parents["District of Columbia"] = "United States"
    add("District of Columbia", "District of Columbia")
    for groups, nation in ((CANADIAN_PROVINCES, "Canada"), (AUSTRALIAN_STATES, "Australia")):
        for region in groups:
            canonical = f"{region}, {nation}"
            for alias in (region, f"Province of {region}", f"State of {region}", canonical):
                add(alias, canonical)
            parents[canonical] = nation
    add("Québec", "Quebec, Canada")
    add("Newfoundland", "Newfoundland and Labrador, Canada")
    for part in UK_PARTS:
        add(part, part)
        parents[part] = "United Kingdom"
    for canonical, more in _MORE_NAMES.items():
        for alias in more:
            add(alias, canonical)
    parents["Hong Kong"] = parents["Macau"] = "China"
    for country in pycountry.countries:
        canonical = _COUNTRY_NAMES.get(country.alpha_2) or getattr(country, "common_name", None) or country.name
        if "," in canonical:
            canonical = getattr(country, "official_name", canonical)
        forms = [canonical, country.name, getattr(country, "official_name", ""), getattr(country, "common_name", "")]
        for form in forms:
            form = re.sub(r"\s*\(.*?\)", "", form).strip()
            if form.lower().startswith("the "):
                form = form[4:]
            if not form or "," in form or form in _NOT_COUNTRY_ALIASES:
                continue
            add(form, canonical)
            if form.startswith("Saint "):
                add("St. " + form[6:], canonical)
            if " " not in form:
                add(f"Republic of {form}", canonical)
                add(f"Kingdom of {form}", canonical)

    aliases: dict[tuple[str, ...], _Alias] = {}
    for alias, canonical in names.items():
        key = tuple(_key(m.group(0)) for m in _words(alias))
        if key and key not in aliases:
            aliases[key] = _Alias(canonical, _is_abbreviation(alias), len(key) == 1)
    return _Table(aliases, frozenset(k[0] for k in aliases), max(len(k) for k in aliases), parents)


@dataclass(frozen=True, slots=True)
class _Mention:
    canonical: str
    start: int
    end: int
    next_word: int  # index of the first word after the mention


def _case_fits(alias: _Alias, words: list[re.Match[str]], i: int, n: int) -> bool:
    if alias.abbreviation:
        written = "".join(w.group(0) for w in words[i : i + n])
        if not written.replace(".", "").isupper():
            return False
        if written in {"US", "UK"}:  # "LET US": a bare capital "US" counts only outside capitals
            around = [
                w.group(0) for w in (words[i - 1] if i else None, words[i + n] if i + n < len(words) else None) if w
            ]
            return not any(len(a) > 1 and a.isupper() for a in around)
        return True
    if alias.single_word:
        return words[i].group(0)[:1].isupper()
    return True


def _adjacent(text: str, words: list[re.Match[str]], i: int, n: int) -> bool:
    """The `n` words from `i` are separated by blanks only (no ". " or "(" between the words of a name)."""
    return all(words[j].end() == words[j + 1].start() or not text[words[j].end() : words[j + 1].start()].strip()
               for j in range(i, i + n - 1))  # fmt: skip


def _match_at(text: str, words: list[re.Match[str]], keys: list[str], i: int) -> tuple[_Alias, int] | None:
    table = _table()
    if keys[i] not in table.first_words:
        return None
    for n in range(min(table.longest, len(words) - i), 0, -1):
        alias = table.aliases.get(tuple(keys[i : i + n]))
        if alias and _case_fits(alias, words, i, n) and _adjacent(text, words, i, n):
            return alias, n
    return None


def _with_dot(text: str, last: re.Match[str], end: int) -> int:
    """ "U.S.A." and "D.C." keep their last dot (the word pattern stops before it)."""
    return end + 1 if "." in last.group(0) and text[end : end + 1] == "." else end


def _mentions(text: str) -> list[_Mention]:
    words = _words(text)
    keys = [_key(w.group(0)) for w in words]
    table = _table()
    found: list[_Mention] = []
    i = 0
    while i < len(words):
        hit = _match_at(text, words, keys, i)
        if hit is None:
            i += 1
            continue
        alias, n = hit
        canonical, end, after = alias.canonical, words[i + n - 1].end(), i + n
        end = _with_dot(text, words[i + n - 1], end)
        if canonical == "Georgia":
            country = re.match(r"\s*\(\s*country\s*\)", text[end : end + 20])
            if country:
                canonical, end = "Georgia (country)", end + country.end()
                while after < len(words) and words[after].start() < end:
                    after += 1
        # "New York, New York", "Ontario, Canada", "Delaware, U.S.A.", "England, United Kingdom": one place.
        comma = after < len(words) and keys[after] == "," and text[end : words[after].start()].strip() == ""
        j = after + 1 if comma else after
        if j < len(words) and _adjacent(text, words, after, j - after + 1):
            follow = _match_at(text, words, keys, j)
            same = follow is not None and follow[0].canonical == canonical and comma  # "New York, New York"
            if follow and (same or follow[0].canonical == table.parents.get(canonical)):
                after = j + follow[1]
                end = _with_dot(text, words[after - 1], words[after - 1].end())
        found.append(_Mention(canonical, words[i].start(), end, after))
        i = after
    return found


def _value(text: str, canonical: str, start: int, end: int) -> Value:
    return Value("jurisdiction", canonical, canonical, text[start:end], start, end)


def find_jurisdictions(text: str) -> list[Value]:
    """Every place named in `text` (whole words), in order: kind ``jurisdiction``, normalized to its canonical
    name (see the module docstring), `as_written` the words as written ("the State of New York" gives
    "State of New York")."""
    return [_value(text, m.canonical, m.start, m.end) for m in _mentions(text)]


def canonical_jurisdiction(name: str) -> str | None:
    """The canonical name of the place `name` names ("the State of New York" -> "New York", "PRC" -> "China",
    "Province of Ontario" -> "Ontario, Canada", "Swiss law" -> "Switzerland"), or None when `name` is not
    exactly one place. Case does not matter here: the whole string is taken as a place name."""
    name = re.sub(r"\s+", " ", name).strip().strip(".;:").strip()
    name = re.sub(r"^(?:the\s+)?(?:(?:internal|substantive)\s+)?laws?\s+of\s+", "", name, flags=re.IGNORECASE)
    name = re.sub(r"\s+(?:(?:substantive|internal|federal)\s+)?laws?$", "", name, flags=re.IGNORECASE)
    name = re.sub(r"^the\s+", "", name, flags=re.IGNORECASE)
    for demonym, canonical in _DEMONYMS.items():
        if name.casefold() == demonym.casefold():
            return canonical
    # Read as if capitalised: the caller says this is a place, so "georgia" and "us" are names here.
    titled = " ".join(w if w.isupper() else w[:1].upper() + w[1:] for w in name.split(" "))
    for candidate in (name, titled, titled.upper()):
        mentions = _mentions(candidate)
        if len(mentions) == 1 and mentions[0].start == 0 and mentions[0].end >= len(candidate.rstrip(".")):
            return mentions[0].canonical
    return None


# --- governing law -------------------------------------------------------------------------------------------

# What chooses a law: "governed by", "construed", "interpreted", "Governing Law", "the applicable law shall be",
# "This Agreement is subject to", "disputes shall be determined in accordance with".
_TRIGGER = re.compile(
    r"\b(?:govern(?:s|ed|ing)?\b|constru(?:e|ed|ction)\b|interpret(?:ed|ation)?\b"
    r"|(?:applicable|proper)\s+law(?:\s*[:.\-–—]|\s+(?:shall|will)\s+be\b|\s+is\b)|law\s+applicable\s+to\b"
    r"|(?:agreement|contract)\s+(?:is|shall\s+be|will\s+be)\s+(?:made\s+)?(?:subject\s+to|under)\b"
    r"|determined\s+(?:in\s+accordance\s+with|under)\b)",
    re.IGNORECASE,
)
# Between the trigger and the law, words that say the place is not the chosen law.
_NOT_CHOSEN = re.compile(
    r"conflicts?\s+of\s+laws?|choice[\s-]+of[\s-]+laws?|conflicts?\s+(?:laws?|rules|principles|provisions)"
    r"|without\s+(?:regard|reference|giving\s+effect)|other\s+than|\bcourts?\b|organi[sz]ed|incorporated"
    r"|violat|\bcompl(?:y|ies|iance)\b|prohibit|illegal|unenforceab",
    re.IGNORECASE,
)
# The end of a sentence or clause: ". The", "; provided" (not "U.S. law", "Inc. and").
_BREAK = re.compile(r";|(?<!\b[A-Z])(?<!\bInc)(?<!\bLtd)(?<!\bCo)(?<!\bNo)(?<!\bSt)\.\s+(?=[A-Z(\"“])|\n\s*\n")
# "the laws of [the]", "the laws and decisions of", "laws, other than choice of law rules, of", "laws in force in",
# "legislation of": the words just before a place whose law is named.
_LAW_OF = re.compile(
    r"\b(?:laws?|legislation)(?:\s+and\s+(?:\w+\s+){0,2}?(?:decisions|regulations|jurisprudence))?"
    r"(?:\s*,[^,.;]{1,60},)?\s*,?\s+(?:of|in\s+force\s+in|applicable\s+in|in\s+effect\s+in|prevailing\s+in)"
    r"\s+(?:the\s+)?(?:(?:federal\s+)?[a-z]+\s+of\s+(?:the\s+)?)?$",
    re.IGNORECASE,
)
# A place or people followed by "law": "New York law", "Swiss substantive law", "Colombian private law".
_LAW_AFTER = re.compile(
    r"(?:'s)?\s+(?:(?:substantive|internal|domestic|federal|state|statutory|common|contract|private|civil"
    r"|commercial|material|applicable)\s+){0,2}laws?\b",
    re.IGNORECASE,
)
_DEMONYM = re.compile(r"\b(" + "|".join(sorted(_DEMONYMS, key=len, reverse=True)) + r")\b")
# "the patent laws of the United States": a body of law named for its subject, not the contract's law.
_SUBJECT_LAW = re.compile(
    r"\b(?:patent|tax|taxation|securities|export|import|customs|antitrust|competition|bankruptcy|insolvency"
    r"|employment|labou?r|environmental|privacy|data\s+protection|copyright|trademark|immigration|banking"
    r"|insurance|franchise|escheat|usury|inventorship)\s+(?:and\s+\w+\s+)?(?:laws?|legislation)\b[^.;]{0,40}$",
    re.IGNORECASE,
)
# "the laws of the United States of America and of the Commonwealth of Pennsylvania": the next place of a list.
_AND_OF = re.compile(
    r"\s*,?\s*(?:and|or|and/or)\s+(?:of\s+)?(?:the\s+)?(?:(?:federal|applicable|national)\s+)*(?:laws?\s+of\s+)?"
    r"(?:the\s+)?",
    re.IGNORECASE,
)
# "organized under the laws of", "a company existing under": the law a party is registered under.
_REGISTERED = re.compile(
    r"\b(?:organi[sz]ed|incorporated|existing|formed|registered|chartered|established|constituted|created"
    r"|domiciled|licensed|qualified)\b[^.;]{0,30}$",
    re.IGNORECASE,
)
_HEADING = re.compile(r"\bgoverning\s+law\s*[:.\-–—]\s*(?:the\s+)?$", re.IGNORECASE)
# "The laws of the State of California shall govern", "the law of Germany applies".
_SHALL_GOVERN = re.compile(
    r"[^.;]{0,120}?\b(?:(?:shall|will|to|does|do)\s+(?:exclusively\s+|solely\s+|only\s+)?"
    r"(?:govern|apply|be\s+applied|be\s+applicable|control)|governs|applies|controls)\b",
    re.IGNORECASE,
)
# pypdf writes some punctuation as look-alike characters (";" as the Greek question mark): read them as such.
_LOOKALIKES = str.maketrans({"\u037e": ";", "\u2010": "-", "\u2011": "-"})
_PARENTHESIS = re.compile(r"\([^()]*\)")
_REACH = (200, 100)  # the farthest a trigger stands from "the laws of X" and from "X law"


@dataclass(frozen=True, slots=True)
class _LawReference:
    canonical: str
    start: int
    end: int
    phrase: int  # where "the laws of X" begins (`start` for "X law")
    law_of: bool  # "the laws of X" (True) or "X law" (False)


def _law_references(text: str) -> list[_LawReference]:
    refs: list[_LawReference] = []
    for m in _mentions(text):
        before = text[max(0, m.start - 150) : m.start]
        if _SUBJECT_LAW.search(before):
            continue
        law_of = _LAW_OF.search(before)
        last = refs[-1] if refs else None
        if law_of:
            refs.append(_LawReference(m.canonical, m.start, m.end, m.start - len(before) + law_of.start(), True))
        elif last and last.law_of and m.start - last.end < 60 and _AND_OF.fullmatch(text, last.end, m.start):
            refs.append(_LawReference(m.canonical, m.start, m.end, last.phrase, True))
        elif _LAW_AFTER.match(text, m.end) or _HEADING.search(before):
            refs.append(_LawReference(m.canonical, m.start, m.end, m.start, False))
    for d in _DEMONYM.finditer(text):
        if _LAW_AFTER.match(text, d.end()):
            refs.append(_LawReference(_DEMONYMS[d.group(1)], d.start(), d.end(), d.start(), False))
    return sorted(refs, key=lambda r: r.start)


def _chosen(text: str, ref: _LawReference) -> bool:
    """Whether the law `ref` names is the one the sentence chooses (not a party's seat nor a conflicts proviso)."""
    if _REGISTERED.search(text, max(0, ref.phrase - 60), ref.phrase):
        return False
    if _HEADING.search(text, max(0, ref.start - 30), ref.start):
        return True
    reach = _REACH[0] if ref.law_of else _REACH[1]
    window_start = max(0, ref.phrase - reach)
    breaks = list(_BREAK.finditer(text, window_start, ref.phrase))
    sentence_start = breaks[-1].end() if breaks else window_start
    triggers = list(_TRIGGER.finditer(text, sentence_start, ref.phrase))
    if triggers and not _NOT_CHOSEN.search(text, triggers[-1].end(), ref.phrase):
        return True
    governs = _SHALL_GOVERN.match(text, ref.end, ref.end + 200)
    return governs is not None and not _NOT_CHOSEN.search(_PARENTHESIS.sub("", governs.group(0)))


def governing_law(text: str) -> list[Value]:
    """The jurisdictions whose law `text` chooses ("governed by and construed in accordance with the laws of the
    State of New York" -> New York; "Swiss law shall apply" -> Switzerland), in order of appearance, each once.

    A place named as a party's seat ("a Delaware corporation", "organized under the laws of Delaware"), as the
    seat of courts or arbitration, or in the conflict-of-laws proviso is not chosen. A country named beside one
    of its states or provinces ("the laws of the Province of Ontario and the federal laws of Canada applicable
    therein") gives way to it. An empty list when `text` chooses no law."""
    plain = text.translate(_LOOKALIKES)  # same length: offsets hold
    chosen: list[_LawReference] = []
    for ref in _law_references(plain):
        if all(c.canonical != ref.canonical for c in chosen) and _chosen(plain, ref):
            chosen.append(ref)
    parents = _table().parents
    regions = {parents.get(c.canonical) for c in chosen}
    return [_value(text, c.canonical, c.start, c.end) for c in chosen if c.canonical not in regions]
