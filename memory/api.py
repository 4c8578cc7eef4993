"""The context builder's endpoint: the system prompt an agent runs with."""

from typing import Any

from django.http import HttpRequest
from ninja import Body, Router

from memory import context
from memory.schemas import BUILD_CONTEXT, ContextBuildIn, ContextOut
from pattern_site.kernel.apitypes import error_responses
from pattern_site.kernel.auth import request_actor

router = Router()


@router.post(
    "/context/build",
    response={200: ContextOut, **error_responses(403, 404, body=True)},
    tags=["context"],
    summary="Build a system prompt",
    description=BUILD_CONTEXT,
)
def build_context(
    request: HttpRequest, payload: Body[ContextBuildIn] = None
) -> dict[str, Any]:
    """Without a body: the calling agent's prompt with every default."""
    built = context.context_build_for_actor(
        actor=request_actor(request), args=payload or ContextBuildIn()
    )
    return built.as_dict()
