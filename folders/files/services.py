"""Writes of folders, files and passages.

Every service checks the actor's right through ``folders.permissions`` (the
selectors that fetch the folder do), validates all its input before storing
anything, and runs in one transaction; indexing and progress messages
follow the commit.  A file is stored once per content: uploading the same
bytes again (same SHA-256) changes nothing.  A changed file is chunked again
and only passages whose text is new get a vector; passages whose text
survived keep theirs (moved to their new lines).
"""

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from folders import tasks
from folders.files.broadcast import folder_progress_later
from folders.files.chunking import chunk_lines
from folders.files.index import FILE_PASSAGE_INDEX, FILE_PASSAGE_KIND
from folders.files.ingest import (
    Document,
    document_from_bytes,
    is_zip,
    local_read,
    local_root_check,
    local_walk,
    zip_members,
)
from folders.files.models import (
    FilePassage,
    Folder,
    FolderAccess,
    FolderAttachment,
    FolderFile,
    FolderKind,
    IndexState,
)
from folders.permissions import Right, folder_create_require, folder_require
from memory.models import EmbeddingState
from memory.search.index import index_delete, index_put_texts
from memory.search.pipeline import embedding_schedule
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import (
    agent_list_for_actor,
    constellation_get_for_actor,
)
from pattern_site.kernel.errors import (
    ApplicationError,
    Conflict,
    InvalidInput,
    LimitExceeded,
    NotFound,
)

logger = logging.getLogger(__name__)

ChangeStatus = Literal["created", "updated", "unchanged", "deleted"]


@dataclass
class FileChange:
    path: str
    status: ChangeStatus
    file: FolderFile | None = None


def _full_clean(obj: object, **kwargs: object) -> None:
    try:
        obj.full_clean(**kwargs)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise InvalidInput(
            "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
        ) from None


# --- folders and attachments -------------------------------------------------


@transaction.atomic
def folder_create(
    *,
    actor: Actor,
    constellation_id: int,
    name: str,
    description: str = "",
    kind: str = FolderKind.VIRTUAL,
    root_path: str = "",
) -> Folder:
    folder_create_require(actor=actor)
    constellation = constellation_get_for_actor(
        actor=actor, constellation_id=constellation_id
    )
    name = name.strip()
    if kind not in FolderKind.values:
        raise InvalidInput(f"folder kind {kind!r}; one of {', '.join(FolderKind)}")
    if kind == FolderKind.LOCAL:
        root_path = local_root_check(root_path)
    elif root_path:
        raise InvalidInput("only local folders have a directory path")
    if Folder.objects.filter(constellation=constellation, name=name).exists():
        raise Conflict(f"constellation {constellation.name} already has {name!r}")
    folder = Folder(
        constellation=constellation,
        name=name,
        description=description.strip(),
        kind=kind,
        root_path=root_path,
    )
    _full_clean(folder, validate_constraints=False)
    folder.save()
    return folder


@transaction.atomic
def folder_update(*, actor: Actor, folder: Folder, description: str) -> Folder:
    folder_require(actor=actor, folder=folder, right=Right.MANAGE)
    folder.description = description.strip()
    _full_clean(folder, validate_constraints=False)
    folder.save(update_fields=["description"])
    return folder


@transaction.atomic
def folder_delete(*, actor: Actor, folder: Folder) -> None:
    folder_require(actor=actor, folder=folder, right=Right.MANAGE)
    passage_ids = list(
        FilePassage.objects.filter(folder=folder).values_list("pk", flat=True)
    )
    index_delete(FILE_PASSAGE_INDEX, row_ids=passage_ids)
    folder.delete()


@transaction.atomic
def folder_attach(
    *, actor: Actor, folder: Folder, agent_id: int, access: str
) -> FolderAttachment:
    folder_require(actor=actor, folder=folder, right=Right.MANAGE)
    if access not in FolderAccess.values:
        raise InvalidInput(f"access {access!r}; one of {', '.join(FolderAccess)}")
    agent = (
        agent_list_for_actor(actor=actor, constellation_id=folder.constellation_id)
        .filter(pk=agent_id)
        .first()
    )
    if agent is None:
        raise NotFound(
            f"agent {agent_id} does not exist in constellation"
            f" {folder.constellation.name}"
        )
    attachment, _created = FolderAttachment.objects.update_or_create(
        folder=folder, agent=agent, defaults={"access": access}
    )
    return attachment


@transaction.atomic
def folder_detach(*, actor: Actor, folder: Folder, agent_id: int) -> None:
    folder_require(actor=actor, folder=folder, right=Right.MANAGE)
    deleted, _ = FolderAttachment.objects.filter(
        folder=folder, agent_id=agent_id
    ).delete()
    if not deleted:
        raise NotFound(f"folder {folder.name!r} is not attached to agent {agent_id}")
    # The detached agent's windows on this folder's files close with it.
    from folders.files.models import OpenFile

    OpenFile.objects.filter(agent_id=agent_id, file__folder=folder).delete()


# --- files ----------------------------------------------------------------------


def documents_from_uploads(
    *, folder: Folder, uploads: Sequence[tuple[str, bytes]]
) -> list[Document]:
    """Every upload checked (zips expanded); raises on the first bad one."""
    if not uploads:
        raise InvalidInput("no files given; upload one or more files or a zip")
    budget = settings.FOLDER_MAX_BYTES
    documents: dict[str, Document] = {}
    for name, data in uploads:
        members = (
            zip_members(data, budget=budget) if is_zip(name, data) else [(name, data)]
        )
        for path, content in members:
            doc = document_from_bytes(path, content)
            documents[doc.path] = doc
    return list(documents.values())


@transaction.atomic
def files_upload(
    *, actor: Actor, folder: Folder, uploads: Sequence[tuple[str, bytes]]
) -> list[FileChange]:
    """Store uploaded files (and zip members) in a virtual folder."""
    folder_require(actor=actor, folder=folder, right=Right.WRITE)
    if folder.kind != FolderKind.VIRTUAL:
        raise InvalidInput(
            f"folder {folder.name!r} is a local directory; change its files on"
            " disk and rescan it"
        )
    documents = documents_from_uploads(folder=folder, uploads=uploads)
    _check_folder_size(folder, documents)
    return [_file_put(folder, doc) for doc in documents]


@transaction.atomic
def file_write(*, actor: Actor, folder: Folder, path: str, text: str) -> FileChange:
    """Create or replace one text file of a virtual folder."""
    folder_require(actor=actor, folder=folder, right=Right.WRITE)
    if folder.kind != FolderKind.VIRTUAL:
        raise InvalidInput(f"folder {folder.name!r} is a local directory; read-only")
    doc = document_from_bytes(path, text.encode("utf-8"))
    _check_folder_size(folder, [doc])
    return _file_put(folder, doc)


def _check_folder_size(folder: Folder, documents: Sequence[Document]) -> None:
    replaced = {d.path for d in documents}
    kept = (
        folder.files.exclude(path__in=replaced).aggregate(n=Sum("size", default=0))["n"]
        if replaced
        else 0
    )
    total = kept + sum(d.size for d in documents)
    limit = settings.FOLDER_MAX_BYTES
    if total > limit:
        raise LimitExceeded(
            f"folder {folder.name!r} would hold {total:,} bytes; at most {limit:,}"
        )


def _file_put(folder: Folder, doc: Document, *, queue_index: bool = True) -> FileChange:
    file = folder.files.filter(path=doc.path).first()
    if file is not None and file.sha256 == doc.sha256:
        return FileChange(doc.path, "unchanged", file)
    status: ChangeStatus = "updated" if file is not None else "created"
    if file is None:
        file = FolderFile(folder=folder, path=doc.path)
    file.content_type = doc.content_type
    file.size = doc.size
    file.sha256 = doc.sha256
    file.text = doc.text
    file.line_count = doc.text.count("\n") + (
        1 if doc.text and not doc.text.endswith("\n") else 0
    )
    file.index_state = IndexState.PENDING
    file.index_error = ""
    _full_clean(file, validate_constraints=False)
    try:
        with transaction.atomic():
            file.save()
    except IntegrityError:
        raise Conflict(f"{doc.path} was stored meanwhile; upload again") from None
    if queue_index:
        tasks.file_index.delay_on_commit(file.pk)
    folder_progress_later(folder_id=folder.pk, file_ids=[file.pk])
    return FileChange(doc.path, status, file)


@transaction.atomic
def file_delete(*, actor: Actor, file: FolderFile) -> None:
    folder_require(actor=actor, folder=file.folder, right=Right.WRITE)
    if file.folder.kind != FolderKind.VIRTUAL:
        raise InvalidInput(
            f"{file.path} is in a local directory; delete it on disk and rescan"
        )
    _file_remove(file)


def _file_remove(file: FolderFile) -> None:
    index_delete(
        FILE_PASSAGE_INDEX,
        row_ids=list(file.passages.values_list("pk", flat=True)),
    )
    folder_id = file.folder_id
    file.delete()
    folder_progress_later(folder_id=folder_id, file_ids=[])


# --- indexing ---------------------------------------------------------------------


def file_index(*, file_id: int) -> int:
    """Chunk a file into passages, keep those whose text survived, index the
    new ones by keywords now and by meaning after commit.  Returns how many
    passages are new.  Runs twice safely (the second finds nothing new)."""
    from memory.search.embedder import embedding_status

    try:
        with transaction.atomic():
            file = FolderFile.objects.filter(pk=file_id).first()
            if file is None:
                return 0
            created = _passages_replace(file)
            pending = file.passages.filter(
                embedding_state=EmbeddingState.PENDING
            ).count()
            file.passage_count = file.passages.count()
            file.embedded_count = file.passage_count - pending
            file.indexed_at = timezone.now()
            file.index_error = ""
            # Without a model, keywords are all there will be: ready.
            done = pending == 0 or not embedding_status().available
            file.index_state = IndexState.READY if done else IndexState.INDEXING
            file.save(
                update_fields=[
                    "passage_count",
                    "embedded_count",
                    "indexed_at",
                    "index_error",
                    "index_state",
                ]
            )
            folder_progress_later(folder_id=file.folder_id, file_ids=[file.pk])
            return created
    except Exception as exc:
        logger.exception("indexing file %s failed", file_id)
        with transaction.atomic():
            FolderFile.objects.filter(pk=file_id).update(
                index_state=IndexState.FAILED, index_error=str(exc)[:500]
            )
            folder_id = (
                FolderFile.objects.filter(pk=file_id)
                .values_list("folder_id", flat=True)
                .first()
            )
            if folder_id is not None:
                folder_progress_later(folder_id=folder_id, file_ids=[file_id])
        return 0


def _passages_replace(file: FolderFile) -> int:
    chunks = chunk_lines(
        file.text,
        budget=settings.FOLDER_PASSAGE_TOKENS,
        overlap=settings.FOLDER_PASSAGE_OVERLAP_LINES,
    )
    old: dict[str, list[FilePassage]] = {}
    for passage in file.passages.defer("content").order_by("position"):
        old.setdefault(passage.content_hash, []).append(passage)
    kept: list[FilePassage] = []
    new: list[FilePassage] = []
    for position, chunk in enumerate(chunks):
        digest = hashlib.sha256(chunk.content.encode()).hexdigest()
        same = old.get(digest)
        if same:
            passage = same.pop(0)
            passage.position = position
            passage.start_line, passage.end_line = chunk.start_line, chunk.end_line
            kept.append(passage)
            continue
        new.append(
            FilePassage(
                file=file,
                folder_id=file.folder_id,
                constellation_id=_constellation_id(file),
                position=position,
                start_line=chunk.start_line,
                end_line=chunk.end_line,
                content=chunk.content,
                content_hash=digest,
            )
        )
    gone = [p.pk for rest in old.values() for p in rest]
    if gone:
        index_delete(FILE_PASSAGE_INDEX, row_ids=gone)
        FilePassage.objects.filter(pk__in=gone).delete()
    if kept:
        FilePassage.objects.bulk_update(
            kept, ["position", "start_line", "end_line"], batch_size=500
        )
    FilePassage.objects.bulk_create(new, batch_size=500)
    index_put_texts(
        FILE_PASSAGE_INDEX,
        rows=[(p.pk, p.constellation_id, p.folder_id, p.content) for p in new],
    )
    embedding_schedule(kind=FILE_PASSAGE_KIND, row_ids=[p.pk for p in new])
    return len(new)


def _constellation_id(file: FolderFile) -> int:
    return Folder.objects.values_list("constellation_id", flat=True).get(
        pk=file.folder_id
    )


def passages_embedded(passage_ids: list[int]) -> None:
    """Memory's pipeline stored these passages' vectors: move their files'
    progress on (a file is ready once every passage has one)."""
    with transaction.atomic():
        file_ids = set(
            FilePassage.objects.filter(pk__in=passage_ids).values_list(
                "file_id", flat=True
            )
        )
        counts = dict(
            FilePassage.objects.filter(
                file_id__in=file_ids, embedding_state=EmbeddingState.READY
            )
            .values("file_id")
            .annotate(n=Count("id"))
            .values_list("file_id", "n")
        )
        by_folder: dict[int, list[int]] = {}
        for file in FolderFile.objects.filter(pk__in=file_ids).only(
            "folder_id", "passage_count", "index_state"
        ):
            file.embedded_count = counts.get(file.pk, 0)
            fields = ["embedded_count"]
            if (
                file.embedded_count >= file.passage_count
                and file.index_state == IndexState.INDEXING
            ):
                file.index_state = IndexState.READY
                fields.append("index_state")
            file.save(update_fields=fields)
            by_folder.setdefault(file.folder_id, []).append(file.pk)
        for folder_id, ids in by_folder.items():
            folder_progress_later(folder_id=folder_id, file_ids=ids)


# --- local folders --------------------------------------------------------------


@dataclass
class RescanReport:
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    refused: list[str] = field(default_factory=list)


Progress = Callable[[int, int, str], None]


def folder_rescan(
    *,
    actor: Actor,
    folder: Folder,
    progress: Progress | None = None,
    index_inline: bool = False,
) -> RescanReport:
    """Bring a local folder's files in step with its directory.

    Each file is stored in its own transaction (a long scan never holds the
    write lock); refused files (outside the root, not regular, binary, too
    large) are listed with their reason and never read past the check.
    ``index_inline``: chunk each changed file here instead of in a task
    (the ``index_folder`` command, which shows the progress).
    """
    folder_require(actor=actor, folder=folder, right=Right.WRITE)
    if folder.kind != FolderKind.LOCAL:
        raise InvalidInput(f"folder {folder.name!r} is virtual; upload files instead")
    root = local_root_check(folder.root_path)
    entries, refused = local_walk(root)
    report = RescanReport(refused=refused)
    known = dict(folder.files.values_list("path", "sha256"))
    seen: set[str] = set()
    for done, entry in enumerate(entries, start=1):
        if progress is not None:
            progress(done, len(entries), entry.path)
        try:
            data = local_read(root, entry.path)
        except (ApplicationError, OSError) as exc:
            report.refused.append(f"{entry.path}: {getattr(exc, 'message', exc)}")
            continue
        seen.add(entry.path)
        if known.get(entry.path) == hashlib.sha256(data).hexdigest():
            report.unchanged += 1
            continue
        try:
            doc = document_from_bytes(entry.path, data)
        except ApplicationError as exc:
            report.refused.append(f"{entry.path}: {exc.message}")
            continue
        with transaction.atomic():
            change = _file_put(folder, doc, queue_index=not index_inline)
        if change.status == "created":
            report.created += 1
        else:
            report.updated += 1
        if index_inline and change.file is not None:
            file_index(file_id=change.file.pk)
    gone = [p for p in known if p not in seen]
    with transaction.atomic():
        for file in folder.files.filter(path__in=gone):
            _file_remove(file)
            report.deleted += 1
        folder.scanned_at = timezone.now()
        folder.save(update_fields=["scanned_at"])
    return report


def folders_rescan_local() -> dict[str, int]:
    """Rescan every local folder (the periodic beat task)."""
    changed: dict[str, int] = {}
    for folder in Folder.objects.filter(kind=FolderKind.LOCAL):
        try:
            report = folder_rescan(actor=Actor.system(), folder=folder)
        except ApplicationError as exc:
            logger.warning("folder %s not rescanned: %s", folder.pk, exc.message)
            continue
        changed[folder.name] = report.created + report.updated + report.deleted
    return changed
