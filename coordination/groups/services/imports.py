"""Creating a group from an exported document (``coordination.groups.toml_io``):
members and config name agents, which must exist in the constellation.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from coordination.groups.models import AgentGroup, MemberRole
from coordination.groups.patterns import pattern_get
from coordination.groups.services.membership import group_member_add, group_update
from pattern_site.kernel.agents.models import Agent, Constellation
from pattern_site.kernel.errors import Conflict, InvalidInput


@transaction.atomic
def group_import(
    *, constellation: Constellation, document: dict[str, Any], replace: bool = False
) -> AgentGroup:
    """Create (or with ``replace``, recreate) a group from an exported document."""
    if not isinstance(document.get("group"), dict):
        raise InvalidInput("the document has no [group] table")
    head = document["group"]
    name = str(head.get("name", "")).strip()
    if not name:
        raise InvalidInput("[group] needs a name")
    existing = AgentGroup.objects.filter(constellation=constellation, name=name)
    if existing.exists():
        if not replace:
            raise Conflict(
                f"constellation {constellation.name!r} already has a group named"
                f" {name!r}; import with replace to overwrite it"
            )
        existing.delete()
    agents = {a.name: a for a in constellation.agents.all()}

    def agent_named(value: Any) -> Agent:
        agent = agents.get(str(value))
        if agent is None:
            raise InvalidInput(
                f"no agent named {value!r} in constellation {constellation.name!r}"
            )
        return agent

    pattern = str(head.get("pattern", ""))
    pattern_get(pattern)
    group = AgentGroup(
        constellation=constellation,
        name=name,
        description=str(head.get("description", "")),
        pattern=pattern,
    )
    group.full_clean(exclude=["config", "state"])
    group.save()
    for member in document.get("members", []):
        if not isinstance(member, dict):
            raise InvalidInput("each [[members]] entry is a table")
        group_member_add(
            group=group,
            agent=agent_named(member.get("agent")),
            role=str(member.get("role", MemberRole.REGULAR)),
            domain=str(member.get("domain", "")),
            capabilities=[str(c) for c in member.get("capabilities", [])],
        )
    return group_update(
        group=group,
        config=_names_to_ids(document.get("config", {}), agent_named),
    )


def _names_to_ids(config: Any, agent_named: Any) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise InvalidInput("[config] must be a table")
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("leader", "intervention_agent"):
            out[f"{key}_id"] = agent_named(value).pk
        elif key == "stages" and isinstance(value, list):
            stages = []
            for stage in value:
                if not isinstance(stage, dict):
                    raise InvalidInput("each [[config.stages]] entry is a table")
                stages.append(
                    {
                        **{k: v for k, v in stage.items() if k != "agents"},
                        "agent_ids": [
                            agent_named(a).pk for a in stage.get("agents", [])
                        ],
                    }
                )
            out[key] = stages
        else:
            out[key] = value
    return out
