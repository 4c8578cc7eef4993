"""Tokens spent on LLM calls, per constellation and UTC day (the budget)."""

from django.db import models

from pattern_site.kernel.agents.models import Constellation


class LLMUsage(models.Model):
    constellation = models.ForeignKey(
        Constellation, on_delete=models.CASCADE, related_name="llm_usage"
    )
    day = models.DateField()
    tokens = models.PositiveBigIntegerField(default=0)
    calls = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["constellation", "day"], name="llm_usage_one_row_per_day"
            )
        ]

    def __str__(self) -> str:
        return f"{self.constellation_id} {self.day}: {self.tokens}"
