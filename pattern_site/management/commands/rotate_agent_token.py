"""Issue a new token for an agent, revoking its old ones; print it last."""

from pattern_site.kernel.agents.models import Agent
from pattern_site.kernel.agents.services import agent_token_issue
from pattern_site.management.commands._agent_command import AgentCommand


class Command(AgentCommand):
    help = "Rotate an agent's API token and print the new one."

    def handle_agent(self, agent: Agent) -> None:
        issued = agent_token_issue(agent=agent)
        self.stderr.write(f"Rotated the token of {agent.name!r}; old ones are revoked.")
        self.stdout.write(issued.raw)
