"""Pattern site: wiring for settings, URLs, ASGI routing, Celery and the API."""

from pattern_site.celery import app as celery_app

__all__ = ["celery_app"]
