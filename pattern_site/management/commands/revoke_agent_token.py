"""Revoke every token of an agent."""

from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.services import agent_token_revoke
from pattern_site.management.commands._agent_command import AgentCommand


class Command(AgentCommand):
    help = "Revoke all API tokens of an agent."

    def handle_agent(self, agent: Agent) -> None:
        count = agent_token_revoke(agent=agent)
        self.stdout.write(f"Revoked {count} token(s) of {agent.name!r}.")
