"""Create an agent (and its constellation when missing); print its token.

The token is the last line of output, alone, so scripts can read it with
``tail -n 1``.
"""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from pattern_site.kernel.agents.models import Constellation
from pattern_site.kernel.agents.services import (
    agent_create,
    constellation_create,
    user_get_or_create,
)
from pattern_site.kernel.errors import ApplicationError


class Command(BaseCommand):
    help = "Create an agent in a constellation and print its new API token."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("constellation")
        parser.add_argument("name")
        parser.add_argument("--role", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--model", default="")
        parser.add_argument(
            "--partner",
            default=None,
            help="Username of the partner when the constellation is created "
            "(created without a usable password if missing).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            with transaction.atomic():
                constellation = Constellation.objects.filter(
                    name=options["constellation"]
                ).first()
                if constellation is None:
                    if not options["partner"]:
                        raise CommandError(
                            f"constellation {options['constellation']!r} is missing;"
                            " pass --partner USERNAME to create it"
                        )
                    partner, _ = user_get_or_create(username=options["partner"])
                    constellation = constellation_create(
                        name=options["constellation"], partner=partner
                    )
                    self.stderr.write(f"Created constellation {constellation.name!r}.")
                agent, issued = agent_create(
                    constellation=constellation,
                    name=options["name"],
                    role=options["role"],
                    description=options["description"],
                    model_name=options["model"],
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stderr.write(f"Created agent {agent.name!r} (id {agent.pk}). Its token:")
        self.stdout.write(issued.raw)
