"""The dashboard's view of what an agent sees: its built context."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memory import context
from pattern_site.kernel.agents.selectors import (
    agent_get_for_actor,
)
from pattern_site.kernel.web import page_actor


@login_required
def agent_context_page(request: HttpRequest, agent_id: int) -> HttpResponse:
    """What this agent sees: its built system prompt with token counts."""
    agent = agent_get_for_actor(actor=page_actor(request), agent_id=agent_id)
    batch = [b for b in request.GET.get("batch", "").split(",") if b.strip()]
    built = context.context_build(agent=agent, batch_block_ids=batch)
    return render(
        request,
        "memory/context.html",
        {
            "agent": agent,
            "constellation": agent.constellation,
            "built": built,
            "batch": ",".join(batch),
        },
    )
