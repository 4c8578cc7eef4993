"""Constellation and agent endpoints of the tool API."""

from django.http import HttpRequest
from ninja import Router

from pattern_site.kernel.agents.schemas import (
    AgentOut,
    AgentUpdateIn,
    ConstellationOut,
    WhoAmIOut,
)
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
    agent_get_for_change,
    agent_list_for_actor,
    constellation_list_for_actor,
)
from pattern_site.kernel.agents.services import agent_update
from pattern_site.kernel.apitypes import Id, error_responses
from pattern_site.kernel.auth import request_actor

router = Router()


@router.get(
    "/whoami",
    response={200: WhoAmIOut, **error_responses(body=False)},
    tags=["agents"],
    summary="Who the request is acting as",
)
def whoami(request: HttpRequest) -> dict[str, object]:
    actor = request_actor(request)
    return {
        "kind": actor.kind,
        "id": actor.id,
        "name": actor.display_name,
        "agent": actor.agent,
    }


@router.get(
    "/constellations",
    response={200: list[ConstellationOut], **error_responses(body=False)},
    tags=["agents"],
    summary="List your constellations",
)
def list_constellations(request: HttpRequest) -> object:
    return constellation_list_for_actor(actor=request_actor(request))


@router.get(
    "/agents",
    response={200: list[AgentOut], **error_responses(404, body=False)},
    tags=["agents"],
    summary="List agents",
)
def list_agents(request: HttpRequest, constellation_id: Id | None = None) -> object:
    return agent_list_for_actor(
        actor=request_actor(request), constellation_id=constellation_id
    )


@router.get(
    "/agents/{agent_id}",
    response={200: AgentOut, **error_responses(404, body=False)},
    tags=["agents"],
    summary="Get an agent",
)
def get_agent(request: HttpRequest, agent_id: Id) -> object:
    return agent_get_for_actor(actor=request_actor(request), agent_id=agent_id)


@router.patch(
    "/agents/{agent_id}",
    response={200: AgentOut, **error_responses(403, 404, body=True)},
    tags=["agents"],
    summary="Update an agent",
)
def update_agent(request: HttpRequest, agent_id: Id, payload: AgentUpdateIn) -> object:
    actor = request_actor(request)
    agent = agent_get_for_change(actor=actor, agent_id=agent_id)
    return agent_update(agent=agent, actor=actor, **payload.dict(exclude_unset=True))
