"""Rescan a local folder (or re-index a virtual one) with a progress bar.

New, changed and deleted files are picked up; each changed file is chunked
and keyword-indexed here, its vectors made by the embedding workers (with
``--wait``, the bar follows them until every passage has one).
"""

import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from folders.files import selectors, services
from folders.files.models import FolderKind
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.errors import ApplicationError

BAR = 30


def progress_line(done: int, total: int, label: str) -> str:
    filled = BAR * done // total if total else BAR
    percent = 100 * done // total if total else 100
    bar = "#" * filled + "." * (BAR - filled)
    return f"\r[{bar}] {percent:3d}% {done}/{total} {label[:40]:<40}"


class Command(BaseCommand):
    help = "Rescan a folder's files and index them, showing progress."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("name", help="Folder name")
        parser.add_argument("--constellation", help="Constellation name, if several")
        parser.add_argument(
            "--wait", action="store_true", help="Follow the embedding until done"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        system = Actor.system()
        folders = selectors.folder_list_for_actor(actor=system).filter(
            name=options["name"]
        )
        if options["constellation"]:
            folders = folders.filter(constellation__name=options["constellation"])
        found = list(folders)
        if len(found) != 1:
            raise CommandError(
                f"{len(found)} folders named {options['name']!r}; give --constellation"
                if found
                else f"no folder {options['name']!r}"
            )
        folder = found[0]
        out = self.stdout

        def show(done: int, total: int, path: str) -> None:
            out.write(progress_line(done, total, path), ending="")
            out.flush()

        try:
            if folder.kind == FolderKind.LOCAL:
                report = services.folder_rescan(
                    actor=system, folder=folder, progress=show, index_inline=True
                )
                out.write("")
                out.write(
                    f"{folder.name}: {report.created} new, {report.updated} changed,"
                    f" {report.unchanged} unchanged, {report.deleted} deleted"
                )
                for reason in report.refused:
                    self.stderr.write(f"refused {reason}")
            else:
                ids = list(folder.files.values_list("pk", flat=True))
                for n, file_id in enumerate(ids, start=1):
                    services.file_index(file_id=file_id)
                    show(n, len(ids), str(file_id))
                out.write("")
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        if options["wait"]:
            self._follow(folder.pk)

    def _follow(self, folder_id: int) -> None:
        while True:
            counts = selectors.folder_counts(folder_id=folder_id)
            total = counts["passages"]
            self.stdout.write(
                progress_line(total - counts["pending"], total, "embedding"), ending=""
            )
            sys.stdout.flush()
            if not counts["pending"]:
                self.stdout.write("")
                return
            time.sleep(0.5)
