"""Websocket URL routes; each app's consumers are listed here."""

from django.urls import path

from coordination.consumers import PresenceConsumer

websocket_urlpatterns = [
    path("ws/constellations/<int:constellation_id>/", PresenceConsumer.as_asgi()),
]
