"""The ``build_context`` agent tool: the system prompt the calling agent
runs with, built from its memory (``memory.context``)."""

from typing import Any

from memory.context import context_build_for_actor
from memory.schemas import BUILD_CONTEXT, ContextBuildIn, ContextOut
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.tools import AgentTool, tool_register


def build_context_tool(*, actor: Actor, args: ContextBuildIn) -> dict[str, Any]:
    return context_build_for_actor(actor=actor, args=args).as_dict()


tool_register(
    AgentTool(
        name="build_context",
        description=BUILD_CONTEXT,
        args=ContextBuildIn,
        out=ContextOut,
        run=build_context_tool,
        writes=False,
        summary="Build a system prompt",
        tags=("context",),
        path="/context/build",
        # Without a body: the calling agent's prompt with every default.
        body_optional=True,
    ),
)
