"""The dates a question names, read as spans of days relative to a ``today``.

"29 Dec 2023", "10.01.2024", "January 6th, 2024", "in May", "May 2024",
"in 2017", "spring of 2024", "the first week of 2024", "yesterday", "last
week", "three days ago", "recently", and each of them after "shortly
before", "before", "after", "two days before", "the day after".  A day
without a year is the latest such day not after ``today``; a month without
a year likewise.  Nothing here knows the rows: the engine's time stage
(``memory.search.engine``) favours the rows dated within the spans.

Bounded: at most ``MAX_SPANS`` spans, each at most ``MAX_SPAN_DAYS`` days.
"""

import calendar
import functools
import re
from dataclasses import dataclass
from datetime import date, timedelta

MAX_SPANS = 4
MAX_SPAN_DAYS = 366

# How far "before X" / "after X" reach when no distance is given, and the
# span "recently" and "shortly before" cover.
NEAR_DAYS = 14
SHORTLY_DAYS = 7

_MONTH_NAMES = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH = (
    r"(?P<{}>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?"
    r"|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a few": 3,
    "few": 3,
    "several": 3,
}
_COUNT = r"(?P<n>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_YEAR = r"(?P<y>(?:19|20)\d\d)"
_ORD = r"(?:st|nd|rd|th)?"

# Each pattern finds one anchor: a day, a month or a year, written out.
_DAY_PATTERNS = [
    # 29 Dec 2023, 29th of December, 2023, 5 January
    re.compile(
        rf"\b(?P<d>\d{{1,2}}){_ORD}(?:\s+of)?\s+{_MONTH.format('m')}(?:,?\s+{_YEAR})?\b",
        re.I,
    ),
    # December 29, 2023, January 6th 2024, Jan 5
    re.compile(
        rf"\b{_MONTH.format('m')}\s+(?P<d>\d{{1,2}}){_ORD}\b(?:,?\s+{_YEAR})?",
        re.I,
    ),
    # 2024-01-10
    re.compile(r"\b(?P<y>(?:19|20)\d\d)-(?P<mn>\d{1,2})-(?P<d>\d{1,2})\b"),
    # 10.01.2024, 10/01/2024 (day first; month first when the day cannot be)
    re.compile(r"\b(?P<d>\d{1,2})[./](?P<mn>\d{1,2})[./](?P<y>(?:19|20)\d\d)\b"),
]
_MONTH_PATTERN = re.compile(
    rf"\b(?:in|during|of|since|early|late|mid|end of|beginning of)?\s*"
    rf"{_MONTH.format('m')}(?:,?\s+{_YEAR})?\b",
    re.I,
)
_SEASON_PATTERN = re.compile(
    r"\b(?P<season>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?"
    r"(?P<y>(?:19|20)\d\d)(?:\s*[-/]\s*(?:19|20)?\d\d)?)?\b",
    re.I,
)
_SEASON_LEAD = re.compile(r"\b(?:in|this|last|next|during|of|the)\s+$", re.I)
_WEEK_OF_YEAR = re.compile(
    r"\b(?P<which>first|last)\s+week\s+of\s+(?:the\s+year\s+)?(?P<y>(?:19|20)\d\d)\b",
    re.I,
)
_YEAR_PATTERN = re.compile(r"\b(?:in|of|during|since)\s+(?P<y>(?:19|20)\d\d)\b", re.I)
_RELATIVE = re.compile(
    r"\b(?P<word>today|tonight|yesterday|the day before yesterday"
    r"|(?:last|this|past|previous) (?:week(?:end)?|month|year)"
    r"|recently|lately)\b",
    re.I,
)
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
_WEEKDAYS = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
]
_LAST_WEEKDAY = re.compile(
    r"\b(?:last|on)\s+(?P<wd>" + "|".join(_WEEKDAYS) + r")\b(?!\s+before|\s+after)",
    re.I,
)
# What may stand before an anchor and move it: "two days before",
# "shortly before", "the day after", "before".
_SHIFT = re.compile(
    rf"(?:(?:{_COUNT}|the)\s+{_UNIT}\s+|(?P<shortly>shortly|just|right|recently)\s+)?"
    r"(?P<dir>before|after|prior to)\s*(?:the\s+)?$",
    re.I,
)


# Every pattern above needs one of these (a digit, a month, a season, a
# relative word or a weekday).
_MAY_NAME_A_DATE = re.compile(
    r"\d|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|spring|summer"
    r"|autumn|fall|winter|today|tonight|yesterday|last|this|past|previous"
    r"|recently|lately|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|an? |one|two|three|four|five|six|seven|eight|nine|ten|few|several)",
    re.I,
)


@dataclass(frozen=True)
class DateSpan:
    """The days from ``start`` to ``end`` (both included), and the words of
    the question that named them."""

    start: date
    end: date
    words: str

    def holds(self, day: date) -> bool:
        return self.start <= day <= self.end

    def describe(self) -> str:
        if self.start == self.end:
            return f"{self.words!r}: {self.start.isoformat()}"
        return f"{self.words!r}: {self.start.isoformat()} to {self.end.isoformat()}"


def _month_number(name: str) -> int:
    key = name.lower().rstrip(".")[:3]
    return next(i for i, m in enumerate(_MONTH_NAMES, start=1) if m[:3] == key)


def _count(text: str | None) -> int:
    if not text:
        return 1
    text = text.lower()
    return int(text) if text.isdigit() else _NUMBERS.get(text, 1)


def _latest(month: int, day: int, today: date) -> date | None:
    """That day of the latest year it is not after ``today``."""
    for year in (today.year, today.year - 1):
        try:
            found = date(year, month, day)
        except ValueError:
            return None
        if found <= today:
            return found
    return None


def _day(match: re.Match[str], today: date) -> date | None:
    groups = match.groupdict()
    month = _month_number(groups["m"]) if groups.get("m") else int(groups["mn"])
    day = int(groups["d"])
    if groups.get("mn") and month > 12 and day <= 12:
        month, day = day, month  # 01/29/2024: month first
    year = groups.get("y")
    try:
        return date(int(year), month, day) if year else _latest(month, day, today)
    except ValueError:
        return None


def _month_span(month: int, year: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _shifted(span: tuple[date, date], before: str) -> tuple[date, date]:
    """``span`` moved by the words just before it ("two days before")."""
    found = _SHIFT.search(before[-40:])
    if found is None:
        return span
    start, end = span
    direction = found["dir"].lower()
    unit = (found["unit"] or "").lower()
    if unit:
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * _count(
            found["n"]
        )
        step = timedelta(days=days)
        return (
            (start - step, end - step)
            if direction != "after"
            else (
                start + step,
                end + step,
            )
        )
    reach = timedelta(days=SHORTLY_DAYS if found["shortly"] else NEAR_DAYS)
    if direction == "after":
        return end, end + reach
    return start - reach, start


def _relative(word: str, today: date) -> tuple[date, date]:
    word = " ".join(word.lower().split())
    if word in ("today", "tonight"):
        return today, today
    if word == "yesterday":
        return today - timedelta(days=1), today - timedelta(days=1)
    if word == "the day before yesterday":
        return today - timedelta(days=2), today - timedelta(days=2)
    if word in ("recently", "lately"):
        return today - timedelta(days=NEAR_DAYS), today
    which, _sep, unit = word.partition(" ")
    monday = today - timedelta(days=today.weekday())
    if unit == "week":
        if which == "this":
            return monday, today
        if which == "past":
            return today - timedelta(days=7), today
        return monday - timedelta(days=7), monday - timedelta(days=1)
    if unit == "weekend":
        saturday = monday - timedelta(days=2)
        if which == "this" and today.weekday() >= 5:
            saturday = monday + timedelta(days=5)
        return saturday, saturday + timedelta(days=1)
    if unit == "month":
        if which == "this":
            return today.replace(day=1), today
        if which == "past":
            return today - timedelta(days=30), today
        last = today.replace(day=1) - timedelta(days=1)
        return last.replace(day=1), last
    # year
    if which == "this":
        return date(today.year, 1, 1), today
    if which == "past":
        return today - timedelta(days=365), today
    return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)


_SEASON_MONTHS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


def _season(name: str, year: str | None, today: date) -> tuple[date, date]:
    first = _SEASON_MONTHS[name.lower()]
    if year is None:
        start_year = (
            today.year if date(today.year, first, 1) <= today else today.year - 1
        )
    else:
        # "winter 2021 - 2022" and "winter 2022" both start in December 2021.
        start_year = int(year[:4]) - (first == 12 and "-" not in year)
    start = date(start_year, first, 1)
    end_month, end_year = (first + 2 - 1) % 12 + 1, start_year + (first + 2 > 12)
    return start, _month_span(end_month, end_year)[1]


def question_spans(text: str, *, today: date) -> list[DateSpan]:
    """The spans of days ``text`` names (see the module), in the order
    named, at most ``MAX_SPANS``; none when it names no date."""
    if not _MAY_NAME_A_DATE.search(text):
        return []  # most queries: one scan instead of a dozen
    found: list[tuple[int, int, tuple[date, date]]] = []
    taken: list[tuple[int, int]] = []

    def add(match: re.Match[str], span: tuple[date, date] | None) -> None:
        start, end = match.span()
        if span is None or any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        found.append((start, end, _shifted(span, text[:start])))

    for pattern in _DAY_PATTERNS:
        for match in pattern.finditer(text):
            day = _day(match, today)
            add(match, (day, day) if day else None)
    for match in _WEEK_OF_YEAR.finditer(text):
        year = int(match["y"])
        if match["which"].lower() == "first":
            add(match, (date(year, 1, 1), date(year, 1, 7)))
        else:
            add(match, (date(year, 12, 25), date(year, 12, 31)))
    for match in _SEASON_PATTERN.finditer(text):
        # "fall asleep", "spring rolls": a season only with a year or after
        # a word that makes it one.
        if match["y"] or _SEASON_LEAD.search(text[: match.start()]):
            add(match, _season(match["season"], _season_year(match), today))
    for match in _MONTH_PATTERN.finditer(text):
        if (
            match["m"].lower() == "may"
            and not match.group(0)
            .strip()
            .lower()
            .startswith(
                (
                    "in",
                    "during",
                    "of",
                    "since",
                    "early",
                    "late",
                    "mid",
                    "end",
                    "beginning",
                )
            )
            and not match["y"]
        ):
            continue  # "may" the verb
        month = _month_number(match["m"])
        if match["y"]:
            add(match, _month_span(month, int(match["y"])))
        else:
            year = today.year if month <= today.month else today.year - 1
            add(match, _month_span(month, year))
    for match in _YEAR_PATTERN.finditer(text):
        year = int(match["y"])
        add(match, (date(year, 1, 1), date(year, 12, 31)))
    for match in _AGO.finditer(text):
        unit = match["unit"].lower()
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * _count(
            match["n"]
        )
        at = today - timedelta(days=days)
        slack = timedelta(days={"day": 0, "week": 3, "month": 10, "year": 120}[unit])
        add(match, (at - slack, min(today, at + slack)))
    for match in _RELATIVE.finditer(text):
        add(match, _relative(match["word"], today))
    for match in _LAST_WEEKDAY.finditer(text):
        back = (today.weekday() - _WEEKDAYS.index(match["wd"].lower())) % 7 or 7
        day = today - timedelta(days=back)
        add(match, (day, day))
    found.sort()
    spans = []
    for start, end, (first, last) in found[:MAX_SPANS]:
        if last < first:
            first, last = last, first
        last = min(last, first + timedelta(days=MAX_SPAN_DAYS - 1))
        spans.append(DateSpan(first, last, text[start:end].strip()))
    return spans


def _season_year(match: re.Match[str]) -> str | None:
    year = match["y"]
    if year is None:
        return None
    return match.group(0)[match.start("y") - match.start() :].strip()


# What a question asks for when it asks for a time, and what a row says
# that answers it, as question answering types its answers: "When did Kate
# start skiing?" is answered by "I started skiing last winter", "How long
# was the trip?" by "about a week and a half", seldom by a row that names
# no time at all.
WHEN = "when"
HOW_LONG = "how long"
_ASKS_WHEN = re.compile(
    r"(?:^|[,;:]\s*)(?:since\s+|until\s+|till\s+|by\s+)?when\b"
    r"|\b(?:what|which)\s+(?:date|day|year|month|week(?:end)?|season)\b"
    r"|\bhow\s+long\s+ago\b|\bhow\s+many\s+(?:days|weeks|months|years)\s+ago\b",
    re.I,
)
_ASKS_HOW_LONG = re.compile(
    r"\bhow\s+long\b|\bhow\s+much\s+time\b"
    r"|\bhow\s+many\s+(?:minutes|hours|days|weeks|months|years)\b",
    re.I,
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH_WORD = (
    r"(?:january|february|march|april|june|july|august|september|october"
    r"|november|december|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)"
)
_QUANTITY = (
    r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven"
    r"|twelve|few|couple(?:\s+of)?|several|many)"
)
_TELLS_WHEN = re.compile(
    r"\b(?:today|tonight|yesterday|tomorrow|the\s+other\s+day|earlier\s+today"
    r"|(?:this|last|next|past|coming)\s+(?:morning|afternoon|evening|night"
    rf"|week(?:end)?|month|year|time|{_WEEKDAY}|spring|summer|fall|autumn|winter"
    r"|semester)"
    rf"|(?:on|this|last|next)\s+{_WEEKDAY}s?"
    rf"|{_QUANTITY}\s+(?:days?|weeks?|months?|years?)\s+(?:ago|back|before|earlier|later)"
    r"|(?:a\s+)?(?:while|long\s+time)\s+ago|recently|just\s+now"
    rf"|(?:in|since|during|until|by|of|early|late|mid)\s+(?:{_MONTH_WORD}|may|(?:19|20)\d\d)"
    rf"|{_MONTH_WORD}\s+\d{{1,2}}(?:st|nd|rd|th)?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_WORD}"
    r"|\d{1,2}[./]\d{1,2}[./](?:19|20)?\d\d|(?:19|20)\d\d-\d{1,2}-\d{1,2}"
    r"|new\s+year'?s?(?:\s+eve)?|christmas|thanksgiving|halloween|easter"
    r"|spring\s+break|birthday|anniversary)\b",
    re.I,
)
_TELLS_HOW_LONG = re.compile(
    rf"\b{_QUANTITY}\s+(?:and\s+a\s+half\s+)?"
    r"(?:minutes?|hours?|days?|weeks?|months?|years?)\b"
    r"|\bsince\b|\ball\s+(?:day|night|week|month|year)\b|\bhalf\s+an?\s+(?:hour|year)\b",
    re.I,
)
# Asked in this order: "how long ago" asks when.
_KINDS = ((WHEN, _ASKS_WHEN, _TELLS_WHEN), (HOW_LONG, _ASKS_HOW_LONG, _TELLS_HOW_LONG))


def time_asked(text: str) -> str:
    """What kind of time the question ``text`` asks for: ``WHEN`` ("When
    did ...", "Since when ...", "What year ...", "How long ago ..."),
    ``HOW_LONG`` ("How long ...", "How much time ...", "How many years
    ..."), or "" (none)."""
    text = text.strip()
    return next((kind for kind, asks, _tells in _KINDS if asks.search(text)), "")


# The same patterns, case-sensitive, for ASCII text lowercased first: the
# time stage scans every candidate's text, and case-insensitive matching
# of these alternations costs more than twice as much.  On ASCII text
# the two give the same answer, as long as the patterns hold no capital
# (which would also turn ``\d`` into ``\D``).
def _case_sensitive(pattern: re.Pattern[str]) -> re.Pattern[str]:
    if pattern.pattern != pattern.pattern.lower():
        raise ValueError(f"write {pattern.pattern[:40]!r}... in lower case")
    return re.compile(pattern.pattern)


_TELLS_LOWER = {kind: _case_sensitive(tells) for kind, _asks, tells in _KINDS}


def tells_time(asked: str, text: str) -> bool:
    """Whether ``text`` tells the kind of time ``asked``: for ``WHEN`` a
    relative day or week ("yesterday", "last Friday", "two weeks ago",
    "this morning", "next month"), a month or a year ("in May", "since
    2019"), a date or a day of the year ("New Year's Eve", "my birthday");
    for ``HOW_LONG`` a length of time ("three years", "about a week and a
    half", "all day", "since").  The answers for the latest texts of up to
    ``TELLS_KEPT_CHARS`` characters are kept (``_tells_time_kept``)."""
    if len(text) > TELLS_KEPT_CHARS:
        return _tells_time(asked, text)
    return _tells_time_kept(asked, text)


def _tells_time(asked: str, text: str) -> bool:
    if text.isascii():
        lower = _TELLS_LOWER.get(asked)
        return lower is not None and bool(lower.search(text.lower()))
    tells = next((t for kind, _asks, t in _KINDS if kind == asked), None)
    return tells is not None and bool(tells.search(text))


# The same memories are candidates of many questions, and scanning one
# costs about a hundred times looking its answer up: the answers for the
# latest texts are kept, keyed by the text itself (so at most
# TELLS_KEPT x TELLS_KEPT_CHARS characters, ~8 MB, are held; longer texts
# are scanned each time).  An edited memory is a new text: nothing kept
# can go stale.
TELLS_KEPT = 4096
TELLS_KEPT_CHARS = 2000
_tells_time_kept = functools.lru_cache(maxsize=TELLS_KEPT)(_tells_time)
