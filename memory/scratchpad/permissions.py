"""Who may read and change a conversation's scratchpad: the one place that
decides.

The notes are the agent's working state: only the agent whose
conversation it is writes or clears them.  The humans of its
constellation may read them (the dashboard shows them read-only); to any
other agent they do not exist (``NotFound``).
"""

from memory.longterm.models import Conversation
from pattern_site.kernel.actors import Actor
from pattern_site.kernel.agents.selectors import constellation_list_for_actor
from pattern_site.kernel.errors import NotFound, PermissionDenied


def _own(actor: Actor, conversation: Conversation) -> bool:
    return actor.agent is not None and actor.agent.pk == conversation.agent_id


def scratchpad_read_check(*, actor: Actor, conversation: Conversation) -> None:
    if actor.kind == "agent":
        readable = _own(actor, conversation)
    else:
        readable = (
            constellation_list_for_actor(actor=actor)
            .filter(pk=conversation.constellation_id)
            .exists()
        )
    if not readable:
        raise NotFound(f"conversation {conversation.pk} does not exist")


def scratchpad_change_check(*, actor: Actor, conversation: Conversation) -> None:
    scratchpad_read_check(actor=actor, conversation=conversation)
    if not _own(actor, conversation):
        raise PermissionDenied(
            "a scratchpad is its agent's working notes: only the agent of"
            f" conversation {conversation.pk} writes or clears them"
        )
