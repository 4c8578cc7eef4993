"""Live indexing progress of one folder, for its dashboard page.

Thin: take the actor the websocket middleware (``kernel.auth``) put in the
scope - a human, by session - ask the selector whether the user may read
the folder, then relay the ``folder.progress`` messages the services
publish to the folder's group after their commits.
"""

from typing import Any

from folders.files.selectors import folder_get_for_actor
from pattern_site.kernel.realtime import group_for_folder
from pattern_site.kernel.rooms import PageRoomConsumer


class FolderProgressConsumer(PageRoomConsumer):
    """A folder page's indexing progress."""

    url_kwarg = "folder_id"
    check = staticmethod(
        lambda actor, pk: folder_get_for_actor(actor=actor, folder_id=pk)
    )
    group_of = staticmethod(group_for_folder)

    async def folder_progress(self, message: dict[str, Any]) -> None:
        await self.send_json(message)
