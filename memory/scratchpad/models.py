"""The scratchpad: an agent's working notes for one conversation, key to
JSON value.

Private to the agent whose conversation it is (other agents never see it;
the humans of its constellation read it in the dashboard).  Archiving the
conversation keeps its notes, as a trail of how the work went; only an
explicit clear removes them.
"""

from django.db import models

from memory.longterm.models import Conversation
from pattern_site.kernel.agents.models import Agent, Constellation


class ScratchpadEntry(models.Model):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="scratchpad_entries"
    )
    # Denormalised from the conversation so visibility and the backup scope
    # by them directly.
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=100)
    value = models.JSONField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "scratchpad entries"
        ordering = ["conversation_id", "key"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "key"],
                name="scratchpad_key_unique_per_conversation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.key}@{self.conversation_id}"
