"""The per-constellation daily LLM token budget: check before, add after."""

from django.conf import settings
from django.db import connection
from django.db.models.expressions import RawSQL
from django.utils import timezone

from activity.llm.models import LLMUsage
from pattern_site.kernel.db.compiled import CompiledQuery
from pattern_site.kernel.db.rows import rows_add
from pattern_site.kernel.errors import LimitExceeded

# Read before every model call (compiled once); the day goes in prepared,
# through RawSQL, as a date column's value.
_TOKENS_ON = CompiledQuery(
    lambda constellation_id, day: (
        LLMUsage.objects.filter(
            constellation_id=constellation_id, day=RawSQL("%s", (day,))
        )
        .order_by()
        .values_list("tokens")[:1]
    ),
    constellation_id=-730_301,
    day="\x00day",
)


def llm_tokens_used_today(*, constellation_id: int) -> int:
    day = LLMUsage._meta.get_field("day").get_db_prep_value(
        timezone.now().date(), connection
    )
    row = _TOKENS_ON.first_row(constellation_id=constellation_id, day=day)
    return row[0] if row else 0


def llm_budget_check(*, constellation_id: int, tokens: int) -> None:
    budget = settings.LLM_DAILY_TOKEN_BUDGET
    used = llm_tokens_used_today(constellation_id=constellation_id)
    if used + tokens > budget:
        raise LimitExceeded(
            f"constellation {constellation_id} has used {used} of its {budget} "
            f"LLM tokens today; this call may need {tokens}. The budget resets "
            "at midnight UTC (LLM_DAILY_TOKEN_BUDGET)."
        )


def llm_usage_add(*, constellation_id: int, tokens: int) -> None:
    """Count a call and its tokens in the constellation's day: one upsert
    statement (each model call of a turn makes one), no transaction."""
    day = LLMUsage._meta.get_field("day").get_db_prep_value(
        timezone.now().date(), connection
    )
    rows_add(
        LLMUsage,
        key=("constellation", "day"),
        field=("tokens", "calls"),
        rows=[(constellation_id, day, tokens, 1)],
    )
