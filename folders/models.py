"""The models of the folders app (defined in ``folders.files.models``)."""

from folders.files.models import (
    FilePassage,
    Folder,
    FolderAccess,
    FolderAttachment,
    FolderFile,
    FolderKind,
    IndexState,
    OpenFile,
)

__all__ = [
    "FilePassage",
    "Folder",
    "FolderAccess",
    "FolderAttachment",
    "FolderFile",
    "FolderKind",
    "IndexState",
    "OpenFile",
]
