"""Background upkeep of the site itself, on beat's schedule: tasks call one
function each."""

from celery import shared_task


@shared_task(name="pattern_site.worker_heartbeat", ignore_result=True)
def worker_heartbeat_task() -> None:
    from pattern_site.heartbeat import worker_heartbeat_record

    worker_heartbeat_record()


@shared_task(name="pattern_site.broker_prune", ignore_result=True)
def broker_prune_task() -> int:
    from pattern_site.broker import broker_prune

    return broker_prune()
