"""Revoke every token of an agent."""

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from coordination.errors import ApplicationError
from coordination.selectors import agent_get_by_name
from coordination.services import agent_token_revoke


class Command(BaseCommand):
    help = "Revoke all API tokens of an agent."

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
        count = agent_token_revoke(agent=agent)
        self.stdout.write(f"Revoked {count} token(s) of {agent.name!r}.")
