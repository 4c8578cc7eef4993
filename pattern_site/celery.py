"""The Celery application; configuration comes from Django settings.

Tasks live in ``tasks`` modules anywhere inside the project's apps (one per
capability package), so discovery looks into every package of each app.
"""

import os
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import task_postrun, worker_process_init, worker_ready
from django.conf import settings

from pattern_site.kernel.db.checkpoint import wal_checkpoint_if_written
from pattern_site.kernel.heap import heap_freeze, heap_freeze_if_grown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pattern_site.settings.dev")

app = Celery("pattern_site")
app.config_from_object("django.conf:settings", namespace="CELERY")

_PROJECT = Path(__file__).resolve().parent.parent


def _task_packages() -> Iterator[str]:
    """The project's own apps (top-level folders of the repository) and each
    package inside them."""
    from django.apps import apps

    for config in apps.get_app_configs():
        if Path(config.path).parent != _PROJECT:
            continue
        yield config.name
        for sub in pkgutil.walk_packages([config.path], config.name + "."):
            if sub.ispkg and ".migrations" not in sub.name:
                yield sub.name


app.autodiscover_tasks(lambda: list(_task_packages()))


@worker_ready.connect
@worker_process_init.connect
def _heap_freeze(**_kwargs: object) -> None:
    """Freeze what the process holds once started (Django, the apps, the
    task registry: hundreds of thousands of objects).  Runs in the process
    that runs the tasks (the solo pool's own, each prefork child)."""
    heap_freeze()


@task_postrun.connect
def _between_tasks(task: Any = None, **_kwargs: object) -> None:
    """Work no task waits for, done after each in the worker process."""
    if task is not None and task.request.is_eager:
        return
    # A worker's first tasks import what they need (the embedding model's
    # libraries, the LLM SDK's resources): freeze those too, so that a
    # collection inside a later agent step does not walk them.
    heap_freeze_if_grown()
    wal_checkpoint_if_written(min_changes=settings.WORKER_CHECKPOINT_CHANGES)
