"""Folders API and the agents' file tools (thin: selectors and services).

Folders: humans of the constellation create them, attach them to agents
and manage files; agents see the folders attached to them.  File tools
(agent token): open/read/next/prev/close windows of files in the agent's
context, grep and semantic search, under v1 names (``/tools/files/...``)
and Letta's (``open_files``, ``grep_files``, ``semantic_search_files``).
"""

from typing import Any

from django.http import HttpRequest
from ninja import File, Router, UploadedFile
from ninja.responses import Status

from coordination.apitypes import Id, error_responses
from coordination.auth import request_actor
from coordination.errors import InvalidInput
from folders import permissions
from folders.files import selectors, services
from folders.files.models import Folder, FolderFile
from folders.permissions import Right
from folders.schemas import (
    AttachmentIn,
    AttachmentOut,
    CloseOut,
    FileChangeOut,
    FileCloseIn,
    FileDetailOut,
    FileOpenIn,
    FileOut,
    FileReadIn,
    FileRefIn,
    FileSearchIn,
    FileSearchOut,
    FileWriteIn,
    FolderIn,
    FolderOut,
    FolderPatchIn,
    GrepIn,
    GrepOut,
    LettaGrepIn,
    LettaOpenFilesIn,
    LettaOpenFilesOut,
    LettaSearchFilesIn,
    RescanOut,
    UploadOut,
    WindowOut,
)
from folders.tools import windows
from folders.tools.grep import folder_grep
from folders.tools.search import folder_search, passage_hit_payload

router = Router(tags=["folders"])


def _folder_out(folder: Folder) -> dict[str, Any]:
    return {
        "id": folder.pk,
        "constellation_id": folder.constellation_id,
        "name": folder.name,
        "description": folder.description,
        "kind": folder.kind,
        "root_path": folder.root_path,
        "embedding_model": folder.embedding_model,
        "created_at": folder.created_at,
        "scanned_at": folder.scanned_at,
        "counts": selectors.folder_counts(folder_id=folder.pk),
    }


@router.get(
    "/folders",
    response={200: list[FolderOut], **error_responses(403, 404, body=False)},
    summary="List folders",
)
def list_folders(request: HttpRequest, constellation_id: Id | None = None) -> Any:
    actor = request_actor(request)
    return [
        _folder_out(f)
        for f in selectors.folder_list_for_actor(
            actor=actor, constellation_id=constellation_id
        )
    ]


@router.post(
    "/folders",
    response={201: FolderOut, **error_responses(403, 404, 409, body=True)},
    summary="Create a folder",
)
def create_folder(request: HttpRequest, payload: FolderIn) -> Any:
    folder = services.folder_create(actor=request_actor(request), **payload.dict())
    return Status(201, _folder_out(folder))


@router.get(
    "/folders/{folder_id}",
    response={200: FolderOut, **error_responses(403, 404, body=False)},
    summary="A folder",
)
def get_folder(request: HttpRequest, folder_id: Id) -> Any:
    actor = request_actor(request)
    return _folder_out(selectors.folder_get_for_actor(actor=actor, folder_id=folder_id))


@router.patch(
    "/folders/{folder_id}",
    response={200: FolderOut, **error_responses(403, 404, 409, body=True)},
    summary="Describe",
)
def describe_folder(request: HttpRequest, folder_id: Id, payload: FolderPatchIn) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    services.folder_update(actor=actor, folder=folder, description=payload.description)
    return _folder_out(folder)


@router.delete(
    "/folders/{folder_id}",
    response={204: None, **error_responses(403, 404, 409, body=False)},
    summary="Delete",
)
def delete_folder(request: HttpRequest, folder_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    services.folder_delete(actor=actor, folder=folder)
    return Status(204, None)


@router.get(
    "/folders/{folder_id}/attachments",
    response={200: list[AttachmentOut], **error_responses(403, 404, body=False)},
)
def list_attachments(request: HttpRequest, folder_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    return [_attachment_out(a) for a in selectors.attachment_list(folder=folder)]


def _attachment_out(a: Any) -> dict[str, Any]:
    return {
        "agent_id": a.agent_id,
        "agent": a.agent.name,
        "access": a.access,
        "attached_at": a.attached_at,
    }


@router.put(
    "/folders/{folder_id}/attachments/{agent_id}",
    response={200: AttachmentOut, **error_responses(403, 404, 409, body=True)},
    summary="Attach to an agent",
)
def attach_folder(
    request: HttpRequest, folder_id: Id, agent_id: Id, payload: AttachmentIn
) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    attachment = services.folder_attach(
        actor=actor, folder=folder, agent_id=agent_id, access=payload.access
    )
    return _attachment_out(attachment)


@router.delete(
    "/folders/{folder_id}/attachments/{agent_id}",
    response={204: None, **error_responses(403, 404, 409, body=False)},
)
def detach_folder(request: HttpRequest, folder_id: Id, agent_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.MANAGE
    )
    services.folder_detach(actor=actor, folder=folder, agent_id=agent_id)
    return Status(204, None)


@router.get(
    "/folders/{folder_id}/files",
    response={200: list[FileOut], **error_responses(403, 404, body=False)},
    summary="Files",
)
def list_files(request: HttpRequest, folder_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(actor=actor, folder_id=folder_id)
    return list(selectors.file_list(folder=folder))


@router.post(
    "/folders/{folder_id}/files",
    response={201: UploadOut, **error_responses(403, 404, 409, body=True)},
    summary="Upload files",
    description=(
        "Multipart upload of one or more files (field `files`); a `.zip` is"
        " expanded with its directory tree.  Identical content is a no-op."
    ),
)
def upload_files(
    request: HttpRequest, folder_id: Id, files: File[list[UploadedFile]]
) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    uploads = [(f.name or "", f.read()) for f in files]
    changes = services.files_upload(actor=actor, folder=folder, uploads=uploads)
    return Status(201, {"changes": [_change_out(c) for c in changes]})


def _change_out(change: services.FileChange) -> FileChangeOut:
    return FileChangeOut(
        path=change.path,
        status=change.status,
        file_id=change.file.pk if change.file else None,
    )


@router.post(
    "/folders/{folder_id}/files/write",
    response={200: FileChangeOut, **error_responses(403, 404, 409, body=True)},
    summary="Write a text file",
)
def write_file(request: HttpRequest, folder_id: Id, payload: FileWriteIn) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    return _change_out(
        services.file_write(
            actor=actor, folder=folder, path=payload.path, text=payload.content
        )
    )


@router.get(
    "/folders/{folder_id}/files/{file_id}",
    response={200: FileDetailOut, **error_responses(403, 404, body=False)},
)
def get_file(request: HttpRequest, folder_id: Id, file_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(actor=actor, folder_id=folder_id)
    return selectors.file_get(folder=folder, file_id=file_id)


@router.delete(
    "/folders/{folder_id}/files/{file_id}",
    response={204: None, **error_responses(403, 404, 409, body=False)},
)
def delete_file(request: HttpRequest, folder_id: Id, file_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    services.file_delete(
        actor=actor, file=selectors.file_get(folder=folder, file_id=file_id)
    )
    return Status(204, None)


@router.post(
    "/folders/{folder_id}/rescan",
    response={200: RescanOut, **error_responses(403, 404, 409, body=False)},
    summary="Rescan",
)
def rescan_folder(request: HttpRequest, folder_id: Id) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    return services.folder_rescan(actor=actor, folder=folder)


# --- file tools ----------------------------------------------------------------

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


def _tool_file(request: HttpRequest, ref: FileRefIn) -> tuple[Any, FolderFile]:
    actor = request_actor(request)
    folder = selectors.folder_get_by_name_for_actor(actor=actor, name=ref.folder)
    return actor, selectors.file_get(folder=folder, path=ref.path)


def _window_out(window: windows.Window) -> dict[str, Any]:
    return {
        "folder": window.file.folder.name,
        "path": window.file.path,
        "start_line": window.start_line,
        "end_line": window.end_line,
        "total_lines": window.total_lines,
        "content": window.content,
        "closed": window.closed,
    }


@router.post(
    "/tools/files/open",
    response={200: WindowOut, **error_responses(403, 404, 409, body=True)},
    summary="open",
    description=OPEN_HELP,
    operation_id="files_open",
)
def open_file(request: HttpRequest, payload: FileOpenIn) -> Any:
    actor, file = _tool_file(request, payload)
    agent = permissions.tool_agent(actor=actor)
    return _window_out(
        windows.file_open(
            agent=agent, file=file, line=payload.line, lines=payload.lines
        )
    )


@router.post(
    "/tools/files/read",
    response={200: WindowOut, **error_responses(403, 404, 409, body=True)},
    summary="read",
    description=READ_HELP,
    operation_id="files_read",
)
def read_file(request: HttpRequest, payload: FileReadIn) -> Any:
    actor, file = _tool_file(request, payload)
    return _window_out(
        windows.file_read(actor=actor, file=file, start=payload.start, end=payload.end)
    )


@router.post(
    "/tools/files/next",
    response={200: WindowOut, **error_responses(403, 404, 409, body=True)},
    summary="next",
    description=PAGE_HELP.format("forward"),
    operation_id="files_next",
)
def next_page(request: HttpRequest, payload: FileRefIn) -> Any:
    actor, file = _tool_file(request, payload)
    agent = permissions.tool_agent(actor=actor)
    return _window_out(windows.file_page(agent=agent, file=file, forward=True))


@router.post(
    "/tools/files/prev",
    response={200: WindowOut, **error_responses(403, 404, 409, body=True)},
    summary="prev",
    description=PAGE_HELP.format("back"),
    operation_id="files_prev",
)
def prev_page(request: HttpRequest, payload: FileRefIn) -> Any:
    actor, file = _tool_file(request, payload)
    agent = permissions.tool_agent(actor=actor)
    return _window_out(windows.file_page(agent=agent, file=file, forward=False))


@router.post(
    "/tools/files/close",
    response={200: CloseOut, **error_responses(403, 404, 409, body=True)},
    summary="close",
    description=CLOSE_HELP,
    operation_id="files_close",
)
def close_file(request: HttpRequest, payload: FileCloseIn) -> Any:
    actor = request_actor(request)
    agent = permissions.tool_agent(actor=actor)
    if (payload.folder is None) != (payload.path is None):
        raise InvalidInput("give both folder and path, or neither to close all")
    file = None
    if payload.folder is not None:
        _actor, file = _tool_file(
            request, FileRefIn(folder=payload.folder, path=payload.path or "")
        )
    return {"closed": windows.file_close(agent=agent, file=file)}


@router.get(
    "/tools/files/open",
    response={200: list[WindowOut], **error_responses(403, 404, body=False)},
    summary="open files",
    description="The files open in your context, most recently used first.",
    operation_id="files_list_open",
)
def list_open_files(request: HttpRequest) -> Any:
    agent = permissions.tool_agent(actor=request_actor(request))
    return [_window_out(w) for w in windows.file_windows_for_agent(agent=agent)]


@router.post(
    "/tools/files/grep",
    response={200: GrepOut, **error_responses(403, 404, 409, body=True)},
    summary="grep",
    description=GREP_HELP,
    operation_id="files_grep",
)
def grep_files_v1(request: HttpRequest, payload: GrepIn) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_by_name_for_actor(actor=actor, name=payload.folder)
    return folder_grep(folder=folder, **payload.dict(exclude={"folder"}))


@router.post(
    "/tools/files/search",
    response={200: FileSearchOut, **error_responses(403, 404, 409, body=True)},
    summary="search files",
    description=SEARCH_HELP,
    operation_id="files_search",
)
def search_files(request: HttpRequest, payload: FileSearchIn) -> Any:
    actor = request_actor(request)
    if payload.folder is not None:
        folders = [
            selectors.folder_get_by_name_for_actor(actor=actor, name=payload.folder)
        ]
    else:
        folders = list(selectors.folder_list_for_actor(actor=actor))
    outcome = folder_search(
        folders=folders,
        query=payload.query,
        mode=payload.mode,
        limit=payload.limit,
        path=payload.path,
    )
    return {
        "results": [passage_hit_payload(h) for h in outcome.hits],
        "mode_requested": outcome.mode_requested,
        "mode_used": outcome.mode_used,
        "degraded": outcome.degraded,
    }


# --- Letta-compatible names ------------------------------------------------------


@router.post(
    "/tools/open_files",
    response={200: LettaOpenFilesOut, **error_responses(403, 404, 409, body=True)},
    summary="open_files (Letta)",
    description=(
        "Open several files at once: each `file_name` is '<folder>/<path>',"
        " `offset` lines skipped (0-based) and `length` lines shown."
        " `close_all_others` closes every other open file first. " + OPEN_HELP
    ),
    operation_id="open_files",
)
def open_files(request: HttpRequest, payload: LettaOpenFilesIn) -> Any:
    actor = request_actor(request)
    agent = permissions.tool_agent(actor=actor)
    if payload.close_all_others:
        windows.file_close(agent=agent)
    opened = []
    for req in payload.file_requests:
        folder_name, _, path = req.file_name.partition("/")
        _actor, file = _tool_file(request, FileRefIn(folder=folder_name, path=path))
        opened.append(
            windows.file_open(
                agent=agent,
                file=file,
                line=(req.offset or 0) + 1,
                lines=req.length,
            )
        )
    closed = sorted({p for w in opened for p in w.closed})
    message = f"opened {len(opened)} file(s)"
    if closed:
        message += f"; closed {', '.join(closed)} (least recently used)"
    return {"message": message, "windows": [_window_out(w) for w in opened]}


@router.post(
    "/tools/grep_files",
    response={200: GrepOut, **error_responses(403, 404, 409, body=True)},
    summary="grep_files (Letta)",
    description=(
        "grep over every attached folder; `include` is a glob over"
        " '<folder>/<path>', `offset` skips matches already seen. " + GREP_HELP
    ),
    operation_id="grep_files",
)
def grep_files(request: HttpRequest, payload: LettaGrepIn) -> Any:
    actor = request_actor(request)
    page = 50
    want = payload.offset + page
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
            pattern=payload.pattern,
            include=payload.include,
            qualified=True,
            context=payload.context_lines,
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
    merged["matches"] = merged["matches"][payload.offset : want]
    return merged


@router.post(
    "/tools/semantic_search_files",
    response={200: FileSearchOut, **error_responses(403, 404, 409, body=True)},
    summary="semantic_search_files (Letta)",
    description=SEARCH_HELP,
    operation_id="semantic_search_files",
)
def semantic_search_files(request: HttpRequest, payload: LettaSearchFilesIn) -> Any:
    return search_files(request, FileSearchIn(query=payload.query, limit=payload.limit))
