"""Websocket URL routes; each app's consumers are listed here."""

from django.urls import path

from coordination.agents.consumers import PresenceConsumer
from coordination.groups.consumers import GroupSocketConsumer
from folders.consumers import FolderProgressConsumer
from memory.blocks.sync.consumer import BlockSyncConsumer

websocket_urlpatterns = [
    path("ws/constellations/<int:constellation_id>/", PresenceConsumer.as_asgi()),
    path("ws/sync/", BlockSyncConsumer.as_asgi()),
    path("ws/groups/", GroupSocketConsumer.as_asgi()),
    path("ws/folders/<int:folder_id>/", FolderProgressConsumer.as_asgi()),
]
