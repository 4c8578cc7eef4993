"""Websocket URL routes; each app's consumers are listed here."""

from django.urls import path

from coordination.groups.consumers import GroupSocketConsumer
from folders.consumers import FolderProgressConsumer
from memory.blocks.sync.consumer import BlockSyncConsumer
from pattern_site.kernel.agents.consumers import PresenceConsumer

websocket_urlpatterns = [
    path("ws/constellations/<int:constellation_id>/", PresenceConsumer.as_asgi()),
    path("ws/sync/", BlockSyncConsumer.as_asgi()),
    path("ws/groups/", GroupSocketConsumer.as_asgi()),
    path("ws/folders/<int:folder_id>/", FolderProgressConsumer.as_asgi()),
]
