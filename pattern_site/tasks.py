"""Background upkeep of the site itself, on beat's schedule: tasks call one
function each."""

from celery import shared_task


@shared_task(name="pattern_site.worker_heartbeat", ignore_result=True)
def worker_heartbeat_task() -> None:
    from memory.search.pipeline import embedding_catch_up
    from pattern_site.health import database_writes_check
    from pattern_site.heartbeat import database_writes_record, worker_heartbeat_record

    worker_heartbeat_record()
    # Whether writes go through, for every page's banner: probed here, on
    # beat's schedule, so that no page takes the write lock to find out.
    database_writes_record(problem=database_writes_check())
    # A heartbeat that runs at all found the worker idle (one queued behind
    # a backlog expires first): the time to embed rows whose own task was
    # lost, e.g. with a web process killed between commit and enqueue.
    embedding_catch_up()


@shared_task(name="pattern_site.broker_prune", ignore_result=True)
def broker_prune_task() -> int:
    from pattern_site.broker import broker_prune

    return broker_prune()
