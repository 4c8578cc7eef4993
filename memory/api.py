"""The context builder's endpoint: the system prompt an agent runs with."""

from typing import Any

from django.http import HttpRequest
from ninja import Body, Router

from coordination.agents.selectors import agent_get_private
from coordination.apitypes import error_responses
from coordination.auth import request_actor
from memory import context
from memory.schemas import ContextBuildIn, ContextOut

router = Router()


@router.post(
    "/context/build",
    response={200: ContextOut, **error_responses(403, 404, body=True)},
    tags=["context"],
    summary="Build a system prompt",
)
def build_context(
    request: HttpRequest, payload: Body[ContextBuildIn] = None
) -> dict[str, Any]:
    """The agent's system prompt from its memory, with tokens per section.
    Without a body: the calling agent's prompt with every default."""
    payload = payload or ContextBuildIn()
    actor = request_actor(request)
    agent = agent_get_private(actor=actor, agent_id=payload.agent_id)
    built = context.context_build(
        agent=agent,
        batch_block_ids=payload.batch_block_ids,
        base_instructions=payload.base_instructions,
        tool_rules=[context.tool_rule_parse(r.dict()) for r in payload.tool_rules],
        model_name=payload.model,
        include_descriptions=payload.include_descriptions,
    )
    return built.as_dict()
