"""Base of the commands that act on one agent named by constellation and name."""

from abc import ABC, abstractmethod
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.selectors import agent_get_by_name
from pattern_site.kernel.errors import ApplicationError


class AgentCommand(BaseCommand, ABC):
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
        self.handle_agent(agent)

    @abstractmethod
    def handle_agent(self, agent: Agent) -> None:
        """Do the command's work on ``agent``."""
