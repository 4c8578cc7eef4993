"""Summaries shared across a constellation: per agent and per period.

``model`` names what wrote the summary: an LLM model name, or
``extractive:embedding`` / ``extractive:lexical`` when sentences were
picked from the source rather than written.
"""

from django.db import models

from pattern_site.kernel.agents.models import Agent, Constellation

EXTRACTIVE_PREFIX = "extractive:"


class AgentSummary(models.Model):
    agent = models.OneToOneField(
        Agent, on_delete=models.CASCADE, related_name="activity_summary"
    )
    recent_summary = models.TextField()
    messages_covered = models.PositiveIntegerField(default=0)
    # Time of the newest message summarised: the next refresh counts new
    # messages from here (the cost guard).
    covered_until = models.DateTimeField(null=True, blank=True)
    generated_at = models.DateTimeField()
    last_active = models.DateTimeField(null=True, blank=True)
    model = models.CharField(max_length=100)
    tokens_used = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "agent summaries"

    def __str__(self) -> str:
        return f"summary of {self.agent_id}"

    @property
    def is_extractive(self) -> bool:
        return self.model.startswith(EXTRACTIVE_PREFIX)


class ConstellationSummary(models.Model):
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="activity_summaries"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    summary = models.TextField()
    key_decisions = models.JSONField(default=list, blank=True)
    open_threads = models.JSONField(default=list, blank=True)
    model = models.CharField(max_length=100)
    tokens_used = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "constellation summaries"
        ordering = ["-period_end", "-id"]
        indexes = [
            models.Index(
                fields=["constellation", "period_end"], name="constsummary_period"
            )
        ]

    def __str__(self) -> str:
        return f"{self.constellation_id} {self.period_start:%Y-%m-%d}"

    @property
    def is_extractive(self) -> bool:
        return self.model.startswith(EXTRACTIVE_PREFIX)
