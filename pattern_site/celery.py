"""The Celery application; configuration comes from Django settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")

app = Celery("pattern_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
