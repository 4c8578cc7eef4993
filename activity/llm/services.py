"""The per-constellation daily LLM token budget: check before, add after."""

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from activity.llm.models import LLMUsage
from pattern_site.kernel.errors import LimitExceeded


def llm_tokens_used_today(*, constellation_id: int) -> int:
    row = LLMUsage.objects.filter(
        constellation_id=constellation_id, day=timezone.now().date()
    ).first()
    return row.tokens if row else 0


def llm_budget_check(*, constellation_id: int, tokens: int) -> None:
    budget = settings.LLM_DAILY_TOKEN_BUDGET
    used = llm_tokens_used_today(constellation_id=constellation_id)
    if used + tokens > budget:
        raise LimitExceeded(
            f"constellation {constellation_id} has used {used} of its {budget} "
            f"LLM tokens today; this call may need {tokens}. The budget resets "
            "at midnight UTC (LLM_DAILY_TOKEN_BUDGET)."
        )


@transaction.atomic
def llm_usage_add(*, constellation_id: int, tokens: int) -> None:
    day = timezone.now().date()
    updated = LLMUsage.objects.filter(
        constellation_id=constellation_id, day=day
    ).update(tokens=F("tokens") + tokens, calls=F("calls") + 1)
    if not updated:
        usage = LLMUsage(
            constellation_id=constellation_id, day=day, tokens=tokens, calls=1
        )
        usage.full_clean(validate_unique=False, validate_constraints=False)
        usage.save()
