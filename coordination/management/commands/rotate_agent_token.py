"""Issue a new token for an agent, revoking its old ones; print it last."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from coordination.errors import ApplicationError
from coordination.selectors import agent_get_by_name
from coordination.services import agent_token_issue


class Command(BaseCommand):
    help = "Rotate an agent's API token and print the new one."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("constellation")
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = agent_get_by_name(
                constellation_name=options["constellation"], agent_name=options["name"]
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        issued = agent_token_issue(agent=agent)
        self.stderr.write(
            f"Rotated the token of {agent.name!r}; old tokens are revoked."
        )
        self.stdout.write(issued.raw)
