"""Import a constellation from an archive of constellation_export."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from pattern_site.backup.services import constellation_import
from pattern_site.kernel.errors import ApplicationError


class Command(BaseCommand):
    help = "Import a constellation archive: all of it, or nothing."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", type=Path, help="The archive to read.")
        parser.add_argument(
            "--rename",
            metavar="NEW_NAME",
            help="Import under this name (when the archive's name is taken here).",
        )
        parser.add_argument(
            "--partner",
            metavar="USERNAME",
            help="Make this existing user the partner (default: the archive's"
            " partner, by username, created without a password if missing).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        partner = None
        if options["partner"]:
            partner = (
                get_user_model().objects.filter(username=options["partner"]).first()
            )
            if partner is None:
                raise CommandError(f"no user is named {options['partner']!r}")
        try:
            with options["file"].open("rb") as source:
                result = constellation_import(
                    source=source, rename=options["rename"], partner=partner
                )
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc}") from exc
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        name = result.constellation.name
        self.stdout.write(
            f"Imported {name!r}: {sum(result.counts.values())} rows,"
            f" agents: {', '.join(result.agents) or 'none'}."
        )
        if result.users_created:
            self.stdout.write(
                "Users created without a password (set one with"
                f" `manage.py changepassword NAME`): {', '.join(result.users_created)}."
            )
        if result.reembed:
            self.stdout.write(f"{result.reembed} rows will be embedded again.")
        if result.agents:
            self.stdout.write(
                "Agents come without API tokens; issue each one with"
                f" `manage.py rotate_agent_token {name!r} AGENT`."
            )
