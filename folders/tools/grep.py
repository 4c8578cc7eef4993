"""Regular expression search over the text of a folder's files.

Patterns run on the ``regex`` engine with wall-clock budgets: per file
(``FOLDER_GREP_FILE_TIMEOUT``) and for the whole grep
(``FOLDER_GREP_TIMEOUT``).  A pattern that backtracks catastrophically is
stopped at the first file it stalls on and reported as ``InvalidInput``
instead of holding the worker.  A literal (``literal=True``, or a pattern
without metacharacters) is first looked for with ``str.find``, so files
without it cost one C scan.  Texts are read through a per-process cache
checked against each file's digest (``_TextCache``).  Results are one per
matching line, in path order, with ``context`` lines each side, up to
``limit`` lines.
"""

import fnmatch
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

import regex
from django.conf import settings

from folders.files.models import Folder, FolderFile
from pattern_site.kernel.errors import InvalidInput

MAX_PATTERN_CHARS = 1000
MAX_CONTEXT = 10
MAX_LIMIT = 1000
_META = set(".^$*+?{}[]\\|()")


@dataclass
class GrepMatch:
    path: str
    line: int
    text: str
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)


@dataclass
class GrepResult:
    matches: list[GrepMatch]
    files_searched: int
    files_matched: int
    truncated: bool
    elapsed_ms: float


def grep_pattern(pattern: str, *, ignore_case: bool, literal: bool):
    if not pattern:
        raise InvalidInput("the pattern is empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(
            f"the pattern is {len(pattern)} chars; at most {MAX_PATTERN_CHARS}"
        )
    flags = regex.MULTILINE | regex.V0 | (regex.IGNORECASE if ignore_case else 0)
    source = regex.escape(pattern) if literal else pattern
    try:
        return regex.compile(source, flags)
    except regex.error as exc:
        raise InvalidInput(
            f"the pattern is not a valid regular expression: {exc}"
        ) from None


def folder_grep(
    *,
    folder: Folder,
    pattern: str,
    path: str | None = None,
    include: str | None = None,
    context: int = 0,
    ignore_case: bool = False,
    literal: bool = False,
    limit: int = 100,
    qualified: bool = False,
) -> GrepResult:
    """Lines of ``folder``'s files matching ``pattern`` (one file: ``path``;
    files whose path matches the glob ``include``, or their
    ``<folder>/<path>`` when ``qualified``)."""
    if not 0 <= context <= MAX_CONTEXT:
        raise InvalidInput(f"context is 0 to {MAX_CONTEXT} lines, not {context}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit is 1 to {MAX_LIMIT}, not {limit}")
    compiled = grep_pattern(pattern, ignore_case=ignore_case, literal=literal)
    needle = (
        pattern if not ignore_case and (literal or not _META & set(pattern)) else None
    )
    files = folder.files.order_by("path")
    if path is not None:
        files = files.filter(path=path)
    rows: Iterable[tuple[str, str]] = _texts(files)
    if include:
        prefix = folder.name + "/" if qualified else ""
        rows = ((p, t) for p, t in rows if fnmatch.fnmatch(prefix + p, include))
    return _scan(rows, compiled, needle, context=context, limit=limit)


class _TextCache:
    """File texts kept per process, by id, checked against their SHA-256.

    A grep reads only ids, paths and digests from the database (a few
    milliseconds for 10,000 files) and the text of files it has not seen
    or that changed; least recently used texts go first past
    ``FOLDER_GREP_CACHE_MB``.
    """

    def __init__(self) -> None:
        self._texts: OrderedDict[int, tuple[str, str]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, file_id: int, sha256: str) -> str | None:
        with self._lock:
            found = self._texts.get(file_id)
            if found is None or found[0] != sha256:
                return None
            self._texts.move_to_end(file_id)
            return found[1]

    def put(self, file_id: int, sha256: str, text: str) -> None:
        budget = settings.FOLDER_GREP_CACHE_MB * 1_000_000
        if len(text) > budget:
            return
        with self._lock:
            old = self._texts.pop(file_id, None)
            if old is not None:
                self._chars -= len(old[1])
            self._texts[file_id] = (sha256, text)
            self._chars += len(text)
            while self._chars > budget:
                _id, (_sha, evicted) = self._texts.popitem(last=False)
                self._chars -= len(evicted)


_CACHE = _TextCache()
_FETCH = 500


def _texts(files) -> Iterator[tuple[str, str]]:
    """(path, text) of ``files`` in their order, texts from the cache when
    their digest still matches."""
    listing = list(files.values_list("pk", "path", "sha256"))
    missing = [pk for pk, _path, sha in listing if _CACHE.get(pk, sha) is None]
    fetched: dict[int, str] = {}
    for start in range(0, len(missing), _FETCH):
        for pk, sha, text in FolderFile.objects.filter(
            pk__in=missing[start : start + _FETCH]
        ).values_list("pk", "sha256", "text"):
            _CACHE.put(pk, sha, text)
            fetched[pk] = text
    for pk, path, sha in listing:
        text = fetched.get(pk)
        if text is None:
            text = _CACHE.get(pk, sha)
        if text is None:  # evicted meanwhile, or changed since the listing
            text = FolderFile.objects.filter(pk=pk).values_list("text", flat=True)
            text = next(iter(text), None)
        if text is not None:
            yield path, text


def _scan(rows, compiled, needle, *, context: int, limit: int) -> GrepResult:
    started = time.perf_counter()
    deadline = started + settings.FOLDER_GREP_TIMEOUT
    matches: list[GrepMatch] = []
    searched = matched = 0
    truncated = False
    for path, text in rows:
        searched += 1
        if needle is not None and needle not in text:
            continue
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            _too_slow(compiled, searched)
        budget = min(remaining, settings.FOLDER_GREP_FILE_TIMEOUT)
        try:
            found = list(
                islice(
                    _matching_lines(text, compiled, budget), limit - len(matches) + 1
                )
            )
        except TimeoutError:
            _too_slow(compiled, searched)
        if not found:
            continue
        matched += 1
        lines = text.split("\n") if context else None
        for number, line_text in found:
            if len(matches) >= limit:
                truncated = True
                break
            hit = GrepMatch(path, number, line_text)
            if lines is not None:
                hit.before = lines[max(0, number - 1 - context) : number - 1]
                hit.after = lines[number : number + context]
            matches.append(hit)
        if truncated:
            break
    elapsed = round((time.perf_counter() - started) * 1000, 3)
    return GrepResult(matches, searched, matched, truncated, elapsed)


def _matching_lines(text: str, compiled, timeout: float):
    """(line number, line) of each line with a match, each line once."""
    last_line = 0
    line_no = 1
    pos = 0
    for m in compiled.finditer(text, timeout=timeout):
        start = m.start()
        line_no += text.count("\n", pos, start)
        pos = start
        if line_no == last_line:
            continue
        last_line = line_no
        begin = text.rfind("\n", 0, start) + 1
        end = text.find("\n", start)
        yield line_no, text[begin : end if end != -1 else len(text)]


def _too_slow(compiled, searched: int):
    raise InvalidInput(
        f"pattern {compiled.pattern!r} ran past the grep budget"
        f" ({settings.FOLDER_GREP_FILE_TIMEOUT:g} s a file,"
        f" {settings.FOLDER_GREP_TIMEOUT:g} s in all; {searched} files"
        " searched); it likely backtracks (nested quantifiers such as (a+)+):"
        " simplify it or search for a literal"
    )
