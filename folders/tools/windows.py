"""Files an agent holds open: windows of lines that enter its context.

``file_open`` puts a window of a file (``FOLDER_WINDOW_LINES`` lines unless
told) into the agent's context; at most ``FOLDER_MAX_OPEN_FILES`` files are
open at once and opening one more closes the least recently used.
``file_page`` moves a window by its own height and stops at the file's
edges; ``file_read`` returns a line range without opening anything.
``files_render_for_agent`` renders the open windows for the context
builder.  The caller has fetched the file through a selector that checked
the agent's read right.
"""

import html
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from folders.files.models import FolderAttachment, FolderFile, OpenFile
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.errors import InvalidInput, NotFound
from pattern_site.kernel.events import EventType, event_record

MAX_WINDOW_LINES = 1000


@dataclass
class Window:
    file: FolderFile
    start_line: int
    end_line: int
    total_lines: int
    content: str
    closed: list[str] = field(default_factory=list)  # closed to make room

    @property
    def cite(self) -> str:
        return f"{self.file.folder.name}/{self.file.path}"


def _lines(file: FolderFile) -> list[str]:
    lines = file.text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _window(file: FolderFile, start: int, count: int, closed=None) -> Window:
    lines = _lines(file)
    total = len(lines)
    start = max(1, min(start, max(total - count + 1, 1)))
    end = min(total, start + count - 1)
    return Window(
        file=file,
        start_line=start,
        end_line=end,
        total_lines=total,
        content="\n".join(lines[start - 1 : end]),
        closed=closed or [],
    )


def _count(lines: int | None) -> int:
    count = lines if lines is not None else settings.FOLDER_WINDOW_LINES
    if not 1 <= count <= MAX_WINDOW_LINES:
        raise InvalidInput(f"a window has 1 to {MAX_WINDOW_LINES} lines, not {count}")
    return count


@transaction.atomic
def file_open(
    *, agent: Agent, file: FolderFile, line: int = 1, lines: int | None = None
) -> Window:
    count = _count(lines)
    if line < 1:
        raise InvalidInput(f"line numbers start at 1, not {line}")
    window = _window(file, line, count)
    now = timezone.now()
    OpenFile.objects.update_or_create(
        agent=agent,
        file=file,
        defaults={
            "start_line": window.start_line,
            "line_count": count,
            "used_at": now,
        },
    )
    window.closed = _close_least_recent(agent)
    _accessed(actor=Actor.for_agent(agent), window=window, how="open")
    return window


def _accessed(*, actor: Actor, window: Window, how: str) -> None:
    """Record that ``actor`` read lines of a file (after commit)."""
    event_record(
        actor=actor,
        event_type=EventType.FILE_ACCESSED,
        details={
            "path": window.cite,
            "lines": f"{window.start_line}-{window.end_line}",
            "how": how,
        },
    )


def _close_least_recent(agent: Agent) -> list[str]:
    limit = settings.FOLDER_MAX_OPEN_FILES
    surplus = list(
        OpenFile.objects.filter(agent=agent)
        .select_related("file")
        .order_by("-used_at", "-id")[limit:]
    )
    OpenFile.objects.filter(pk__in=[o.pk for o in surplus]).delete()
    return [o.file.path for o in surplus]


def file_read(*, actor: Actor, file: FolderFile, start: int, end: int) -> Window:
    if start < 1 or end < start:
        raise InvalidInput(
            f"line range {start}-{end}: start at 1 or more, end at start or more"
        )
    window = _window(file, start, min(end - start + 1, MAX_WINDOW_LINES))
    _accessed(actor=actor, window=window, how="read")
    return window


@transaction.atomic
def file_page(*, agent: Agent, file: FolderFile, forward: bool) -> Window:
    opened = OpenFile.objects.filter(agent=agent, file=file).first()
    if opened is None:
        raise NotFound(f"{file.path} is not open; open it first")
    step = opened.line_count if forward else -opened.line_count
    window = _window(file, max(1, opened.start_line + step), opened.line_count)
    opened.start_line = window.start_line
    opened.used_at = timezone.now()
    opened.save(update_fields=["start_line", "used_at"])
    _accessed(
        actor=Actor.for_agent(agent),
        window=window,
        how="next" if forward else "prev",
    )
    return window


@transaction.atomic
def file_close(*, agent: Agent, file: FolderFile | None = None) -> int:
    """Close one file, or every file when ``file`` is None."""
    qs = OpenFile.objects.filter(agent=agent)
    if file is not None:
        qs = qs.filter(file=file)
    deleted, _ = qs.delete()
    return deleted


# Read at every build of the agent's context (again after each writing step
# of a turn): compiled once.
_OPEN_FILES = CompiledQuery(
    lambda agent_id: (
        OpenFile.objects.filter(
            agent_id=agent_id,
            file__folder_id__in=FolderAttachment.objects.filter(
                agent_id=agent_id
            ).values("folder_id"),
        )
        .select_related("file__folder")
        .order_by("-used_at", "-id")
    ),
    agent_id=-7_503_101,
)


def file_windows_for_agent(*, agent: Agent) -> list[Window]:
    """The agent's open windows, most recently used first; files of
    folders no longer attached are left out."""
    return [
        _window(o.file, o.start_line, o.line_count)
        for o in _OPEN_FILES.all(agent_id=agent.pk)
    ]


def files_render_for_agent(agent: Agent) -> str:
    """``<file path=".." lines="a-b" of="total">`` blocks of the open files,
    each line prefixed with its number; empty when none is open."""
    parts = []
    for w in file_windows_for_agent(agent=agent):
        width = len(str(w.end_line))
        body = "\n".join(
            f"{n:>{width}}: {text}"
            for n, text in enumerate(w.content.split("\n"), start=w.start_line)
        )
        lines = f"{w.start_line}-{w.end_line}" if w.total_lines else "0-0"
        parts.append(
            f'<file path="{html.escape(w.cite)}" lines="{lines}"'
            f' of="{w.total_lines}">\n{body}\n</file>'
        )
    return "\n".join(parts)
