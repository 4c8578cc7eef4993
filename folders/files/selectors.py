"""Reads of folders and files, each narrowed by ``folders.permissions``."""

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from folders.files.models import (
    FilePassage,
    Folder,
    FolderAttachment,
    FolderFile,
    IndexState,
)
from folders.permissions import Right, folder_require, folders_visible
from memory.models import EmbeddingState
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import NotFound


def folder_list_for_actor(
    *, actor: Actor, constellation_id: int | None = None
) -> QuerySet[Folder]:
    qs = folders_visible(actor=actor)
    if constellation_id is not None:
        qs = qs.filter(constellation_id=constellation_id)
    return qs.order_by("constellation_id", "name")


def folder_get_for_actor(
    *, actor: Actor, folder_id: int, right: Right = Right.READ
) -> Folder:
    folder = folders_visible(actor=actor).filter(pk=folder_id).first()
    if folder is None:
        raise NotFound(f"folder {folder_id} does not exist")
    folder_require(actor=actor, folder=folder, right=right)
    return folder


def folder_get_by_name_for_actor(
    *, actor: Actor, name: str, right: Right = Right.READ
) -> Folder:
    folder = folders_visible(actor=actor).filter(name=name).first()
    if folder is None:
        raise NotFound(f"no folder named {name!r} is attached to you")
    folder_require(actor=actor, folder=folder, right=right)
    return folder


def file_list(*, folder: Folder) -> QuerySet[FolderFile]:
    return folder.files.defer("text").order_by("path")


def file_get(*, folder: Folder, path: str | None = None, file_id: int | None = None):
    """A file of ``folder`` (already permission-checked) by path or id."""
    qs = folder.files.select_related("folder")
    found = (
        qs.filter(pk=file_id).first()
        if file_id is not None
        else qs.filter(path=path).first()
    )
    if found is None:
        what = f"file {file_id}" if file_id is not None else f"file {path!r}"
        raise NotFound(f"{what} does not exist in folder {folder.name!r}")
    return found


def file_get_for_actor(*, actor: Actor, file_id: int, right: Right = Right.READ):
    file = FolderFile.objects.select_related("folder").filter(pk=file_id).first()
    if (
        file is None
        or not folders_visible(actor=actor).filter(pk=file.folder_id).exists()
    ):
        raise NotFound(f"file {file_id} does not exist")
    folder_require(actor=actor, folder=file.folder, right=right)
    return file


def attachment_list(*, folder: Folder) -> QuerySet[FolderAttachment]:
    return folder.attachments.select_related("agent").order_by("agent__name")


@dataclass(frozen=True)
class AttachedFolder:
    folder: Folder
    access: str


def folders_attached_to_agent(*, agent_id: int) -> list[AttachedFolder]:
    return [
        AttachedFolder(a.folder, a.access)
        for a in FolderAttachment.objects.select_related("folder")
        .filter(agent_id=agent_id)
        .order_by("folder__name")
    ]


def folder_counts(*, folder_id: int) -> dict[str, int]:
    """files, indexed (ready), failed, passages, pending (passages without a
    vector), embedded."""
    files = FolderFile.objects.filter(folder_id=folder_id).aggregate(
        files=Count("id"),
        indexed=Count("id", filter=Q(index_state=IndexState.READY)),
        failed=Count("id", filter=Q(index_state=IndexState.FAILED)),
        passages=Sum("passage_count", default=0),
        embedded=Sum("embedded_count", default=0),
    )
    files["pending"] = FilePassage.objects.filter(
        folder_id=folder_id, embedding_state=EmbeddingState.PENDING
    ).count()
    return files


def file_progress(*, file_ids: list[int]) -> list[dict[str, Any]]:
    return [
        {
            "id": f.pk,
            "path": f.path,
            "state": f.index_state,
            "error": f.index_error,
            "passages": f.passage_count,
            "embedded": f.embedded_count,
            "percent": file_percent(f),
        }
        for f in FolderFile.objects.filter(pk__in=file_ids).only(
            "path", "index_state", "index_error", "passage_count", "embedded_count"
        )
    ]


def file_percent(file: FolderFile) -> int:
    """How far indexing of ``file`` has come, 0-100 (ready is 100)."""
    if file.index_state == IndexState.READY:
        return 100
    if file.index_state in (IndexState.PENDING, IndexState.FAILED):
        return 0
    # Chunked and keyword-indexed is the first tenth; vectors the rest.
    if not file.passage_count:
        return 10
    return 10 + int(90 * file.embedded_count / file.passage_count)
