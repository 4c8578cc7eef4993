"""Folders API (thin: selectors and services).

Folders: humans of the constellation create them, attach them to agents
and manage files; agents see the folders attached to them.  The agents'
file tools (``POST /tools/files/...`` and Letta's ``open_files``,
``grep_files``, ``semantic_search_files``) are declared in
``folders.tools.agent``; here is only the listing of an agent's open files.
"""

from typing import Annotated, Any

from django.conf import settings
from django.http import HttpRequest
from ninja import File, Router, UploadedFile
from ninja.decorators import decorate_view
from ninja.responses import Status

from folders.files import selectors, services
from folders.files.ingest import MAX_PATH_CHARS, MAX_PATH_DEPTH
from folders.files.models import Folder
from folders.permissions import Right
from folders.schemas import (
    AttachmentIn,
    FileChangeOut,
    FileDetailOut,
    FileOut,
    FileWriteIn,
    FolderAttachmentOut,
    FolderIn,
    FolderOut,
    FolderPatchIn,
    RescanOut,
    UploadOut,
    WindowOut,
)
from folders.tools import agent
from folders.uploads import keep_upload_paths, upload_path
from pattern_site.kernel.apitypes import Id, error_responses
from pattern_site.kernel.auth import request_actor

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
    response={200: list[FolderAttachmentOut], **error_responses(403, 404, body=False)},
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
    response={200: FolderAttachmentOut, **error_responses(403, 404, 409, body=True)},
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
        " expanded with its directory tree.  A part's file name may be a"
        " relative path (`docs/specs/a.md`, as a browser sends a directory):"
        " the file is stored there.  A path with `..`, a leading `/`,"
        f" backslashes, control characters, more than {MAX_PATH_DEPTH} levels"
        f" or over {MAX_PATH_CHARS} characters refuses the whole upload (422),"
        " nothing stored."
        "  Identical content is a no-op."
    ),
)
@decorate_view(keep_upload_paths)
def upload_files(
    request: HttpRequest,
    folder_id: Id,
    files: Annotated[
        list[UploadedFile],
        File(max_length=settings.DATA_UPLOAD_MAX_NUMBER_FILES),
    ],
) -> Any:
    actor = request_actor(request)
    folder = selectors.folder_get_for_actor(
        actor=actor, folder_id=folder_id, right=Right.WRITE
    )
    uploads = [(upload_path(f), f.read()) for f in files]
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


# --- open files ------------------------------------------------------------------


@router.get(
    "/tools/files/open",
    response={200: list[WindowOut], **error_responses(403, 404, body=False)},
    summary="open files",
    description="The files open in your context, most recently used first.",
    operation_id="files_list_open",
)
def list_open_files(request: HttpRequest) -> Any:
    return agent.files_list_open(actor=request_actor(request))
