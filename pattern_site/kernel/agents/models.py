"""Constellations, their agents and the agents' API tokens."""

from django.conf import settings
from django.db import models


class Constellation(models.Model):
    """A team of agents working for one person, the partner."""

    name = models.CharField(max_length=100, unique=True)
    partner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="partner_of",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="member_of",
        help_text="Other humans who may see and edit this constellation.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "coordination"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Agent(models.Model):
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    role = models.CharField(max_length=200, blank=True)
    model_name = models.CharField(max_length=100, blank=True)
    # The site answers the agent's group deliveries itself, with
    # ``model_name`` through the LLM provider (activity.llm), instead of an
    # external program taking them from the agent's inbox.
    # db_default too: rows written by code that predates the column (a
    # rolled-back deploy, a migration's historical models) get False.
    answered_by_llm = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Group deliveries are answered by model_name through the"
        " site's LLM provider, not by an external program.",
    )
    is_active = models.BooleanField(default=True)
    last_active_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "coordination"
        ordering = ["constellation_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "name"],
                name="agent_name_unique_per_constellation",
            ),
            models.CheckConstraint(
                condition=models.Q(answered_by_llm=False) | ~models.Q(model_name=""),
                name="agent_answered_by_llm_has_model",
                violation_error_message=(
                    "an agent answered by the LLM needs a model_name"
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.constellation_id})"


class AgentToken(models.Model):
    """A bearer token of an agent.  Only its SHA-256 is stored."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    key_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(
        max_length=16, help_text="First characters, to tell tokens apart."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "coordination"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "active"
        return f"{self.prefix}… ({state})"
