"""The agents' file tools, one function per tool, registered with
``pattern_site.kernel.tools`` (which serves them over HTTP, MCP and in
process).

Each takes the calling actor and the tool's parsed input schema, finds the
folder and file through the selectors (a folder not attached to the agent
does not exist for it), works through the windows, grep and search modules
and returns the tool's answer in the shape of its output schema
(``WindowOut``, ``CloseOut``, ``GrepOut``, ``FileSearchOut``,
``LettaOpenFilesOut``).  Domain errors propagate for the caller's transport
to present.  The ``*_HELP`` constants are the tools' descriptions.
"""

from typing import Any

from folders import permissions
from folders.files import selectors
from folders.files.models import FolderFile
from folders.schemas import (
    CloseOut,
    FileCloseIn,
    FileOpenIn,
    FileReadIn,
    FileRefIn,
    FileSearchIn,
    FileSearchOut,
    GrepIn,
    GrepOut,
    LettaGrepIn,
    LettaOpenFilesIn,
    LettaOpenFilesOut,
    LettaSearchFilesIn,
    WindowOut,
)
from folders.tools import windows
from folders.tools.grep import GrepResult, folder_grep
from folders.tools.search import folder_search, passage_hit_payload
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import InvalidInput
from pattern_site.kernel.tools import AgentTool, tool_register

OPEN_HELP = (
    "Open a file of an attached folder: a window of its lines (100 unless you"
    " say) enters your context and stays there, numbered, until you close it."
    " At most 5 files are open at once; opening another closes the one you"
    " used least recently (`closed` lists it).  Page with next/prev."
)
READ_HELP = (
    "Read lines `start`..`end` of a file once, without keeping them in your"
    " context.  Use open to keep a window."
)
PAGE_HELP = "Move an open file's window by its height ({}); stops at the file's edge."
NEXT_HELP = PAGE_HELP.format("forward")
PREV_HELP = PAGE_HELP.format("back")
CLOSE_HELP = "Close one open file (folder and path), or all of them (neither)."
GREP_HELP = (
    "Find the lines of an attached folder's files matching a regular"
    " expression (or literal text).  Narrow with `path` (one file) or"
    " `include` (a glob); `context` adds lines around each match.  A pattern"
    " that would backtrack for long is refused: keep patterns simple."
)
SEARCH_HELP = (
    "Search attached folders by meaning and keywords.  Each result cites"
    " `folder/path:start-end` with a snippet; open the file at `start_line`"
    " to read around it."
)
OPEN_FILES_HELP = (
    "Open several files at once: each `file_name` is '<folder>/<path>',"
    " `offset` lines skipped (0-based) and `length` lines shown."
    " `close_all_others` closes every other open file first. " + OPEN_HELP
)
GREP_FILES_HELP = (
    "grep over every attached folder; `include` is a glob over"
    " '<folder>/<path>', `offset` skips matches already seen. " + GREP_HELP
)
GREP_FILES_PAGE = 50


def _file(actor: Actor, ref: FileRefIn) -> FolderFile:
    folder = selectors.folder_get_by_name_for_actor(actor=actor, name=ref.folder)
    return selectors.file_get(folder=folder, path=ref.path)


def window_payload(window: windows.Window) -> dict[str, Any]:
    """A window as ``WindowOut``."""
    return {
        "folder": window.file.folder.name,
        "path": window.file.path,
        "start_line": window.start_line,
        "end_line": window.end_line,
        "total_lines": window.total_lines,
        "content": window.content,
        "closed": window.closed,
    }


def files_open_tool(*, actor: Actor, args: FileOpenIn) -> dict[str, Any]:
    file = _file(actor, args)
    agent = permissions.tool_agent(actor=actor)
    return window_payload(
        windows.file_open(agent=agent, file=file, line=args.line, lines=args.lines)
    )


def files_read_tool(*, actor: Actor, args: FileReadIn) -> dict[str, Any]:
    file = _file(actor, args)
    return window_payload(
        windows.file_read(actor=actor, file=file, start=args.start, end=args.end)
    )


def _page(actor: Actor, args: FileRefIn, *, forward: bool) -> dict[str, Any]:
    file = _file(actor, args)
    agent = permissions.tool_agent(actor=actor)
    return window_payload(windows.file_page(agent=agent, file=file, forward=forward))


def files_next_tool(*, actor: Actor, args: FileRefIn) -> dict[str, Any]:
    return _page(actor, args, forward=True)


def files_prev_tool(*, actor: Actor, args: FileRefIn) -> dict[str, Any]:
    return _page(actor, args, forward=False)


def files_close_tool(*, actor: Actor, args: FileCloseIn) -> dict[str, Any]:
    agent = permissions.tool_agent(actor=actor)
    if (args.folder is None) != (args.path is None):
        raise InvalidInput("give both folder and path, or neither to close all")
    file = None
    if args.folder is not None:
        file = _file(actor, FileRefIn(folder=args.folder, path=args.path or ""))
    return {"closed": windows.file_close(agent=agent, file=file)}


def files_list_open(*, actor: Actor) -> list[dict[str, Any]]:
    """The agent's open windows as ``WindowOut``, most recently used first."""
    agent = permissions.tool_agent(actor=actor)
    return [window_payload(w) for w in windows.file_windows_for_agent(agent=agent)]


def files_grep_tool(*, actor: Actor, args: GrepIn) -> GrepResult:
    folder = selectors.folder_get_by_name_for_actor(actor=actor, name=args.folder)
    return folder_grep(folder=folder, **args.dict(exclude={"folder"}))


def files_search_tool(*, actor: Actor, args: FileSearchIn) -> dict[str, Any]:
    if args.folder is not None:
        folders = [
            selectors.folder_get_by_name_for_actor(actor=actor, name=args.folder)
        ]
    else:
        folders = list(selectors.folder_list_for_actor(actor=actor))
    outcome = folder_search(
        folders=folders,
        query=args.query,
        mode=args.mode,
        limit=args.limit,
        path=args.path,
    )
    return {
        "results": [passage_hit_payload(h) for h in outcome.hits],
        "mode_requested": outcome.mode_requested,
        "mode_used": outcome.mode_used,
        "degraded": outcome.degraded,
        "quantised": outcome.quantised,
    }


def open_files_tool(*, actor: Actor, args: LettaOpenFilesIn) -> dict[str, Any]:
    agent = permissions.tool_agent(actor=actor)
    if args.close_all_others:
        windows.file_close(agent=agent)
    opened = []
    for req in args.file_requests:
        folder_name, _, path = req.file_name.partition("/")
        # Not validated again: a part past a field's bound names no folder
        # or file, which the lookup answers with a 404.
        file = _file(actor, FileRefIn.model_construct(folder=folder_name, path=path))
        opened.append(
            windows.file_open(
                agent=agent, file=file, line=(req.offset or 0) + 1, lines=req.length
            )
        )
    closed = sorted({p for w in opened for p in w.closed})
    message = f"opened {len(opened)} file(s)"
    if closed:
        message += f"; closed {', '.join(closed)} (least recently used)"
    return {"message": message, "windows": [window_payload(w) for w in opened]}


def grep_files_tool(*, actor: Actor, args: LettaGrepIn) -> dict[str, Any]:
    want = args.offset + GREP_FILES_PAGE
    merged: dict[str, Any] = {
        "matches": [],
        "files_searched": 0,
        "files_matched": 0,
        "truncated": False,
        "elapsed_ms": 0.0,
    }
    for folder in selectors.folder_list_for_actor(actor=actor):
        result = folder_grep(
            folder=folder,
            pattern=args.pattern,
            include=args.include,
            qualified=True,
            context=args.context_lines,
            limit=min(want - len(merged["matches"]) + 1, 1000),
        )
        for match in result.matches:
            match.path = f"{folder.name}/{match.path}"
        merged["matches"] += result.matches
        merged["files_searched"] += result.files_searched
        merged["files_matched"] += result.files_matched
        merged["elapsed_ms"] += result.elapsed_ms
        if len(merged["matches"]) > want:
            break
    merged["truncated"] = len(merged["matches"]) > want
    merged["matches"] = merged["matches"][args.offset : want]
    return merged


def semantic_search_files_tool(
    *, actor: Actor, args: LettaSearchFilesIn
) -> dict[str, Any]:
    return files_search_tool(
        actor=actor, args=FileSearchIn(query=args.query, limit=args.limit)
    )


def _file_tool(name: str, path: str = "", **declared: Any) -> AgentTool:
    # The file tools document the same errors, under the folders tag.
    return AgentTool(
        name=name,
        path=path,
        errors=(403, 404, 409),
        tags=("folders",),
        **declared,
    )


tool_register(
    _file_tool(
        "files_open",
        "/tools/files/open",
        description=OPEN_HELP,
        args=FileOpenIn,
        out=WindowOut,
        run=files_open_tool,
        writes=True,
        summary="open",
    ),
    _file_tool(
        "files_read",
        "/tools/files/read",
        description=READ_HELP,
        args=FileReadIn,
        out=WindowOut,
        run=files_read_tool,
        writes=False,
        summary="read",
    ),
    _file_tool(
        "files_next",
        "/tools/files/next",
        description=NEXT_HELP,
        args=FileRefIn,
        out=WindowOut,
        run=files_next_tool,
        writes=True,
        summary="next",
    ),
    _file_tool(
        "files_prev",
        "/tools/files/prev",
        description=PREV_HELP,
        args=FileRefIn,
        out=WindowOut,
        run=files_prev_tool,
        writes=True,
        summary="prev",
    ),
    _file_tool(
        "files_close",
        "/tools/files/close",
        description=CLOSE_HELP,
        args=FileCloseIn,
        out=CloseOut,
        run=files_close_tool,
        writes=True,
        summary="close",
    ),
    _file_tool(
        "files_grep",
        "/tools/files/grep",
        description=GREP_HELP,
        args=GrepIn,
        out=GrepOut,
        run=files_grep_tool,
        writes=False,
        summary="grep",
    ),
    _file_tool(
        "files_search",
        "/tools/files/search",
        description=SEARCH_HELP,
        args=FileSearchIn,
        out=FileSearchOut,
        run=files_search_tool,
        writes=False,
        summary="search files",
    ),
    _file_tool(
        "open_files",
        description=OPEN_FILES_HELP,
        args=LettaOpenFilesIn,
        out=LettaOpenFilesOut,
        run=open_files_tool,
        writes=True,
        summary="open_files (Letta)",
    ),
    _file_tool(
        "grep_files",
        description=GREP_FILES_HELP,
        args=LettaGrepIn,
        out=GrepOut,
        run=grep_files_tool,
        writes=False,
        summary="grep_files (Letta)",
    ),
    _file_tool(
        "semantic_search_files",
        description=SEARCH_HELP,
        args=LettaSearchFilesIn,
        out=FileSearchOut,
        run=semantic_search_files_tool,
        writes=False,
        summary="semantic_search_files (Letta)",
    ),
)
