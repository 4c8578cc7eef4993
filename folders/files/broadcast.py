"""Live indexing progress of a folder, published to its group after commit.

Each message is ``{"type": "folder.progress", "folder": counts, "files":
[per-file progress]}``, built once the write committed; the folder page's
socket (``FolderProgressConsumer``) relays it as is.
"""

from collections.abc import Iterable
from typing import Any

from pattern_site.kernel.realtime import group_for_folder, publish_on_commit


def folder_progress_later(*, folder_id: int, file_ids: Iterable[int]) -> None:
    ids = sorted(set(file_ids))

    def progress() -> dict[str, Any]:
        from folders.files.selectors import file_progress, folder_counts

        return {
            "type": "folder.progress",
            "folder": folder_counts(folder_id=folder_id),
            "files": file_progress(file_ids=ids),
        }

    publish_on_commit(group_for_folder(folder_id), progress)
