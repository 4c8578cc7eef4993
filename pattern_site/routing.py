"""Websocket URL routes; each app's consumers are listed here."""

from django.urls import path

from coordination.consumers import PresenceConsumer
from folders.consumers import FolderProgressConsumer
from memory.consumers import BlockSyncConsumer

websocket_urlpatterns = [
    path("ws/constellations/<int:constellation_id>/", PresenceConsumer.as_asgi()),
    path("ws/sync/", BlockSyncConsumer.as_asgi()),
    path("ws/folders/<int:folder_id>/", FolderProgressConsumer.as_asgi()),
]
