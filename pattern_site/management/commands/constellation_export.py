"""Write a constellation (everything but its agents' tokens) to an archive."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pattern_site.backup.services import constellation_export
from pattern_site.kernel.agents.models import Constellation


class Command(BaseCommand):
    help = (
        "Export a constellation to a zip archive (import it with constellation_import)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", help="The constellation's name.")
        parser.add_argument("file", type=Path, help="The archive to write.")
        parser.add_argument(
            "--no-vectors",
            action="store_true",
            help="Leave the search vectors out (the importing site embeds again).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        constellation = Constellation.objects.filter(name=options["name"]).first()
        if constellation is None:
            raise CommandError(f"no constellation is named {options['name']!r}")
        path: Path = options["file"]
        partial = path.with_name(path.name + ".partial")
        # Written aside and renamed: an interrupted export leaves no archive
        # that looks complete.
        with partial.open("wb") as out:
            summary = constellation_export(
                constellation=constellation, out=out, vectors=not options["no_vectors"]
            )
        partial.replace(path)
        rows = sum(summary.counts.values())
        self.stdout.write(
            f"Exported {summary.constellation!r}: {rows} rows to {path}"
            " (agent tokens are not exported)."
        )
