from datetime import datetime
from typing import Any

from ninja import Field, Schema

from activity.stream.models import Importance


class ActivityEventOut(Schema):
    id: int
    constellation_id: int
    agent_id: int | None
    actor: str | None
    event_type: str
    importance: str
    text: str
    details: dict[str, Any]
    created_at: datetime

    @staticmethod
    def resolve_actor(obj: Any) -> str | None:
        return obj.actor_user.get_username() if obj.actor_user_id else None


class NotableIn(Schema):
    description: str = Field(..., min_length=1, max_length=400)
    importance: Importance = Importance.MEDIUM
    agents_involved: list[int] = Field(default_factory=list, max_length=20)
    constellation_id: int | None = None


class NotableOut(Schema):
    recorded: bool


class CatchUpOut(Schema):
    agent_id: int
    due: bool
    since: datetime | None
    away_seconds: int
    text: str
    budget_tokens: int
    tokens: int
    omitted_lines: int
    summarizer: str
