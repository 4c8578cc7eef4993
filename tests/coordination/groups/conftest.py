"""Groups of the demo agents, built through the services."""

from typing import Any

import pytest

from coordination.groups.services import group_create, group_member_add
from pattern_site.kernel.actors import Actor
from tests.factories import AgentFactory

NAMES = ("Pattern", "Entropy", "Flux", "Momentum", "Anchor", "Archive")


@pytest.fixture
def agents(constellation: Any) -> dict[str, Any]:
    return {n: AgentFactory(constellation=constellation, name=n) for n in NAMES}


@pytest.fixture
def system() -> Actor:
    return Actor.system()


@pytest.fixture
def make_group(constellation: Any, agents: dict[str, Any]) -> Any:
    def make(
        pattern: str,
        members: list[tuple[str, str] | tuple[str, str, dict]],
        config: dict[str, Any] | None = None,
        name: str = "Group",
    ) -> Any:
        group = group_create(
            constellation=constellation,
            name=name,
            pattern=pattern,
            config=config or {},
        )
        for entry in members:
            extra = entry[2] if len(entry) > 2 else {}
            group_member_add(
                group=group, agent=agents[entry[0]], role=entry[1], **extra
            )
        return group

    return make


def config_ids(agents: dict[str, Any], **names: str) -> dict[str, int]:
    return {key: agents[value].pk for key, value in names.items()}
