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


def folder_counts(*, folder_id: int) -> dict[str, Any]:
    """files, indexed (ready), failed, passages, pending (passages without a
    vector), embedded; and the state a person reads, the same as the files'
    rows: ``waiting`` (files not ready yet), ``percent`` (the files' mean)
    and ``summary``."""
    files: dict[str, Any] = FolderFile.objects.filter(folder_id=folder_id).aggregate(
        files=Count("id"),
        indexed=Count("id", filter=Q(index_state=IndexState.READY)),
        failed=Count("id", filter=Q(index_state=IndexState.FAILED)),
        passages=Sum("passage_count", default=0),
        embedded=Sum("embedded_count", default=0),
    )
    files["pending"] = FilePassage.objects.filter(
        folder_id=folder_id, embedding_state=EmbeddingState.PENDING
    ).count()
    percents = [
        _percent(state, passages, embedded)
        for state, passages, embedded in FolderFile.objects.filter(
            folder_id=folder_id
        ).values_list("index_state", "passage_count", "embedded_count")
    ]
    files["waiting"] = sum(1 for p in percents if p < 100) - files["failed"]
    files["percent"] = sum(percents) // len(percents) if percents else 100
    files["summary"] = _summary(files)
    return files


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary(counts: dict[str, Any]) -> str:
    if not counts["files"]:
        return "no files yet"
    parts = [_plural(counts["files"], "file"), _plural(counts["passages"], "passage")]
    if counts["waiting"]:
        parts.append(f"{counts['waiting']} not ready yet")
    if counts["failed"]:
        parts.append(f"{counts['failed']} failed")
    if not counts["waiting"] and not counts["failed"]:
        parts.append("ready")
    return " · ".join(parts)


# What a file's row says of its indexing, as the folder's summary counts it.
STATE_WORDS = {
    IndexState.PENDING: "waiting",
    IndexState.INDEXING: "indexing",
    IndexState.READY: "ready",
    IndexState.FAILED: "failed",
}


def file_state_word(file: FolderFile) -> str:
    return STATE_WORDS.get(IndexState(file.index_state), file.index_state)


def file_progress(*, file_ids: list[int]) -> list[dict[str, Any]]:
    return [
        {
            "id": f.pk,
            "path": f.path,
            "state": f.index_state,
            "label": file_state_word(f),
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
    return _percent(file.index_state, file.passage_count, file.embedded_count)


def _percent(state: str, passages: int, embedded: int) -> int:
    if state == IndexState.READY:
        return 100
    if state in (IndexState.PENDING, IndexState.FAILED):
        return 0
    # Chunked and keyword-indexed is the first tenth; vectors the rest.
    if not passages:
        return 10
    return 10 + int(90 * embedded / passages)
