"""Background work of folders: tasks take ids and call one service.

Both can run twice safely: indexing a file finds its passages already there.
"""

from celery import shared_task


@shared_task(name="folders.file_index", ignore_result=True)
def file_index(file_id: int) -> int:
    from folders.files import services

    return services.file_index(file_id=file_id)


@shared_task(name="folders.folders_rescan_local", ignore_result=True)
def folders_rescan_local() -> dict[str, int]:
    from folders.files import services

    return services.folders_rescan_local()
