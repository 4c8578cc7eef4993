"""Folders of files, their passages, and which agents may use them.

A folder belongs to one constellation.  Its files are either stored in the
database (``virtual``) or live in a directory on the server (``local``, a
root under ``PATTERN_FOLDER_ROOTS``).  Either way ``FolderFile.text`` holds
the file's text as indexed (for a local folder, as of its last scan), so
reading, paging and grep never touch the disk.  ``FilePassage`` rows are
line ranges of a file, indexed by the memory search engine.
"""

from django.conf import settings
from django.db import models

from memory.models import EmbeddingState
from pattern_site.kernel.agents.models import Agent, Constellation


class FolderKind(models.TextChoices):
    VIRTUAL = "virtual", "virtual (files stored in the database)"
    LOCAL = "local", "local (a directory on the server)"


class FolderAccess(models.TextChoices):
    READ = "read", "read"
    READ_WRITE = "read_write", "read and write"


class IndexState(models.TextChoices):
    PENDING = "pending", "pending"
    INDEXING = "indexing", "indexing"
    READY = "ready", "ready"
    FAILED = "failed", "failed"


def _default_embedding_model() -> str:
    return settings.EMBEDDING_MODEL


class Folder(models.Model):
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="folders"
    )
    name = models.CharField(max_length=100)
    description = models.TextField(
        blank=True, help_text="Shown to the agents the folder is attached to."
    )
    kind = models.CharField(
        max_length=10, choices=FolderKind.choices, default=FolderKind.VIRTUAL
    )
    root_path = models.CharField(
        max_length=1024, blank=True, help_text="Local folders: the directory."
    )
    embedding_model = models.CharField(max_length=200, default=_default_embedding_model)
    created_at = models.DateTimeField(auto_now_add=True)
    scanned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["constellation_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "name"],
                name="folder_name_unique_per_constellation",
            )
        ]

    def __str__(self) -> str:
        return self.name


class FolderFile(models.Model):
    folder = models.ForeignKey(Folder, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1024, help_text="Relative POSIX path.")
    content_type = models.CharField(max_length=100)
    size = models.BigIntegerField(help_text="Bytes of the file as uploaded.")
    sha256 = models.CharField(max_length=64)
    text = models.TextField(blank=True)
    line_count = models.PositiveIntegerField(default=0)
    uploaded_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    indexed_at = models.DateTimeField(null=True, blank=True)
    index_state = models.CharField(
        max_length=10, choices=IndexState.choices, default=IndexState.PENDING
    )
    index_error = models.TextField(blank=True)
    passage_count = models.PositiveIntegerField(default=0)
    embedded_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["folder_id", "path"]
        constraints = [
            models.UniqueConstraint(
                fields=["folder", "path"], name="file_path_unique_per_folder"
            )
        ]

    def __str__(self) -> str:
        return self.path


class FilePassage(models.Model):
    """Whole lines ``start_line``..``end_line`` (1-based) of a file."""

    file = models.ForeignKey(
        FolderFile, on_delete=models.CASCADE, related_name="passages"
    )
    # Denormalised for the search index: its scope (constellation) and its
    # owner (the folder) filter candidates without a join.
    folder = models.ForeignKey(Folder, on_delete=models.CASCADE, related_name="+")
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="+"
    )
    position = models.PositiveIntegerField()
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    content = models.TextField()
    content_hash = models.CharField(max_length=64)
    embedding_state = models.CharField(
        max_length=10, choices=EmbeddingState.choices, default=EmbeddingState.PENDING
    )
    embedded_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["file_id", "position"]
        indexes = [
            models.Index(fields=["file", "embedding_state"]),
            models.Index(fields=["embedding_state"]),
        ]

    def __str__(self) -> str:
        return f"{self.file_id}:{self.start_line}-{self.end_line}"


class FolderAttachment(models.Model):
    folder = models.ForeignKey(
        Folder, on_delete=models.CASCADE, related_name="attachments"
    )
    agent = models.ForeignKey(
        Agent, on_delete=models.CASCADE, related_name="folder_attachments"
    )
    access = models.CharField(
        max_length=10, choices=FolderAccess.choices, default=FolderAccess.READ
    )
    attached_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["folder_id", "agent_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["folder", "agent"], name="folder_attached_once_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.folder_id} → {self.agent_id} ({self.access})"


class OpenFile(models.Model):
    """A window of lines of a file in an agent's context."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    file = models.ForeignKey(
        FolderFile, on_delete=models.CASCADE, related_name="windows"
    )
    start_line = models.PositiveIntegerField(default=1)
    line_count = models.PositiveIntegerField()
    opened_at = models.DateTimeField(auto_now_add=True)
    used_at = models.DateTimeField()

    class Meta:
        ordering = ["agent_id", "-used_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "file"], name="file_open_once_per_agent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.file_id}@{self.start_line}"
