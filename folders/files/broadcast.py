"""Live indexing progress of a folder, sent to ``folder.<id>`` after commit.

Each message is ``{"type": "folder.progress", "folder": counts, "files":
[per-file progress]}``; the folder page's socket (``FolderProgressConsumer``)
relays it as is.  Sending never fails a write: with no channel layer
reachable, the page catches up on its next load.
"""

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def folder_group(folder_id: int) -> str:
    return f"folder.{folder_id}"


def folder_progress_later(*, folder_id: int, file_ids: Iterable[int]) -> None:
    ids = sorted(set(file_ids))
    transaction.on_commit(
        lambda: folder_progress_send(folder_id=folder_id, file_ids=ids)
    )


def folder_progress_send(*, folder_id: int, file_ids: list[int]) -> None:
    from folders.files.selectors import file_progress, folder_counts

    layer = get_channel_layer()
    if layer is None:
        return
    message: dict[str, Any] = {
        "type": "folder.progress",
        "folder": folder_counts(folder_id=folder_id),
        "files": file_progress(file_ids=file_ids),
    }
    try:
        async_to_sync(layer.group_send)(folder_group(folder_id), message)
    except Exception:  # progress is advisory; the write has committed
        logger.warning("folder %s: progress not sent", folder_id, exc_info=True)
