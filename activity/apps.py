from typing import Any

from django.apps import AppConfig


class ActivityConfig(AppConfig):
    name = "activity"
    verbose_name = "Activity"

    def ready(self) -> None:
        from celery.signals import worker_process_shutdown

        from activity import tools  # noqa: F401  (registers the notable tool)
        from activity.stream.services import activity_record
        from pattern_site.kernel.events import event_recorder_set

        # Every service records through pattern_site.kernel.events; this app stores.
        event_recorder_set(activity_record)

        # A Celery child process leaves through os._exit, past atexit: store
        # the events it still holds on its way out.
        worker_process_shutdown.connect(_flush_on_worker_exit, weak=False)


def _flush_on_worker_exit(**kwargs: Any) -> None:
    from activity.stream.services import activity_flush

    activity_flush()
