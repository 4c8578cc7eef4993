"""Turning any text into a safe FTS5 query, and marking matches in snippets."""

import functools
import html
import re
from collections.abc import Sequence

MAX_QUERY_TERMS = 64


SNIPPET_TOKENS = 24


MARK_OPEN, MARK_CLOSE = "\x02", "\x03"


# A match, between the marks (a template: no Python call per match).
_MARKED = MARK_OPEN + r"\g<0>" + MARK_CLOSE


TERM = re.compile(r"\w+", re.UNICODE)


_PHRASE = re.compile(r'"([^"]+)"')


_SPACES = re.compile(r"\s+")


# FTS5 has no stop words: OR-ing "is" or "the" into a query would let every
# row match and crowd out the vector results in hybrid mode.  Dropped from
# the keyword query unless the query has nothing else.
_STOP_WORDS_TEXT = """
a an and are as at be been being but by can could did do does for from had
has have he her hers him his how i if in into is it its me my no not of on
or our she so than that the their them then there these they this to was
we were what when where which who whom why will with would you your
"""


STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())


def fts_query(text: str) -> str:
    """Any user text as a safe FTS5 query: quoted phrases and terms, OR-ed.

    FTS5 operators, parentheses, ``NEAR``, ``*`` and ``-`` lose their
    meaning (they are punctuation or quoted words); an empty string means
    nothing in the text can match by keywords (e.g. emoji only).
    """
    parts: list[str] = []
    seen: set[str] = set()
    for phrase in _PHRASE.findall(text):
        words = TERM.findall(phrase)
        if len(words) > 1:
            parts.append('"' + " ".join(words) + '"')
    words = TERM.findall(_PHRASE.sub(" ", text))
    content_words = [w for w in words if w.casefold() not in STOP_WORDS]
    for word in content_words or words:
        key = word.casefold()
        if key not in seen:
            seen.add(key)
            parts.append(f'"{word}"')
    return " OR ".join(parts[:MAX_QUERY_TERMS])


def normalised_text(text: str) -> str:
    """Text compared for duplicates when there are no vectors."""
    return " ".join(TERM.findall(text.casefold()))


def highlight(content: str, terms: Sequence[str], width: int = 200) -> str:
    """An escaped excerpt of ``content`` around the first term, terms marked."""
    if not terms:
        return html.escape(content[:width])
    pattern = _terms_pattern(tuple(terms))
    found = pattern.search(content)
    start = max(0, found.start() - width // 3) if found else 0
    excerpt = content[start : start + width]
    marked = pattern.sub(_MARKED, excerpt)
    prefix = "…" if start else ""
    suffix = "…" if start + width < len(content) else ""
    return render_snippet(prefix + marked + suffix)


@functools.lru_cache(maxsize=256)
def _terms_pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    """Words starting with any of ``terms`` (compiled once per query)."""
    return re.compile(
        r"\b(" + "|".join(re.escape(t) for t in terms) + r")\w*", re.IGNORECASE
    )


def render_snippet(marked: str) -> str:
    escaped = html.escape(_SPACES.sub(" ", marked))
    return escaped.replace(MARK_OPEN, "<mark>").replace(MARK_CLOSE, "</mark>")
