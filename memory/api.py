"""The context builder's endpoint: the system prompt an agent runs with."""

from typing import Any

from django.http import HttpRequest
from ninja import Router

from coordination.auth import request_actor
from memory import context
from memory.schemas import BUILD_CONTEXT, ContextBuildIn, ContextOut

router = Router(tags=["context"])


@router.post(
    "/context/build",
    response=ContextOut,
    summary="Build a system prompt",
    description=BUILD_CONTEXT,
)
def build_context(request: HttpRequest, payload: ContextBuildIn) -> dict[str, Any]:
    built = context.context_build_for_actor(actor=request_actor(request), args=payload)
    return built.as_dict()
