"""Make the agents of a Letta agent file (.af) agents of a constellation."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pattern_site.backup.letta import agent_file_import
from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.errors import ApplicationError


class Command(BaseCommand):
    help = "Import a Letta agent file: memory blocks, messages, archival passages."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("constellation", help="The constellation's name.")
        parser.add_argument("file", type=Path, help="The .af file.")
        parser.add_argument("--name", help="The agent's name here.")

    def handle(self, *args: Any, **options: Any) -> None:
        constellation = Constellation.objects.filter(
            name=options["constellation"]
        ).first()
        if constellation is None:
            raise CommandError(
                f"no constellation is named {options['constellation']!r}"
            )
        try:
            results = agent_file_import(
                constellation=constellation,
                source=options["file"].read_bytes(),
                name=options["name"],
            )
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        for result in results:
            self.stderr.write(
                f"Imported {result.agent.name!r}: blocks {', '.join(result.blocks)};"
                f" {result.messages} messages; {result.passages} archival passages."
            )
            if result.tools_not_imported:
                self.stderr.write(
                    "Tools not imported (no counterpart here): "
                    + ", ".join(result.tools_not_imported)
                )
            # The token last on stdout, as create_agent prints it.
            self.stdout.write(f"{result.agent.name}: {result.token.raw}")
